//! One lock name driven through a backend directly, by owner names (no manager).

use std::sync::Arc;
use std::time::Duration;

use crate::backend::{AcquireArgs, Attempt, Backend, LeaveArgs, ReleaseArgs, RenewArgs};
use crate::lock::{LockKey, LockKind, OwnerId, Released};

/// One lock name driven through a backend directly, by owner names (no manager): for checks
/// of a backend's own rules. Each call unwraps the backend's answer (a check fails on an
/// error).
pub struct BackendLock {
    /// The backend.
    pub backend: Arc<dyn Backend>,
    /// The lock's key.
    pub key: LockKey,
    /// The lease of acquisitions (and of the hold a reentrant release leaves).
    pub lease: Duration,
}

impl BackendLock {
    /// A first acquisition or a reentry (`expected` holds before it) by `owner`, a single
    /// try, with the lock's lease.
    pub async fn acquire(&self, kind: LockKind, owner: &str, expected: u32) -> Attempt {
        self.acquire_for(kind, owner, expected, self.lease).await
    }

    /// [`acquire`](Self::acquire) with a lease of its own.
    pub async fn acquire_for(
        &self,
        kind: LockKind,
        owner: &str,
        expected: u32,
        lease: Duration,
    ) -> Attempt {
        self.attempt(kind, owner, expected, lease, false).await
    }

    /// A first acquisition by an acquirer that goes on waiting if the lock is busy.
    pub async fn acquire_waiting(&self, kind: LockKind, owner: &str, lease: Duration) -> Attempt {
        self.attempt(kind, owner, 0, lease, true).await
    }

    /// A first acquisition by `owner` that may wait up to `wait` (in the store's own queue,
    /// on a backend whose store queues waiters), on a task of its own.
    pub fn spawn_waiting(
        &self,
        kind: LockKind,
        owner: &str,
        wait: Duration,
    ) -> tokio::task::JoinHandle<Attempt> {
        let args = AcquireArgs::new(self.key.clone(), kind, OwnerId::from_raw(owner), self.lease)
            .wait_left(wait);
        let backend = self.backend.clone();
        tokio::spawn(async move { backend.acquire(args).await.unwrap() })
    }

    async fn attempt(
        &self,
        kind: LockKind,
        owner: &str,
        expected: u32,
        lease: Duration,
        waits: bool,
    ) -> Attempt {
        self.backend
            .acquire(
                AcquireArgs::new(self.key.clone(), kind, OwnerId::from_raw(owner), lease)
                    .expected(expected)
                    .waits(waits),
            )
            .await
            .unwrap()
    }

    /// The waiter `owner` stops waiting.
    pub async fn stop_waiting(&self, kind: LockKind, owner: &str) {
        self.backend
            .leave_queue(LeaveArgs::new(
                self.key.clone(),
                kind,
                OwnerId::from_raw(owner),
            ))
            .await
            .unwrap()
    }

    /// A release by `owner` of one of its `expected` holds.
    pub async fn release(&self, kind: LockKind, owner: &str, expected: u32) -> Released {
        self.backend
            .release(ReleaseArgs::new(
                self.key.clone(),
                kind,
                OwnerId::from_raw(owner),
                self.lease,
                expected,
            ))
            .await
            .unwrap()
            .released
    }

    /// A renewal of `owner`'s holds of `kind` to `lease`; whether it still held them.
    pub async fn renew(&self, kind: LockKind, owner: &str, lease: Duration) -> bool {
        self.backend
            .renew(RenewArgs::new(
                self.key.clone(),
                kind,
                OwnerId::from_raw(owner),
                lease,
            ))
            .await
            .unwrap()
    }
}
