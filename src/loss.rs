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
