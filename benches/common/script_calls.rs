//! The backend's own acquire and release of one name, with no manager and no engine around
//! them: the lock's script calls alone (what Redis and fred cost). Shared by the benchmarks.

use std::time::Duration;

use tower_lock::backend::{AcquireArgs, Attempt, Backend, RedisBackend, ReleaseArgs};
use tower_lock::lock::{LockKey, LockKind, OwnerId, Released};

/// One name's uncontended acquire and release, straight through the backend.
pub struct ScriptCalls {
    backend: RedisBackend,
    key: LockKey,
    owner: OwnerId,
}

impl ScriptCalls {
    /// For `key` (made by a manager, with its prefix), on `backend`.
    pub fn new(backend: RedisBackend, key: LockKey) -> Self {
        ScriptCalls {
            backend,
            key,
            owner: OwnerId::from_raw("00000000-0000-4000-8000-000000000000:1"),
        }
    }

    /// Takes the lock (it must be free).
    pub async fn acquire(&self) {
        let args = AcquireArgs::new(
            self.key.clone(),
            LockKind::Plain,
            self.owner.clone(),
            Duration::from_secs(30),
        )
        .waits(true);
        let attempt = self.backend.acquire(args).await.expect("acquire");
        assert_eq!(attempt, Attempt::Acquired);
    }

    /// Frees the lock (taken by [`acquire`](Self::acquire)).
    pub async fn release(&self) {
        let args = ReleaseArgs::new(
            self.key.clone(),
            LockKind::Plain,
            self.owner.clone(),
            Duration::from_secs(30),
            1,
        );
        let released = self.backend.release(args).await.expect("release");
        assert_eq!(released.released, Released::Unlocked);
    }
}
