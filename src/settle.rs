//! Finishing backend operations whose caller went away.
//!
//! Once an acquisition has been sent, dropping its future does not stop it: the backend
//! may still apply it. [`Settle`] keeps such an operation running in the background and
//! hands its result to an undo step (for an acquisition: release what was taken).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::backend::BoxFuture;

type Undo<T> = Box<dyn FnOnce(T) -> Option<BoxFuture<()>> + Send>;

/// A backend operation that is finished (and undone as needed) even if dropped midway.
pub(crate) struct Settle<T: Send + 'static> {
    operation: Option<BoxFuture<T>>,
    polled: bool,
    undo: Option<Undo<T>>,
}

impl<T: Send + 'static> Settle<T> {
    /// `undo` receives the result when the caller is gone, and returns the clean-up to run.
    pub(crate) fn new(
        operation: BoxFuture<T>,
        undo: impl FnOnce(T) -> Option<BoxFuture<()>> + Send + 'static,
    ) -> Self {
        Settle {
            operation: Some(operation),
            polled: false,
            undo: Some(Box::new(undo)),
        }
    }
}

impl<T: Send + 'static> Future for Settle<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = &mut *self;
        let operation = this
            .operation
            .as_mut()
            .expect("Settle polled after completion");
        this.polled = true;
        let result = operation.as_mut().poll(cx);
        if result.is_ready() {
            this.operation = None;
        }
        result
    }
}

impl<T: Send + 'static> Drop for Settle<T> {
    fn drop(&mut self) {
        // Never polled: nothing was sent.
        let (Some(operation), true) = (self.operation.take(), self.polled) else {
            return;
        };
        let undo = self.undo.take();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let result = operation.await;
                    if let Some(cleanup) = undo.and_then(|undo| undo(result)) {
                        cleanup.await;
                    }
                });
            }
            Err(_) => tracing::warn!(
                "a lock operation was abandoned outside a Tokio runtime; \
                 it cannot be undone and its lease will run out"
            ),
        }
    }
}
