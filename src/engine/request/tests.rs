//! Tests of a request: outside a runtime, and the size of its future.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use crate::{LockError, LockManager};

/// Runs `future` on this thread, outside any Tokio runtime.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut Context::from_waker(&waker)) {
            return output;
        }
        std::thread::park();
    }
}

/// Waiting needs the current runtime's timers: outside one it is an error, not a panic,
/// even when the manager remembers the runtime it was used in before.
#[test]
fn waiting_outside_a_runtime_is_an_error() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let locks = LockManager::memory();
    let held = runtime.block_on(locks.lock("busy").acquire()).unwrap();
    let waiting = std::thread::scope(|scope| {
        scope
            .spawn(|| block_on(locks.lock("busy").wait(Duration::from_millis(10)).acquire()))
            .join()
    });
    let error = waiting.expect("no panic").unwrap_err();
    assert!(
        matches!(&error, LockError::Unavailable(e) if e.to_string().contains("Tokio runtime")),
        "{error}"
    );
    let released = runtime.block_on(held.release()).unwrap();
    assert_eq!(released, crate::error::Released::Unlocked);
}

/// An acquisition's future is small: callers keep it in their own futures (a handler's,
/// boxed by axum for every request). Its waiting path is boxed apart; inline, the future
/// was over 2 KiB.
#[test]
fn an_acquisition_future_is_small() {
    let locks = LockManager::memory();
    let acquire = locks.lock("small").acquire();
    let try_acquire = locks.lock("small").try_acquire();
    for (what, size) in [
        ("acquire", std::mem::size_of_val(&acquire)),
        ("try_acquire", std::mem::size_of_val(&try_acquire)),
    ] {
        assert!(size <= 512, "{what}'s future is {size} bytes");
    }
}
