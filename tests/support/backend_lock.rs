//! One lock name driven through a backend directly, by owner names (no manager).

use std::sync::Arc;
use std::time::Duration;

use tower_lock::backend::{AcquireArgs, Attempt, Backend, ReleaseArgs, RenewArgs};
use tower_lock::{LockKey, LockKind, OwnerId, Released};

pub struct BackendLock {
    pub backend: Arc<dyn Backend>,
    pub key: LockKey,
    /// The lease of acquisitions (and of the hold a reentrant release leaves).
    pub lease: Duration,
}

impl BackendLock {
    pub async fn acquire(&self, kind: LockKind, owner: &str, expected: u32) -> Attempt {
        self.acquire_for(kind, owner, expected, self.lease).await
    }

    pub async fn acquire_for(
        &self,
        kind: LockKind,
        owner: &str,
        expected: u32,
        lease: Duration,
    ) -> Attempt {
        self.backend
            .acquire(AcquireArgs {
                key: self.key.clone(),
                kind,
                owner: OwnerId::from_raw(owner),
                lease,
                expected,
            })
            .await
            .unwrap()
    }

    pub async fn release(&self, kind: LockKind, owner: &str, expected: u32) -> Released {
        self.backend
            .release(ReleaseArgs {
                key: self.key.clone(),
                kind,
                owner: OwnerId::from_raw(owner),
                lease: self.lease,
                expected,
                successor: None,
            })
            .await
            .unwrap()
            .released
    }

    pub async fn renew(&self, kind: LockKind, owner: &str, lease: Duration) -> bool {
        self.backend
            .renew(RenewArgs {
                key: self.key.clone(),
                kind,
                owner: OwnerId::from_raw(owner),
                lease,
            })
            .await
            .unwrap()
    }
}
