//! Locks driven by their caller's own future (a Tower response future) rather than by
//! tasks of the engine: acquisitions that hand their watchdog back unstarted, a watchdog
//! the caller polls itself (no task per request), releases that do not wait out an outage,
//! a view of the hold to share with what runs under the lock, and requests made of keys
//! already validated. The crate's HTTP layers reach the engine through this seam only
//! (with the public API).

use std::sync::Arc;

use super::acquire::PendingWatchdog;
use super::guard::LockGuard;
use super::hold::Hold;
use super::loss::LossSignal;
use super::manager::LockManager;
use super::multi_guard::MultiLockGuard;
use super::outage::answer_within;
use super::reentry::{hold_as, reenter};
use super::renewal::{renew_once, Keeper};
use super::request::LockRequest;
use crate::backend::BoxFuture;
use crate::error::{BackendError, LockError, Released};
use crate::join::join_all;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

/// A watchdog that the caller drives itself (polled inside the HTTP layer's future).
pub(crate) type InlineWatchdog = BoxFuture<()>;

/// A view of a held lock's hold, shared with what runs under it (the HTTP layer's
/// `HeldLock`): what it is, its loss signal, and the reentries its rules allow.
#[derive(Clone)]
pub(crate) struct HoldView(Arc<Hold>);

impl HoldView {
    pub(crate) fn key(&self) -> &LockKey {
        self.0.key()
    }

    pub(crate) fn kind(&self) -> LockKind {
        self.0.kind()
    }

    pub(crate) fn owner(&self) -> &OwnerId {
        self.0.owner()
    }

    pub(crate) fn loss(&self) -> LossSignal {
        self.0.loss().signal()
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.0.loss().is_lost()
    }

    /// The manager that holds the lock.
    pub(crate) fn manager(&self) -> LockManager {
        LockManager::from_inner(self.0.manager().clone())
    }

    /// Another hold of the same kind for the same owner (see [`LockGuard::reenter`]).
    pub(crate) async fn reenter(&self) -> Result<LockGuard, LockError> {
        reenter(self.0.clone()).await
    }

    /// Another hold of `kind` for the same owner, where the kind's rules allow.
    pub(crate) async fn hold_as(&self, kind: LockKind) -> Result<LockGuard, LockError> {
        hold_as(self.0.clone(), kind).await
    }
}

impl LockGuard {
    /// Records the request the hold was taken for (see `LockManager::local_holds`).
    pub(crate) fn label(&self, label: super::RequestLabel) {
        self.hold().set_label(label);
    }

    /// A view of the hold, to share with what runs under the lock.
    pub(crate) fn view(&self) -> HoldView {
        HoldView(self.hold().clone())
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
    /// Records the request each part was taken for.
    pub(crate) fn label(&self, label: super::RequestLabel) {
        for part in self.parts() {
            part.label(label.clone());
        }
    }

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
    /// A request for lock `kind` of a key already validated by [`key`](Self::key), with
    /// this handle moved into the request.
    pub(crate) fn into_lock(self, key: LockKey, kind: LockKind) -> LockRequest {
        LockRequest::new(self.inner, Ok(key), kind)
    }

    /// A multi-lock of `kind` of keys already made (with the manager's prefix).
    pub(crate) fn multi_lock_keys(
        &self,
        keys: Vec<LockKey>,
        kind: LockKind,
    ) -> super::MultiLockRequest {
        super::MultiLockRequest::many(self.inner.clone(), Ok(keys), kind)
    }
}

impl LockRequest {
    /// The key to lock, unless the name was invalid.
    pub(crate) fn key(&self) -> Option<&LockKey> {
        self.names.0.as_ref().ok()
    }
}

/// The watchdog as a future: completes when the lock is lost or the hold released.
async fn keep_alive(hold: Arc<Hold>, mut keeper: Keeper) {
    let mut next = keeper.first_due(&*hold);
    loop {
        tokio::time::sleep_until(next).await;
        match renew_once(&*hold, &mut keeper).await {
            Some(due) => next = due,
            None => return,
        }
    }
}
