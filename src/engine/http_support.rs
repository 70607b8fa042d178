//! What the HTTP layers need from the engine beyond the public API: a hold shared with
//! `HeldLock`, a release that does not wait out an outage (of one lock or a multi-lock), and a watchdog the layer's
//! response future polls itself (no task per request).

use std::sync::Arc;

use super::acquire::PendingWatchdog;
use super::guard::LockGuard;
use super::hold::Hold;
use super::manager::{LockManager, ManagerInner};
use super::multi::join_all;
use super::multi_guard::MultiLockGuard;
use super::outage::answer_within;
use super::renewal::{renew_once, Keeper};
use super::request::LockRequest;
use crate::backend::BoxFuture;
use crate::error::{BackendError, Released};
use crate::key::LockKey;
use crate::kind::LockKind;

/// A watchdog that the caller drives itself (polled inside the HTTP layer's future).
pub(crate) type InlineWatchdog = BoxFuture<()>;

impl LockGuard {
    /// The hold, shared (for the HTTP layer's view of it).
    pub(crate) fn shared_hold(&self) -> Arc<Hold> {
        self.hold().clone()
    }

    /// Releases, but returns early (`None`) once the backend says it cannot be reached: the
    /// release, with its re-sends, then goes on in the background. For the HTTP layer,
    /// whose response must not wait for Redis to come back.
    pub(crate) async fn release_promptly(self) -> Option<Result<Released, BackendError>> {
        let manager = self.hold().manager().clone();
        answer_within(self.release(), None, &manager).await.ok()
    }

    /// Starts the watchdog that `LockRequest::acquire_parts` handed back unstarted, for
    /// the caller to poll.
    pub(crate) fn keep_alive(&self, keeper: PendingWatchdog) -> InlineWatchdog {
        Box::pin(keep_alive(self.hold().clone(), keeper))
    }
}

impl MultiLockGuard {
    /// Releases every part together, each as [`LockGuard::release_promptly`]: the parts
    /// whose backend cannot be reached go on releasing in the background. Each part's key
    /// and outcome.
    pub(crate) async fn release_promptly(
        self,
    ) -> Vec<(LockKey, Option<Result<Released, BackendError>>)> {
        join_all(self.into_parts().into_iter().map(|part| async move {
            let key = part.key().clone();
            (key, part.release_promptly().await)
        }))
        .await
    }
}

impl LockManager {
    /// The manager that `inner` belongs to.
    pub(crate) fn from_inner(inner: Arc<ManagerInner>) -> Self {
        LockManager { inner }
    }

    /// A request for lock `kind` of a key already validated by [`key`](Self::key), with
    /// this handle moved into the request.
    pub(crate) fn into_lock(self, key: LockKey, kind: LockKind) -> LockRequest {
        LockRequest::new(self.inner, Ok(key), kind)
    }

    /// A multi-lock of keys already made (with the manager's prefix).
    pub(crate) fn multi_lock_keys(&self, keys: Vec<LockKey>) -> super::MultiLockRequest {
        super::MultiLockRequest::new(self.inner.clone(), Ok(keys))
    }
}

impl LockRequest {
    /// The key to lock, unless the name was invalid.
    pub(crate) fn key(&self) -> Option<&LockKey> {
        self.key.as_ref().ok()
    }
}

/// The watchdog as a future: completes when the lock is lost or the hold released.
async fn keep_alive(hold: Arc<Hold>, mut keeper: Keeper) {
    let mut next = keeper.first_due(&hold);
    loop {
        tokio::time::sleep_until(next).await;
        match renew_once(&hold, &mut keeper).await {
            Some(due) => next = due,
            None => return,
        }
    }
}
