//! The lock manager: the handle every lock is asked of (its state, shared with the locks
//! it hands out, is `shared.rs`; its builder `builder.rs`).

pub(in crate::engine) mod builder;
pub(in crate::engine) mod operator;
pub(in crate::engine) mod registry;
pub(in crate::engine) mod settings;
pub(in crate::engine) mod shared;
pub(in crate::engine) mod store;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::manager::shared::ManagerInner;
use crate::engine::request::{LockRequest, MultiLockRequest};
use crate::error::LockError;
use crate::key::LockKey;
use crate::kind::LockKind;

/// Takes and releases locks. Cheap to clone: clones share the backend, the subscriber
/// connection and the wait queues.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use tower_lock::{LockError, LockManager};
///
/// let locks = LockManager::memory();
/// let guard = locks.lock("order:42").acquire().await.unwrap();
///
/// // Another owner waits at most 20 ms, then gets a typed error.
/// let busy = locks.lock("order:42").wait(Duration::from_millis(20)).acquire().await;
/// assert!(matches!(busy, Err(LockError::TimedOut { .. })));
///
/// // The same owner may enter again; the lock is free after both holds are released.
/// let again = guard.reenter().await.unwrap();
/// again.release().await.unwrap();
/// guard.release().await.unwrap();
/// assert!(locks.lock("order:42").try_acquire().await.is_ok());
/// # }
/// ```
#[derive(Clone)]
pub struct LockManager {
    pub(in crate::engine) inner: Arc<ManagerInner>,
}

impl LockManager {
    /// The manager that `inner` belongs to.
    pub(crate) fn from_inner(inner: Arc<ManagerInner>) -> Self {
        LockManager { inner }
    }
}

impl LockManager {
    /// A request for the lock `name` (the manager's key prefix is put in front). Nothing is
    /// sent until [`LockRequest::acquire`].
    pub fn lock(&self, name: impl AsRef<str>) -> LockRequest {
        let key = self.key(name.as_ref());
        LockRequest::new(self.inner.clone(), key, LockKind::Plain)
    }

    /// A request for the read side of the read-write lock `name`: any number of readers
    /// share it, in this process and others, while no writer holds it (Redisson's
    /// `RReadWriteLock.readLock()`; see [`LockKind::Read`]). A reader that queued here
    /// behind a waiting writer lets the writer go first.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use tower_lock::LockManager;
    ///
    /// let locks = LockManager::memory();
    /// let first = locks.read_lock("order:42").acquire().await.unwrap();
    /// let second = locks.read_lock("order:42").try_acquire().await.unwrap();
    /// assert!(locks.write_lock("order:42").try_acquire().await.is_err());
    /// first.release().await.unwrap();
    /// second.release().await.unwrap();
    /// assert!(locks.write_lock("order:42").try_acquire().await.is_ok());
    /// # }
    /// ```
    pub fn read_lock(&self, name: impl AsRef<str>) -> LockRequest {
        let key = self.key(name.as_ref());
        LockRequest::new(self.inner.clone(), key, LockKind::Read)
    }

    /// A request for the write side of the read-write lock `name`: one writer, and no
    /// reader but the writer itself ([`LockGuard::read_lock`](crate::lock::LockGuard::read_lock)
    /// downgrades), in this process and others (Redisson's `RReadWriteLock.writeLock()`;
    /// see [`LockKind::Write`]).
    pub fn write_lock(&self, name: impl AsRef<str>) -> LockRequest {
        let key = self.key(name.as_ref());
        LockRequest::new(self.inner.clone(), key, LockKind::Write)
    }

    /// A request for the fair lock `name`: one holder at a time, like [`lock`](Self::lock),
    /// but granted in arrival order across every process. Each waiter takes its place in a
    /// queue in the backend (Redis: Redisson's `RFairLock` layout, so Redisson waiters
    /// share it), keeps it while it waits however long the holder keeps the lock, and is
    /// told alone when its turn comes; a waiter whose process died is dropped from the
    /// head of the queue within its wait (or the
    /// [queue timeout](crate::manager::LockManagerBuilder::fair_queue_timeout)). A waiter whose
    /// acquisition is dropped leaves the queue. A single try
    /// ([`try_acquire`](LockRequest::try_acquire)) never queues, and takes the lock only
    /// when nobody queues for it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use tower_lock::LockManager;
    ///
    /// let locks = LockManager::memory();
    /// let first = locks.fair_lock("order:42").acquire().await.unwrap();
    /// let second = tokio::spawn({
    ///     let locks = locks.clone();
    ///     async move { locks.fair_lock("order:42").wait(Duration::from_secs(5)).acquire().await }
    /// });
    /// while locks.waiting("order:42") == 0 {
    ///     tokio::task::yield_now().await;
    /// }
    /// // Someone queues: a newcomer's single try does not overtake it.
    /// first.release().await.unwrap();
    /// assert!(locks.fair_lock("order:42").try_acquire().await.is_err());
    /// second.await.unwrap().unwrap().release().await.unwrap();
    /// # }
    /// ```
    pub fn fair_lock(&self, name: impl AsRef<str>) -> LockRequest {
        let key = self.key(name.as_ref());
        LockRequest::new(self.inner.clone(), key, LockKind::Fair)
    }

    /// A request for the fenced lock `name`: one holder at a time, like
    /// [`lock`](Self::lock) (and excluded by it), and every acquisition, reentry included,
    /// gets a [fencing token](crate::lock::LockGuard::fencing_token) greater than every one given
    /// before for the name. Redis: Redisson's `RFencedLock` (the counter
    /// `redisson_lock_token:{name}` is INCRed in the acquisition's script; it never
    /// expires: see `docs/fenced-locks.md`). Its release is never handed over to a waiter
    /// of this process: each next holder takes the lock, and its token, itself.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let locks = tower_lock::LockManager::memory();
    /// let guard = locks.fenced_lock("account:7").acquire().await.unwrap();
    /// let token = guard.fencing_token().expect("a fenced lock's guard has a token");
    /// // UPDATE accounts SET …, fence = $token WHERE id = 7 AND fence < $token
    /// # let _ = token;
    /// guard.release().await.unwrap();
    /// # }
    /// ```
    pub fn fenced_lock(&self, name: impl AsRef<str>) -> LockRequest {
        let key = self.key(name.as_ref());
        LockRequest::new(self.inner.clone(), key, LockKind::Fenced)
    }

    /// A request for several plain locks held together, all or nothing: moving money
    /// between two accounts holds both. The names are taken in one canonical order (their
    /// keys sorted) whatever order they come in, so two multi-locks naming the same keys in
    /// opposite orders never deadlock (Redisson's `RMultiLock` takes them in the order
    /// given and can: redisson#1160, #4050); a name given twice is taken once. The wait is
    /// shared by all parts; on failure every part taken is released. Each part is an
    /// ordinary lock (Redisson's `RLock` layout, its own key and cluster slot), so the
    /// parts may live in different slots of a Redis Cluster. See [`MultiLockRequest`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let locks = tower_lock::LockManager::memory();
    /// let transfer = locks.multi_lock(["account:9", "account:3"]).acquire().await.unwrap();
    /// let keys: Vec<&str> = transfer.keys().map(|key| key.as_str()).collect();
    /// assert_eq!(keys, ["account:3", "account:9"]);
    /// assert!(locks.lock("account:3").try_acquire().await.is_err());
    /// transfer.release().await.unwrap();
    /// # }
    /// ```
    pub fn multi_lock<I>(&self, names: I) -> MultiLockRequest
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let keys = names
            .into_iter()
            .map(|name| self.key(name.as_ref()))
            .collect();
        MultiLockRequest::many(self.inner.clone(), keys, LockKind::Plain)
    }

    /// The key `name` maps to (the manager's prefix and the name).
    ///
    /// # Errors
    /// [`LockError::InvalidName`] for an empty name, one over the
    /// [length limit](crate::manager::LockManagerBuilder::max_name_len), or one the backend cannot lock
    /// safely (on Redis Cluster, braces that form no hash tag).
    pub fn key(&self, name: &str) -> Result<LockKey, LockError> {
        self.joined_key(&[name])
    }

    /// The key of the name made of `name`'s parts in order.
    pub(crate) fn joined_key(&self, name: &[&str]) -> Result<LockKey, LockError> {
        let settings = &self.inner.settings();
        let invalid = |reason| LockError::InvalidName { reason };
        let key =
            LockKey::joined(&settings.key_prefix, name, settings.max_name_len).map_err(invalid)?;
        self.inner.store().check_key(&key).map_err(invalid)?;
        Ok(key)
    }

    /// This manager's random id, the first part of every owner id it hands out.
    pub fn id(&self) -> &str {
        self.inner.manager_id()
    }

    /// The lease used when a request sets none.
    pub fn default_lease(&self) -> Duration {
        self.inner.settings().lease
    }

    /// How many names have waiters in this process right now (each has one subscription
    /// on Redis).
    pub fn waiting_names(&self) -> usize {
        self.inner.queues().len()
    }

    /// How many acquisitions of `name` are queued in this process right now.
    pub fn waiting(&self, name: &str) -> usize {
        self.key(name)
            .map_or(0, |key| self.inner.queues().queued(&key))
    }

    /// What this manager tracks right now (for metrics and leak checks): every figure
    /// returns to zero once no lock is held or awaited.
    pub fn stats(&self) -> ManagerStats {
        let (waiting_names, waiters, claimed_names, subscription_changes) =
            self.inner.queues().counts();
        ManagerStats {
            waiting_names,
            waiters,
            claimed_names,
            subscription_changes,
            renewals: self.inner.renewals().len(),
        }
    }

    /// The backend's name: `"redis"`, `"memory"`, or another backend's.
    pub fn backend_name(&self) -> &'static str {
        self.inner.store().name()
    }

    /// What the backend has: the kinds of lock it stores and its optional operations
    /// (records, inspection). What it lacks is refused with
    /// [`LockError::Unsupported`] before anything reaches it; check at start-up with
    /// `capabilities().kinds.contains(..)`.
    ///
    /// ```
    /// use tower_lock::lock::LockKind;
    /// use tower_lock::LockManager;
    ///
    /// let locks = LockManager::memory();
    /// assert!(locks.capabilities().kinds.contains(LockKind::Fair));
    /// ```
    pub fn capabilities(&self) -> crate::backend::Capabilities {
        self.inner.store().capabilities()
    }
}

impl fmt::Debug for LockManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockManager")
            .field("id", &self.id())
            .field("backend", &self.backend_name())
            .field("settings", &self.inner.settings())
            .finish()
    }
}

/// A snapshot of a manager's local state; see [`LockManager::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ManagerStats {
    /// Names with waiters in this process (each has one Redis subscription).
    pub waiting_names: usize,
    /// Acquisitions waiting in this process.
    pub waiters: usize,
    /// Names held (or being acquired) by this process and claimed in its wait queues, so
    /// that newcomers queue behind them. The memory backend's holds taken at once with no
    /// waiter near are not claimed (its own table keeps them; see
    /// [`MemoryBackend`](crate::backend::MemoryBackend)).
    pub claimed_names: usize,
    /// Names whose Redis subscription is about to change (subscribed or unsubscribed by
    /// the manager's subscriber task); always 0 on a backend without subscriptions.
    pub subscription_changes: usize,
    /// Held locks whose lease the manager renews.
    pub renewals: usize,
}

/// Requests of keys already validated, for the HTTP layers.
#[cfg(feature = "axum")]
impl LockManager {
    /// A request for lock `kind` of a key already validated by [`key`](Self::key), with
    /// this handle moved into the request.
    pub(crate) fn into_lock(self, key: LockKey, kind: LockKind) -> LockRequest {
        crate::engine::LockRequest::new(self.inner, Ok(key), kind)
    }

    /// A multi-lock of `kind` of keys already made (with the manager's prefix).
    pub(crate) fn multi_lock_keys(
        &self,
        keys: Vec<LockKey>,
        kind: LockKind,
    ) -> crate::engine::MultiLockRequest {
        crate::engine::MultiLockRequest::many(self.inner.clone(), Ok(keys), kind)
    }
}
