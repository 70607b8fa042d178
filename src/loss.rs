//! The signal that tells a holder its lock is gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::time::Instant;

/// Completes or reports `true` once the lock may no longer be held by its owner: a renewal
/// found it gone, renewals failed until the lease could have run out, or (with an explicit
/// lease) the lease ended.
///
/// Cheap to clone; every clone watches the same hold.
#[derive(Clone, Debug)]
pub struct LossSignal {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    lost: AtomicBool,
    notify: Notify,
    /// With an explicit lease: when it ends (nobody renews it).
    expires: Option<Mutex<Instant>>,
}

impl LossSignal {
    pub(crate) fn new(expires: Option<Instant>) -> Self {
        LossSignal {
            inner: Arc::new(Inner {
                lost: AtomicBool::new(false),
                notify: Notify::new(),
                expires: expires.map(Mutex::new),
            }),
        }
    }

    fn expires(&self) -> Option<Instant> {
        self.inner
            .expires
            .as_ref()
            .map(|m| *m.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// An explicit lease was set again (reentry, partial release) at `expires`.
    pub(crate) fn extend(&self, expires: Instant) {
        if let Some(m) = &self.inner.expires {
            *m.lock().unwrap_or_else(|e| e.into_inner()) = expires;
        }
    }

    pub(crate) fn fire(&self) {
        self.inner.lost.store(true, Ordering::Release);
        self.inner.notify.notify_waiters();
    }

    /// Whether the lock is known or presumed lost, without waiting.
    pub fn is_lost(&self) -> bool {
        self.inner.lost.load(Ordering::Acquire)
            || self.expires().is_some_and(|at| at <= Instant::now())
    }

    /// Completes when the lock is lost; never, while it is held.
    pub async fn lost(&self) {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_lost() {
                return;
            }
            match self.expires() {
                Some(at) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }
}

/// A hold's loss state. The [`LossSignal`] handed out is made only when first asked for
/// (most holds are released without anyone asking: one allocation less per lock).
#[derive(Debug)]
pub(crate) struct Loss {
    state: Mutex<LossState>,
}

#[derive(Debug)]
struct LossState {
    lost: bool,
    /// With an explicit lease: when it ends.
    expires: Option<Instant>,
    /// Kept in step with the fields above (changed under the same lock).
    signal: Option<LossSignal>,
}

impl Loss {
    pub(crate) fn new(expires: Option<Instant>) -> Self {
        Loss {
            state: Mutex::new(LossState {
                lost: false,
                expires,
                signal: None,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LossState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The signal, made now if nobody asked for it before.
    pub(crate) fn signal(&self) -> LossSignal {
        let mut state = self.state();
        let (lost, expires) = (state.lost, state.expires);
        state
            .signal
            .get_or_insert_with(|| {
                let signal = LossSignal::new(expires);
                if lost {
                    signal.fire();
                }
                signal
            })
            .clone()
    }

    /// Whether the lock is known or presumed lost, without waiting.
    pub(crate) fn is_lost(&self) -> bool {
        let state = self.state();
        state.lost || state.expires.is_some_and(|at| at <= Instant::now())
    }

    /// An explicit lease was set again (reentry, partial release) at `expires`.
    pub(crate) fn extend(&self, expires: Instant) {
        let mut state = self.state();
        if let Some(at) = &mut state.expires {
            *at = expires;
            if let Some(signal) = &state.signal {
                signal.extend(expires);
            }
        }
    }

    pub(crate) fn fire(&self) {
        let mut state = self.state();
        state.lost = true;
        if let Some(signal) = &state.signal {
            signal.fire();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_signal_made_late_still_carries_the_loss() {
        // Fired before anyone asked for the signal.
        let loss = Loss::new(None);
        assert!(!loss.is_lost());
        loss.fire();
        assert!(loss.is_lost());
        let signal = loss.signal();
        assert!(signal.is_lost());
        signal.lost().await;

        // Asked for first, fired later: the same signal learns it.
        let loss = Loss::new(None);
        let signal = loss.signal();
        let waiting = tokio::spawn(async move { signal.lost().await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        loss.fire();
        waiting.await.unwrap();
        assert!(loss.signal().is_lost());
    }

    #[tokio::test(start_paused = true)]
    async fn an_explicit_lease_moves_for_signals_made_before_and_after() {
        let start = Instant::now();
        let loss = Loss::new(Some(start + Duration::from_secs(1)));
        let early = loss.signal();
        loss.extend(start + Duration::from_secs(3));
        let late = loss.signal();
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!loss.is_lost() && !early.is_lost() && !late.is_lost());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(loss.is_lost() && early.is_lost() && late.is_lost());
    }
}
