//! A view of a held lock's hold, shared with what runs under the lock (the HTTP layer's
//! `HeldLock`).

use std::sync::Arc;

use crate::engine::hold::guard::LockGuard;
use crate::engine::hold::loss::LossSignal;
use crate::engine::hold::reentry::{hold_as, reenter};
use crate::engine::hold::Hold;
use crate::engine::manager::LockManager;
use crate::error::LockError;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

/// A view of a held lock's hold, shared with what runs under it (the HTTP layer's
/// `HeldLock`): what it is, its loss signal, and the reentries its rules allow.
#[derive(Clone)]
pub(crate) struct HoldView(Arc<Hold>);

impl HoldView {
    /// A view of `hold`.
    pub(in crate::engine) fn new(hold: Arc<Hold>) -> Self {
        HoldView(hold)
    }

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
