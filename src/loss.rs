//! The signal that tells a holder its lock is gone.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::guard::Hold;

/// Completes or reports `true` once the lock may no longer be held by its owner: a renewal
/// found it gone, renewals failed until the lease could have run out, or (with an explicit
/// lease) the lease ended.
///
/// Cheap to clone; every clone watches the same hold (and keeps that hold's bookkeeping,
/// not the lock, alive).
#[derive(Clone)]
pub struct LossSignal {
    hold: Arc<Hold>,
}

impl fmt::Debug for LossSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LossSignal")
            .field("key", &self.hold.key)
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl LossSignal {
    pub(crate) fn new(hold: Arc<Hold>) -> Self {
        LossSignal { hold }
    }

    /// Whether the lock is known or presumed lost, without waiting.
    pub fn is_lost(&self) -> bool {
        self.hold.loss.is_lost()
    }

    /// Completes when the lock is lost; never, while it is held.
    pub async fn lost(&self) {
        self.hold.loss.lost().await
    }
}

/// A hold's loss state, kept inside the hold (one allocation for both).
#[derive(Debug)]
pub(crate) struct Loss {
    lost: AtomicBool,
    notify: Notify,
    /// With an explicit lease: when it ends (nobody renews it).
    expires: Option<Mutex<Instant>>,
}

impl Loss {
    pub(crate) fn new(expires: Option<Instant>) -> Self {
        Loss {
            lost: AtomicBool::new(false),
            notify: Notify::new(),
            expires: expires.map(Mutex::new),
        }
    }

    fn expires(&self) -> Option<Instant> {
        self.expires
            .as_ref()
            .map(|m| *m.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// An explicit lease was set again (reentry, partial release) at `expires`.
    pub(crate) fn extend(&self, expires: Instant) {
        if let Some(m) = &self.expires {
            *m.lock().unwrap_or_else(|e| e.into_inner()) = expires;
        }
    }

    pub(crate) fn fire(&self) {
        self.lost.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Whether the lock is known or presumed lost, without waiting.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire) || self.expires().is_some_and(|at| at <= Instant::now())
    }

    /// Completes when the lock is lost; never, while it is held.
    pub(crate) async fn lost(&self) {
        loop {
            let notified = self.notify.notified();
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
