//! A watchdog started only once the work under a lock has to wait, then polled beside it:
//! work that finishes at once (a handler that answers from memory) never schedules a
//! renewal, and the manager's schedule, which every held lock with a watchdog would
//! otherwise enter and leave, is not touched.

use std::future::Future;
use std::task::Poll;

use crate::engine::background::renewal::watchdog::{InlineWatchdog, Keeper};
use crate::engine::hold::guard::LockGuard;

/// The watchdog of a lock taken with it handed back unstarted
/// (`LockRequest::acquire_unwatched`). Dropped before the lock is released.
pub(crate) struct DeferredWatchdog {
    /// Not started yet (`None` once started, or for a lease that is not renewed).
    keeper: Option<Keeper>,
    /// Renewing; `None` before it starts and once it ends (the lock was lost).
    renewing: Option<InlineWatchdog>,
}

impl DeferredWatchdog {
    /// The watchdog `keeper` (`None`: the lease is not renewed), not started.
    pub(crate) fn new(keeper: Option<Keeper>) -> Self {
        DeferredWatchdog {
            keeper,
            renewing: None,
        }
    }

    /// Runs `work` under `guard`'s lock, keeping its lease alive while the work waits.
    ///
    /// # Cancel safety
    /// Cancel safe: the watchdog stays as it was (started or not), for the next work.
    pub(crate) async fn run<F: Future>(&mut self, guard: &LockGuard, work: F) -> F::Output {
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(output) = work.as_mut().poll(cx) {
                return Poll::Ready(output);
            }
            if let Some(keeper) = self.keeper.take() {
                self.renewing = Some(guard.keep_alive(keeper));
            }
            // It ends only when the lock is lost (the loss signal fires): nothing more to
            // renew; the release then finds the lock gone.
            if let Some(renewing) = &mut self.renewing {
                if renewing.as_mut().poll(cx).is_ready() {
                    self.renewing = None;
                }
            }
            Poll::Pending
        })
        .await
    }
}
