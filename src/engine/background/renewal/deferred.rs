//! A watchdog started only once the work under a lock has to wait, then polled beside it
//! (by the HTTP layer's response future and the idempotency layer's run): work that
//! finishes at once (a handler that answers from memory) never schedules a renewal.

use std::task::Context;

use crate::engine::background::renewal::watchdog::{InlineWatchdog, Keeper};

/// The watchdog of a lock taken with it handed back unstarted (`acquire_parts(false)`,
/// `LockRequest::acquire_unwatched`). Dropped before the lock is released.
pub(crate) enum DeferredWatchdog {
    /// Nothing to renew or watch (none held, a lease kept to its end, or lost).
    Off,
    /// Not started yet.
    Unstarted(Keeper),
    /// Renewing (or, for the HTTP layer's `abort_on_lost`, waiting for a loss).
    Running(InlineWatchdog),
}

impl DeferredWatchdog {
    /// The watchdog `keeper` (`None`: the lease is not renewed), not started.
    #[cfg(feature = "idempotency")]
    pub(crate) fn new(keeper: Option<Keeper>) -> Self {
        keeper.map_or(DeferredWatchdog::Off, DeferredWatchdog::Unstarted)
    }

    /// Starts the watchdog if need be (`start` makes it; `None`: nothing to start) and
    /// polls it: `true` once the lock is lost (the watchdog is off then).
    pub(crate) fn poll_lost(
        &mut self,
        start: impl FnOnce(Keeper) -> Option<InlineWatchdog>,
        cx: &mut Context<'_>,
    ) -> bool {
        if matches!(self, DeferredWatchdog::Unstarted(_)) {
            if let DeferredWatchdog::Unstarted(keeper) =
                std::mem::replace(self, DeferredWatchdog::Off)
            {
                if let Some(running) = start(keeper) {
                    *self = DeferredWatchdog::Running(running);
                }
            }
        }
        let DeferredWatchdog::Running(running) = self else {
            return false;
        };
        if running.as_mut().poll(cx).is_pending() {
            return false;
        }
        *self = DeferredWatchdog::Off;
        true
    }

    /// Runs `work` under `guard`'s lock, keeping its lease alive while the work waits.
    ///
    /// # Cancel safety
    /// Cancel safe: the watchdog stays as it was (started or not), for the next work.
    #[cfg(feature = "idempotency")]
    pub(crate) async fn run<F: std::future::Future>(
        &mut self,
        guard: &crate::engine::LockGuard,
        work: F,
    ) -> F::Output {
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(output) = work.as_mut().poll(cx) {
                return std::task::Poll::Ready(output);
            }
            // A loss ends the watchdog (the loss signal has fired): nothing more to renew;
            // the release then finds the lock gone.
            let _lost = self.poll_lost(|keeper| Some(guard.keep_alive(keeper)), cx);
            std::task::Poll::Pending
        })
        .await
    }
}
