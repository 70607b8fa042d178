//! The signal that tells a holder its lock is gone, a margin before its lease could end
//! (see [`LossMargin`](crate::lease::LossMargin)).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Completes or reports `true` once the lock may no longer be held by its owner: a renewal
/// found it gone, no renewal succeeded by the loss deadline, or (with an explicit lease)
/// the loss deadline passed. The loss deadline is a [`LossMargin`](crate::lock::LossMargin) before the lease could
/// end.
///
/// Cheap to clone; every clone watches the same hold (or, for a
/// [multi-lock](crate::lock::MultiLockGuard::loss), the same holds: it fires when any of them is
/// lost).
#[derive(Clone, Debug)]
pub struct LossSignal {
    source: Source,
}

#[derive(Clone, Debug)]
enum Source {
    /// One hold's.
    Hold(Arc<SignalInner>),
    /// Lost when any of these is.
    Any(Arc<[LossSignal]>),
}

#[derive(Debug)]
struct SignalInner {
    lost: AtomicBool,
    notify: Notify,
    /// The loss deadline (the lease end as known, minus the margin).
    deadline: Mutex<Instant>,
}

impl SignalInner {
    fn new(deadline: Instant, lost: bool) -> Self {
        SignalInner {
            lost: AtomicBool::new(lost),
            notify: Notify::new(),
            deadline: Mutex::new(deadline),
        }
    }

    fn deadline(&self) -> Instant {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn move_deadline(&self, deadline: Instant) {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) = deadline;
    }

    fn fire(&self) {
        self.lost.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire) || self.deadline() <= Instant::now()
    }

    async fn lost(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_lost() {
                return;
            }
            // A renewal may move the deadline meanwhile: look again when it passes.
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(self.deadline()) => {}
            }
        }
    }
}

impl LossSignal {
    /// Lost as soon as any of `signals` is (a multi-lock's parts).
    pub(crate) fn any(signals: Vec<LossSignal>) -> Self {
        LossSignal {
            source: Source::Any(signals.into()),
        }
    }

    /// Whether the lock is known or presumed lost, without waiting.
    pub fn is_lost(&self) -> bool {
        match &self.source {
            Source::Hold(inner) => inner.is_lost(),
            Source::Any(signals) => signals.iter().any(LossSignal::is_lost),
        }
    }

    /// Completes when the lock is lost; never, while it is held.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn lost(&self) {
        match &self.source {
            Source::Hold(inner) => inner.lost().await,
            Source::Any(signals) => {
                let mut waits: Vec<_> = signals.iter().map(|s| Box::pin(s.lost())).collect();
                std::future::poll_fn(|cx| {
                    if waits
                        .iter_mut()
                        .any(|wait| wait.as_mut().poll(cx).is_ready())
                    {
                        std::task::Poll::Ready(())
                    } else {
                        std::task::Poll::Pending
                    }
                })
                .await
            }
        }
    }
}

/// A hold's loss state: when its lease may end, and whether it was found lost. The
/// [`LossSignal`] handed out is made only when first asked for (most holds are released
/// without anyone asking: one allocation less per lock).
#[derive(Debug)]
pub(crate) struct Loss {
    state: Mutex<LossState>,
}

#[derive(Debug)]
struct LossState {
    lost: bool,
    /// The lease cannot end before this: its last acquisition or renewal was sent a lease
    /// before.
    valid_until: Instant,
    margin: Duration,
    /// Kept in step with the fields above (changed under the same lock).
    signal: Option<Arc<SignalInner>>,
}

impl LossState {
    fn deadline(&self) -> Instant {
        self.valid_until - self.margin
    }
}

impl Loss {
    /// A hold whose lease runs until `valid_until`, told of its loss `margin` before.
    pub(crate) fn new(valid_until: Instant, margin: Duration) -> Self {
        Loss {
            state: Mutex::new(LossState {
                lost: false,
                valid_until,
                margin,
                signal: None,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, LossState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The signal, made now if nobody asked for it before.
    pub(crate) fn signal(&self) -> LossSignal {
        let mut state = self.state();
        let (lost, deadline) = (state.lost, state.deadline());
        let inner = state
            .signal
            .get_or_insert_with(|| Arc::new(SignalInner::new(deadline, lost)))
            .clone();
        LossSignal {
            source: Source::Hold(inner),
        }
    }

    /// Whether the lock is known or presumed lost, without waiting.
    pub(crate) fn is_lost(&self) -> bool {
        let state = self.state();
        state.lost || state.deadline() <= Instant::now()
    }

    /// When the lease may end at the earliest.
    #[cfg(any(feature = "axum", test))]
    pub(crate) fn valid_until(&self) -> Instant {
        self.state().valid_until
    }

    /// When the holder is told of the loss unless the lease is set again first.
    pub(crate) fn deadline(&self) -> Instant {
        self.state().deadline()
    }

    /// The lease was set again (a renewal, a reentry, a partial release) by a command sent
    /// at `sent + lease = valid_until`.
    pub(crate) fn extend(&self, valid_until: Instant) {
        let mut state = self.state();
        state.valid_until = valid_until;
        let deadline = state.deadline();
        if let Some(signal) = &state.signal {
            signal.move_deadline(deadline);
        }
    }

    /// Marks the lock lost; runs `first` the first time, before anyone waiting on the
    /// signal is woken (whoever wakes already sees what `first` recorded, e.g. the loss
    /// counted in the metrics).
    pub(crate) fn fire(&self, first: impl FnOnce()) {
        let mut state = self.state();
        if !state.lost {
            state.lost = true;
            first();
        }
        if let Some(signal) = &state.signal {
            signal.fire();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::engine::hold::loss::*;
    use crate::lease::LossMargin;

    const NO_MARGIN: Duration = Duration::ZERO;

    #[tokio::test(start_paused = true)]
    async fn a_signal_made_late_still_carries_the_loss() {
        let far = Instant::now() + Duration::from_secs(3600);
        // Fired before anyone asked for the signal.
        let loss = Loss::new(far, NO_MARGIN);
        assert!(!loss.is_lost());
        loss.fire(|| {});
        assert!(loss.is_lost());
        let signal = loss.signal();
        assert!(signal.is_lost());
        signal.lost().await;

        // Asked for first, fired later: the same signal learns it.
        let loss = Loss::new(far, NO_MARGIN);
        let signal = loss.signal();
        let waiting = tokio::spawn(async move { signal.lost().await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        loss.fire(|| {});
        waiting.await.unwrap();
        assert!(loss.signal().is_lost());
    }

    #[test]
    fn what_the_first_firing_records_is_there_before_anyone_wakes() {
        let far = Instant::now() + Duration::from_secs(3600);
        let loss = Loss::new(far, NO_MARGIN);
        let signal = loss.signal();
        let mut runs = 0;
        // A waiter woken by the signal reads what `first` recorded (the metrics test
        // read the loss counter before it was counted): the signal fires after it.
        loss.fire(|| {
            assert!(!signal.is_lost());
            runs += 1;
        });
        loss.fire(|| runs += 1);
        assert_eq!(runs, 1);
        assert!(signal.is_lost());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_set_again_moves_the_deadline_for_signals_made_before_and_after() {
        let start = Instant::now();
        let loss = Loss::new(start + Duration::from_secs(1), NO_MARGIN);
        let early = loss.signal();
        loss.extend(start + Duration::from_secs(3));
        let late = loss.signal();
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!loss.is_lost() && !early.is_lost() && !late.is_lost());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(loss.is_lost() && early.is_lost() && late.is_lost());
    }

    #[tokio::test(start_paused = true)]
    async fn the_signal_fires_a_margin_before_the_lease_could_end() {
        let start = Instant::now();
        let lease = Duration::from_secs(3);
        let margin = LossMargin::DEFAULT.for_lease(lease);
        assert_eq!(margin, Duration::from_millis(32), "3 s × 1 % + 2 ms");
        let loss = Loss::new(start + lease, margin);
        let signal = loss.signal();
        let waiting = tokio::spawn(async move {
            signal.lost().await;
            Instant::now()
        });
        let fired = waiting.await.unwrap();
        assert_eq!(fired, start + lease - margin);
        assert!(loss.is_lost());
    }
}
