//! The lock manager: configuration, backend, wait queues and owner ids.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::runtime::Handle;

use crate::backend::{Backend, MemoryBackend, RedisBackend};
use crate::error::{BackendError, LockError};
use crate::key::{Ids, LockKey, DEFAULT_MAX_NAME_LEN};
use crate::loss::LossMargin;
use crate::renewals::Renewals;
use crate::request::LockRequest;
use crate::wait::WaitQueues;

/// Default lease: renewed every lease/3 by a watchdog while held (Redisson's
/// `lockWatchdogTimeout`).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The longest lease (about 100 years): longer ones are lowered to it, so that a deadline
/// computed from a lease never overflows the clock (`Duration::MAX` used to panic).
pub const MAX_LEASE: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Default number of hand-overs in a row to waiters of the same process (see
/// [`LockManagerBuilder::hand_over_limit`]).
pub const DEFAULT_HAND_OVER_LIMIT: u32 = 8;

/// Default time an acquisition waits for a busy lock.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

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
    pub(crate) inner: Arc<ManagerInner>,
}

pub(crate) struct ManagerInner {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) queues: WaitQueues,
    pub(crate) ids: Ids,
    pub(crate) settings: Settings,
    pub(crate) renewals: Arc<Renewals>,
    /// The backend's [`Backend::answers_at_once`], asked once.
    pub(crate) answers_at_once: bool,
    /// Whether last releases hand the lock to a local waiter: the backend
    /// [`hands_over`](Backend::hands_over) and the limit is not 0.
    pub(crate) hands_over: bool,
    /// The runtime the manager was built or first used in: background work (a dropped
    /// guard's release, the renewal task) goes there when it starts outside a runtime.
    /// Holds do not keep a handle each: cloning one changes a count shared by every
    /// thread of the runtime.
    runtime: OnceLock<Handle>,
}

impl ManagerInner {
    /// Where background work runs: the current runtime, else the one remembered.
    pub(crate) fn runtime(&self) -> Option<Handle> {
        Handle::try_current()
            .ok()
            .or_else(|| self.runtime.get().cloned())
    }

    /// Whether a runtime is known (remembering the current one on first use): locks that
    /// may need background work are only granted when one is.
    pub(crate) fn has_runtime(&self) -> bool {
        if self.runtime.get().is_some() {
            return true;
        }
        match Handle::try_current() {
            Ok(handle) => {
                let _ = self.runtime.set(handle);
                true
            }
            Err(_) => false,
        }
    }
}

impl Drop for ManagerInner {
    fn drop(&mut self) {
        self.renewals.shut_down();
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) key_prefix: String,
    pub(crate) lease: Duration,
    pub(crate) wait: Duration,
    pub(crate) max_name_len: usize,
    pub(crate) hand_over_limit: u32,
    pub(crate) loss_margin: LossMargin,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            key_prefix: String::new(),
            lease: DEFAULT_LEASE,
            wait: DEFAULT_WAIT,
            max_name_len: DEFAULT_MAX_NAME_LEN,
            hand_over_limit: DEFAULT_HAND_OVER_LIMIT,
            loss_margin: LossMargin::DEFAULT,
        }
    }
}

impl LockManager {
    /// A manager on the in-memory backend with default settings (one process only).
    pub fn memory() -> Self {
        Self::builder().memory()
    }

    /// A manager on Redis at `url` with default settings.
    pub async fn redis(url: &str) -> Result<Self, BackendError> {
        Self::builder().redis(url).await
    }

    /// Settings for a new manager.
    pub fn builder() -> LockManagerBuilder {
        LockManagerBuilder {
            settings: Settings::default(),
        }
    }

    /// A request for the lock `name` (the manager's key prefix is put in front). Nothing is
    /// sent until [`LockRequest::acquire`].
    pub fn lock(&self, name: impl AsRef<str>) -> LockRequest {
        let key = self.key(name.as_ref());
        LockRequest::new(self.clone(), key)
    }

    /// A request for a key already validated by [`key`](Self::key), with this handle
    /// moved into the request.
    pub(crate) fn into_lock(self, key: LockKey) -> LockRequest {
        LockRequest::new(self, Ok(key))
    }

    /// The key `name` maps to, or why it is not a valid name.
    pub fn key(&self, name: &str) -> Result<LockKey, LockError> {
        self.joined_key(&[name])
    }

    /// The key of the name made of `name`'s parts in order.
    pub(crate) fn joined_key(&self, name: &[&str]) -> Result<LockKey, LockError> {
        let settings = &self.inner.settings;
        let key = LockKey::joined(&settings.key_prefix, name, settings.max_name_len)?;
        self.inner
            .backend
            .check_key(&key)
            .map_err(|reason| LockError::InvalidName { reason })?;
        Ok(key)
    }

    /// This manager's random id, the first part of every owner id it hands out.
    pub fn id(&self) -> &str {
        self.inner.ids.manager_id()
    }

    /// The lease used when a request sets none.
    pub fn default_lease(&self) -> Duration {
        self.inner.settings.lease
    }

    /// How many names have waiters in this process right now (each has one subscription
    /// on Redis).
    pub fn waiting_names(&self) -> usize {
        self.inner.queues.len()
    }

    /// How many acquisitions of `name` are queued in this process right now.
    pub fn waiting(&self, name: &str) -> usize {
        self.key(name)
            .map_or(0, |key| self.inner.queues.queued(&key))
    }

    /// What this manager tracks right now (for metrics and leak checks): every figure
    /// returns to zero once no lock is held or awaited.
    pub fn stats(&self) -> ManagerStats {
        let (waiting_names, waiters, claimed_names, subscription_changes) =
            self.inner.queues.counts();
        ManagerStats {
            waiting_names,
            waiters,
            claimed_names,
            subscription_changes,
            renewals: self.inner.renewals.len(),
        }
    }

    /// The backend's kind: `"redis"` or `"memory"`.
    pub fn backend_kind(&self) -> &'static str {
        self.inner.backend.kind()
    }
}

impl fmt::Debug for LockManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockManager")
            .field("id", &self.id())
            .field("backend", &self.backend_kind())
            .field("settings", &self.inner.settings)
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
    /// that newcomers queue behind them. An in-process backend's holds taken at once with
    /// no waiter near are not claimed (its own table keeps them; see
    /// [`MemoryBackend`](crate::backend::MemoryBackend)).
    pub claimed_names: usize,
    /// Names whose Redis subscription is about to change (subscribed or unsubscribed by
    /// the manager's subscriber task); always 0 on a backend without subscriptions.
    pub subscription_changes: usize,
    /// Held locks whose lease the manager renews.
    pub renewals: usize,
}

/// Builds a [`LockManager`]; every setting has a default.
#[derive(Debug, Clone)]
pub struct LockManagerBuilder {
    settings: Settings,
}

impl LockManagerBuilder {
    /// Put `prefix` in front of every lock name (default: none, so names are Redis keys as
    /// they are, as with Redisson's `getLock(name)`).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.settings.key_prefix = prefix.into();
        self
    }

    /// The lease of locks acquired without an explicit lease, renewed every lease/3 by a
    /// watchdog (default [`DEFAULT_LEASE`], 30 s). Values under 3 ms are raised to 3 ms,
    /// values over [`MAX_LEASE`] lowered to it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = lease.clamp(Duration::from_millis(3), MAX_LEASE);
        self
    }

    /// How long an acquisition waits when the request does not say (default
    /// [`DEFAULT_WAIT`], 10 s).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.settings.wait = wait;
        self
    }

    /// How many times in a row a last release may hand the lock straight to the next waiter
    /// of this process (default [`DEFAULT_HAND_OVER_LIMIT`], 8); then one release frees it,
    /// so that waiters of other processes get their chance. `0`: every release frees it.
    ///
    /// On Redis the release's own script run checks that the releaser still holds the lock
    /// and makes the next waiter the owner, atomically: one round trip per hand-over
    /// instead of two (release, then acquire), and the waiter holds the lock only once
    /// Redis has answered that it did. A release that finds the lock gone (expired,
    /// deleted, taken by another) hands nothing over, and the waiter asks Redis itself.
    /// Nothing is published: the lock is never free in between, so other processes
    /// (Redisson's included) see it held throughout. When a release frees the lock while
    /// other processes listen for it, this process's next waiter holds back for about two
    /// round trips, so that their waiters get the first chance. Within a process, waiters
    /// are served in order either way. Not used with [`RedisBackend::replica_ack`], nor by
    /// the memory backend, whose releases wake the next waiter at once.
    pub fn hand_over_limit(mut self, limit: u32) -> Self {
        self.settings.hand_over_limit = limit;
        self
    }

    /// How long before a lease could end its holder is told that the lock may be lost
    /// (default [`LossMargin::DEFAULT`]: 1 % of the lease plus 2 ms, at most a third of
    /// the lease). See [`LossMargin`].
    pub fn loss_margin(mut self, margin: LossMargin) -> Self {
        self.settings.loss_margin = margin;
        self
    }

    /// The longest accepted lock name in bytes, prefix excluded (default 1 KiB).
    pub fn max_name_len(mut self, max: usize) -> Self {
        self.settings.max_name_len = max;
        self
    }

    /// A manager on the in-memory backend.
    pub fn memory(self) -> LockManager {
        self.backend(MemoryBackend::new())
    }

    /// A manager on Redis at `url`; fails when the URL is invalid or Redis is unreachable.
    /// Call it inside a Tokio runtime.
    pub async fn redis(self, url: &str) -> Result<LockManager, BackendError> {
        Ok(self.backend(RedisBackend::connect(url).await?))
    }

    /// A manager on Redis at `url` that starts without waiting for Redis: until Redis
    /// answers, acquisitions fail with [`LockError::Unavailable`] (503 from the layer).
    /// Fails only for an invalid URL. Call it inside a Tokio runtime.
    pub async fn redis_lazy(self, url: &str) -> Result<LockManager, BackendError> {
        Ok(self.backend(RedisBackend::connect_lazy(url).await?))
    }

    /// A manager on any backend. For [`RedisBackend`], call it inside a Tokio runtime: the
    /// subscriber's tasks are spawned here.
    pub fn backend(self, backend: impl Backend) -> LockManager {
        let queues = WaitQueues::new(!backend.needs_subscription());
        backend.attach(queues.clone());
        let answers_at_once = backend.answers_at_once();
        let hands_over = backend.hands_over() && self.settings.hand_over_limit > 0;
        LockManager {
            inner: Arc::new(ManagerInner {
                backend: Arc::new(backend),
                queues,
                ids: Ids::new(),
                settings: self.settings,
                renewals: Arc::default(),
                answers_at_once,
                hands_over,
                runtime: Handle::try_current()
                    .map(OnceLock::from)
                    .unwrap_or_default(),
            }),
        }
    }
}
