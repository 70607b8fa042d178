//! The context of a check: a manager on the subject, other processes' managers, the backend
//! itself, and waiters queued behind a holder.

use std::sync::Arc;
use std::time::Duration;

use super::Subject;
use crate::backend::{Backend, Capabilities, LockInfo};
use crate::engine::{LockGuard, LockManager, LockRequest};
use crate::error::LockError;
use crate::kind::LockKind;
use crate::manager::LockManagerBuilder;

/// A manager on the subject, with a way to reach the subject behind its back.
pub(super) struct Ctx<'a> {
    pub(super) manager: LockManager,
    subject: &'a dyn Subject,
}

impl<'a> Ctx<'a> {
    pub(super) async fn new(subject: &'a dyn Subject) -> Ctx<'a> {
        Self::with(subject, |builder| builder).await
    }

    pub(super) async fn with(
        subject: &'a dyn Subject,
        configure: impl FnOnce(LockManagerBuilder) -> LockManagerBuilder,
    ) -> Ctx<'a> {
        let manager = subject.manager(configure(LockManager::builder())).await;
        Ctx { manager, subject }
    }

    /// What the backend has.
    pub(super) fn capabilities(&self) -> Capabilities {
        self.manager.capabilities()
    }

    /// Whether the backend stores `kind`; if not, the check says so and passes.
    pub(super) fn has(&self, check: &str, kind: LockKind) -> bool {
        let has = self.capabilities().kinds.contains(kind);
        if !has {
            super::not_applicable(
                check,
                self.manager.backend_name(),
                &format!("{} locks", kind.name()),
            );
        }
        has
    }

    /// Whether the backend has locks with a record; if not, the check says so and passes.
    pub(super) fn has_records(&self, check: &str) -> bool {
        let has = self.capabilities().records;
        if !has {
            super::not_applicable(check, self.manager.backend_name(), "locks with a record");
        }
        has
    }

    /// Whether the backend inspects (and force-unlocks); if not, the check says so and
    /// passes.
    /// Whether the backend hands a released lock to a waiter in the same step (or says
    /// that the check does not apply).
    pub(super) fn hands_over(&self, check: &str) -> bool {
        let has = self.capabilities().hands_over;
        if !has {
            super::not_applicable(check, self.manager.backend_name(), "hand-overs");
        }
        has
    }

    pub(super) fn inspects(&self, check: &str) -> bool {
        let has = self.capabilities().inspects;
        if !has {
            super::not_applicable(check, self.manager.backend_name(), "inspection");
        }
        has
    }

    /// What `name` holds now, if the backend inspects.
    pub(super) async fn inspected(&self, name: &str) -> Option<LockInfo> {
        if !self.capabilities().inspects {
            return None;
        }
        Some(self.manager.inspect(name).await.unwrap())
    }

    /// The backend on a connection of its own, to send operations directly.
    pub(super) async fn backend(&self) -> Arc<dyn Backend> {
        self.subject.backend().await
    }

    /// Another manager on the same backend (another process).
    pub(super) async fn manager_sharing_the_backend(&self) -> LockManager {
        self.subject.manager(LockManager::builder()).await
    }

    /// A manager for a second process, where the backend tells processes of each other's
    /// releases (it [subscribes](Capabilities::subscribes)); this same manager otherwise
    /// (the in-memory backend serves one process: its managers are not told of each
    /// other's plain releases).
    pub(super) async fn second_process(&self) -> LockManager {
        if self.capabilities().subscribes {
            self.manager_sharing_the_backend().await
        } else {
            self.manager.clone()
        }
    }

    /// Frees the lock behind its holder's back (a force-unlock; the check needs a backend
    /// that [inspects](Ctx::inspects)).
    pub(super) async fn delete(&self, name: &str) {
        let key = self.manager.key(name).unwrap();
        let freed = self.backend().await.force_unlock(key).await.unwrap();
        assert!(freed.kind.is_some(), "{name} was held: {freed:?}");
    }
}

/// A task acquiring `name` with `wait`, returned once it is queued behind the holder.
pub(super) async fn queued_waiter(
    manager: &LockManager,
    name: &str,
    wait: Duration,
) -> tokio::task::JoinHandle<Result<LockGuard, LockError>> {
    queued_for(manager, name, wait, |locks, name| locks.lock(name)).await
}

/// A task waiting up to `wait` for one permit of `manager`'s semaphore `name` (limit 1),
/// returned once it is queued.
pub(super) async fn queued_permit_waiter(
    manager: &LockManager,
    name: &str,
    wait: Duration,
) -> tokio::task::JoinHandle<Result<LockGuard, LockError>> {
    queued_for(manager, name, wait, |locks, name| locks.semaphore(name, 1)).await
}

/// A task acquiring what `request` asks of `manager` for `name` (a lock of any kind, a
/// semaphore's permits) with `wait`, returned once it is queued in `manager`.
pub(super) async fn queued_for(
    manager: &LockManager,
    name: &str,
    wait: Duration,
    request: fn(&LockManager, &str) -> LockRequest,
) -> tokio::task::JoinHandle<Result<LockGuard, LockError>> {
    let waiter = {
        let (manager, name) = (manager.clone(), name.to_owned());
        tokio::spawn(async move { request(&manager, &name).wait(wait).acquire().await })
    };
    super::eventually("the waiter queues", || async {
        (manager.waiting(name) > 0).then_some(())
    })
    .await;
    waiter
}
