//! Backend operations that finish even when their caller goes away.
//!
//! Once an acquisition has been sent, dropping its future does not stop it: the backend
//! may still apply it. [`DropSafe`] keeps such an operation running in the background and
//! hands its result to an undo step (for an acquisition: release what was taken).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::backend::BoxFuture;
use crate::telemetry::TARGET;

type Undo<T> = Box<dyn FnOnce(T) -> Option<BoxFuture<()>> + Send>;

/// A backend operation that is finished (and undone as needed) even if dropped midway.
pub(crate) struct DropSafe<T: Send + 'static> {
    operation: Option<BoxFuture<T>>,
    undo: Option<Undo<T>>,
    /// Started at once, beside the operation, when its caller goes away first.
    abandon: Option<Abandon>,
}

type Abandon = Box<dyn FnOnce() -> BoxFuture<()> + Send>;

impl<T: Send + 'static> DropSafe<T> {
    /// `undo` receives the result when the caller is gone, and returns the clean-up to run.
    pub(crate) fn new(
        operation: BoxFuture<T>,
        undo: impl FnOnce(T) -> Option<BoxFuture<()>> + Send + 'static,
    ) -> Self {
        DropSafe {
            operation: Some(operation),
            undo: Some(Box::new(undo)),
            abandon: None,
        }
    }

    /// With `abandon` started at once when the caller goes away before the operation
    /// ends, while the operation is still finished (an acquisition waiting in the store's
    /// own queue leaves it, so that it ends now).
    pub(crate) fn on_abandon(
        mut self,
        abandon: impl FnOnce() -> BoxFuture<()> + Send + 'static,
    ) -> Self {
        self.abandon = Some(Box::new(abandon));
        self
    }
}

impl<T: Send + 'static> Future for DropSafe<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = &mut *self;
        let operation = this
            .operation
            .as_mut()
            .expect("DropSafe polled after completion");
        let result = operation.as_mut().poll(cx);
        if result.is_ready() {
            this.operation = None;
        }
        result
    }
}

impl<T: Send + 'static> Drop for DropSafe<T> {
    fn drop(&mut self) {
        // Not finished. Even a never-polled operation may already have taken effect (a
        // backend may act when the operation is created, as the memory backend does), so
        // finish it and undo what it did.
        let Some(operation) = self.operation.take() else {
            return;
        };
        let undo = self.undo.take();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                if let Some(abandon) = self.abandon.take() {
                    runtime.spawn(abandon());
                }
                runtime.spawn(async move {
                    let result = operation.await;
                    if let Some(cleanup) = undo.and_then(|undo| undo(result)) {
                        cleanup.await;
                    }
                });
            }
            Err(_) => tracing::warn!(
                target: TARGET,
                "a lock operation was abandoned outside a Tokio runtime; \
                 it cannot be undone and its lease will run out"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    // The module under test, named in full (its tests see its private items).
    use crate::engine::background::drop_safe::*;

    #[tokio::test]
    async fn an_abandoned_operation_is_finished_and_undone_even_if_never_polled() {
        for poll_first in [false, true] {
            let (undone_tx, undone_rx) = tokio::sync::oneshot::channel();
            let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
            let mut settle = DropSafe::new(
                Box::pin(async move {
                    let _ = go_rx.await;
                    42
                }),
                move |result| {
                    let _ = undone_tx.send(result);
                    None
                },
            );
            if poll_first {
                assert!(futures_poll_once(&mut settle).is_pending());
            }
            drop(settle);
            let _ = go_tx.send(());
            assert_eq!(undone_rx.await.unwrap(), 42, "poll_first = {poll_first}");
        }
    }

    #[tokio::test]
    async fn abandoning_starts_at_once_beside_the_operation_and_only_when_abandoned() {
        let (abandoned_tx, abandoned_rx) = tokio::sync::oneshot::channel();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let settle = DropSafe::new(
            Box::pin(async move {
                let _ = go_rx.await;
            }),
            |_| None,
        )
        .on_abandon(move || {
            Box::pin(async move {
                let _ = abandoned_tx.send(());
            })
        });
        drop(settle);
        // The operation has not ended (it waits for `go`), yet the abandonment ran.
        abandoned_rx.await.expect("abandoned at once");
        let _ = go_tx.send(());

        let (abandoned_tx, mut abandoned_rx) = tokio::sync::oneshot::channel::<()>();
        let finished = DropSafe::new(Box::pin(async {}), |_| None).on_abandon(move || {
            Box::pin(async move {
                let _ = abandoned_tx.send(());
            })
        });
        finished.await;
        assert!(
            abandoned_rx.try_recv().is_err(),
            "a finished operation is not abandoned"
        );
    }

    fn futures_poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
        let waker = std::task::Waker::noop();
        Pin::new(future).poll(&mut Context::from_waker(waker))
    }
}
