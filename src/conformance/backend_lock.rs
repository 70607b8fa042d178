//! One lock name driven through a backend directly, by owner names (no manager).

use std::sync::Arc;
use std::time::Duration;

use crate::backend::{AcquireArgs, Attempt, Backend, LeaveArgs, ReleaseArgs, RenewArgs};
use crate::lock::{LockKey, LockKind, OwnerId, Released};

pub(super) struct BackendLock {
    pub(super) backend: Arc<dyn Backend>,
    pub(super) key: LockKey,
    /// The lease of acquisitions (and of the hold a reentrant release leaves).
    pub(super) lease: Duration,
}

impl BackendLock {
    pub(super) async fn acquire(&self, kind: LockKind, owner: &str, expected: u32) -> Attempt {
        self.acquire_for(kind, owner, expected, self.lease).await
    }

    pub(super) async fn acquire_for(
        &self,
        kind: LockKind,
        owner: &str,
        expected: u32,
        lease: Duration,
    ) -> Attempt {
        self.attempt(kind, owner, expected, lease, false).await
    }

    /// A first acquisition by an acquirer that goes on waiting if the lock is busy.
    pub(super) async fn acquire_waiting(
        &self,
        kind: LockKind,
        owner: &str,
        lease: Duration,
    ) -> Attempt {
        self.attempt(kind, owner, 0, lease, true).await
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
    pub(super) async fn stop_waiting(&self, kind: LockKind, owner: &str) {
        self.backend
            .leave_queue(LeaveArgs::new(
                self.key.clone(),
                kind,
                OwnerId::from_raw(owner),
            ))
            .await
            .unwrap()
    }

    pub(super) async fn release(&self, kind: LockKind, owner: &str, expected: u32) -> Released {
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

    pub(super) async fn renew(&self, kind: LockKind, owner: &str, lease: Duration) -> bool {
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
