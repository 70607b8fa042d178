//! The lock a request holds, as seen from handlers and inner layers.

use std::fmt;

use crate::engine::{HoldView, LockGuard, LockManager, LossSignal};
use crate::error::LockError;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

/// Put in the request extensions by [`LockLayer`](crate::layer::LockLayer) while the inner service
/// runs: which lock the request holds, and its loss signal.
///
/// ```
/// use axum::Extension;
/// use tower_lock::extract::HeldLock;
///
/// async fn handler(Extension(lock): Extension<HeldLock>) -> String {
///     if lock.is_lost() {
///         return "lost the lock; stopping".into();
///     }
///     format!("working under {}", lock.key())
/// }
/// # let _ = handler;
/// ```
#[derive(Clone)]
pub struct HeldLock {
    hold: HoldView,
    token: Option<u64>,
}

impl HeldLock {
    /// The shareable view of `guard`'s hold, for the request extensions.
    pub(crate) fn of(guard: &LockGuard) -> Self {
        HeldLock {
            hold: guard.view(),
            token: guard.fencing_token(),
        }
    }

    /// The lock's key.
    pub fn key(&self) -> &LockKey {
        self.hold.key()
    }

    /// The kind of lock the layer took (see [`LockLayer::read_write_by_method`](crate::layer::LockLayer::read_write_by_method)).
    pub fn kind(&self) -> LockKind {
        self.hold.kind()
    }

    /// The owner id written in the lock.
    pub fn owner(&self) -> &OwnerId {
        self.hold.owner()
    }

    /// The fencing token of the layer's acquisition when it takes a fenced lock
    /// ([`LockLayer::fenced`](crate::layer::LockLayer::fenced)); `None` for the other kinds. See
    /// [`LockGuard::fencing_token`].
    pub fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    /// The loss signal (completes if the lock is lost while the request runs).
    pub fn loss(&self) -> LossSignal {
        self.hold.loss()
    }

    /// Whether the lock is known or presumed lost.
    pub fn is_lost(&self) -> bool {
        self.hold.is_lost()
    }

    /// The manager that holds the lock (to take other locks with it).
    pub fn manager(&self) -> LockManager {
        self.hold.manager()
    }

    /// Enters the same lock again for the same owner (used by [`Locked`](crate::extract::Locked)).
    ///
    /// # Errors
    /// As [`LockGuard::reenter`].
    ///
    /// # Cancel safety
    /// As [`LockGuard::reenter`].
    pub async fn reenter(&self) -> Result<LockGuard, LockError> {
        self.hold.reenter().await
    }

    /// Another hold of `kind` for the same owner, where the rules allow (see
    /// [`LockGuard::read_lock`] and [`LockGuard::write_lock`]): used by the extractors.
    pub(crate) async fn hold_as(&self, kind: LockKind) -> Result<LockGuard, LockError> {
        self.hold.hold_as(kind).await
    }
}

impl fmt::Debug for HeldLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldLock")
            .field("key", self.hold.key())
            .field("owner", self.hold.owner())
            .field("fencing_token", &self.token)
            .finish()
    }
}
