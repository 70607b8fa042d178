//! The semaphore's face on the engine: the manager's `semaphore`, its limit and usage, a
//! request's permit count, and a guard's permit ids. Everything else (waiting, the
//! watchdog, the loss signal, release) is the same as for every lock kind.

use crate::backend::{permit_ids_hex, PermitUsage};
use crate::engine::hold::guard::LockGuard;
use crate::engine::manager::LockManager;
use crate::engine::request::LockRequest;
use crate::error::LockError;
use crate::kind::{LockKind, Permits};

impl LockManager {
    /// A request for a permit of the semaphore `name`, which lets at most `limit` permits
    /// be held at once across every process (Redis: Redisson's
    /// `RPermitExpirableSemaphore`, so Redisson clients share the limit). Every permit has
    /// a lease that the watchdog renews while its guard lives, so a crashed holder's
    /// permit comes back within its lease; waiters wait in this process's queue and are
    /// woken by the semaphore's messages, like a lock's. Take several permits at once
    /// with [`LockRequest::permits`].
    ///
    /// The limit is stored with the name by its first acquisition; a request that
    /// configures another limit for a name already in use takes permits under the limit in
    /// force (the first one). Change it with [`set_semaphore_limit`](Self::set_semaphore_limit).
    /// An invalid limit (0, or over [`MAX_PERMITS`](crate::lock::MAX_PERMITS)) makes the
    /// acquisition fail with [`LockError::InvalidPermits`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let locks = tower_lock::LockManager::memory();
    /// let first = locks.semaphore("exports:tenant-7", 2).acquire().await.unwrap();
    /// let second = locks.semaphore("exports:tenant-7", 2).acquire().await.unwrap();
    /// // Both permits are in use: a third request waits, or fails at once on a single try.
    /// assert!(locks.semaphore("exports:tenant-7", 2).try_acquire().await.is_err());
    /// first.release().await.unwrap();
    /// let third = locks.semaphore("exports:tenant-7", 2).try_acquire().await.unwrap();
    /// # drop((second, third));
    /// # }
    /// ```
    pub fn semaphore(&self, name: impl AsRef<str>, limit: u32) -> LockRequest {
        let key = self.key(name.as_ref());
        let (key, permits) = match Permits::new(limit, 1) {
            Ok(permits) => (key, permits),
            Err(reason) => (Err(LockError::InvalidPermits { reason }), Permits::ONE),
        };
        LockRequest::new(self.inner.clone(), key, LockKind::Semaphore(permits))
    }

    /// Sets the limit of the semaphore `name`: raising it lets waiters in at once (in
    /// every process); lowering it under the permits held takes none away, and no one
    /// gets a permit until enough are released.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::InvalidPermits`] (0, or over
    /// [`MAX_PERMITS`](crate::lock::MAX_PERMITS)), [`LockError::Unsupported`] (the backend has no
    /// semaphores), [`LockError::Unavailable`].
    pub async fn set_semaphore_limit(&self, name: &str, limit: u32) -> Result<(), LockError> {
        let key = self.key(name)?;
        Permits::new(limit, 1).map_err(|reason| LockError::InvalidPermits { reason })?;
        self.inner
            .store()
            .check(LockKind::Semaphore(Permits::ONE), false)?;
        self.inner
            .store()
            .set_semaphore_limit(key, limit)
            .await
            .map_err(LockError::Unavailable)
    }

    /// The permits of the semaphore `name` now: its limit in force and the permits held.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::Unsupported`], [`LockError::Unavailable`].
    pub async fn semaphore_usage(&self, name: &str) -> Result<PermitUsage, LockError> {
        let key = self.key(name)?;
        self.inner
            .store()
            .check(LockKind::Semaphore(Permits::ONE), false)?;
        self.inner
            .store()
            .semaphore_usage(key)
            .await
            .map_err(LockError::Unavailable)
    }
}

impl LockRequest {
    /// How many permits of a semaphore ([`LockManager::semaphore`]) this acquisition
    /// takes, all or none (default 1). They are held, renewed and released together.
    ///
    /// An invalid count (0, over the semaphore's limit, or over
    /// [`MAX_PERMITS_PER_ACQUISITION`](crate::lock::MAX_PERMITS_PER_ACQUISITION)), or a
    /// count given to a lock that is not a semaphore, makes the acquisition fail with
    /// [`LockError::InvalidPermits`].
    pub fn permits(mut self, count: u32) -> Self {
        let checked = match self.kind {
            LockKind::Semaphore(permits) => Permits::new(permits.limit(), count),
            other => Err(format!(
                "permits are taken of a semaphore, not of a {} lock",
                other.name()
            )),
        };
        match checked {
            Ok(permits) => self.kind = LockKind::Semaphore(permits),
            Err(reason) => {
                if self.names.0.is_ok() {
                    self.names.0 = Err(LockError::InvalidPermits { reason });
                }
            }
        }
        self
    }
}

impl LockGuard {
    /// The ids of the permits this guard holds, as Redisson shows them (32 lowercase hex
    /// digits each: the members of the semaphore's `{name}:timeout` set); empty for a lock
    /// that is not a semaphore.
    pub fn permit_ids(&self) -> Vec<String> {
        match self.kind() {
            LockKind::Semaphore(permits) => permit_ids_hex(self.owner(), permits.count()),
            _ => Vec::new(),
        }
    }
}
