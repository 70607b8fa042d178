//! Settings for a new [`LockManager`], with their defaults.

use std::time::Duration;

use std::sync::Arc;

#[cfg(feature = "redis")]
use crate::backend::RedisBackend;
use crate::backend::{Backend, MemoryBackend};
use crate::engine::manager::settings::{Settings, MAX_LEASE};
use crate::engine::manager::shared::ManagerInner;
use crate::engine::manager::LockManager;
#[cfg(feature = "redis")]
use crate::error::BackendError;
use crate::lease::LossMargin;

/// Builds a [`LockManager`]; every setting has a default.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use tower_lock::LockManager;
///
/// let locks = LockManager::builder()
///     .key_prefix("shop:")
///     .wait(Duration::from_secs(2))
///     .memory();
/// assert_eq!(locks.key("order:42").unwrap().as_str(), "shop:order:42");
/// # }
/// ```
#[derive(Debug, Clone, Default)]
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

    /// The lease of locks acquired without a [fixed lease](crate::engine::LockRequest::fixed_lease),
    /// renewed every lease/3 by a watchdog while held (default [`DEFAULT_LEASE`](crate::manager::DEFAULT_LEASE), 30 s).
    /// Values under 3 ms are raised to 3 ms, values over [`MAX_LEASE`] lowered to it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = lease.clamp(Duration::from_millis(3), MAX_LEASE);
        self
    }

    /// How long an acquisition waits when the request does not say (default
    /// [`DEFAULT_WAIT`](crate::manager::DEFAULT_WAIT), 10 s).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.settings.wait = wait;
        self
    }

    /// How many times in a row a last release may hand the lock straight to the next waiter
    /// of this process (default [`DEFAULT_HAND_OVER_LIMIT`](crate::manager::DEFAULT_HAND_OVER_LIMIT), 8); then one release frees it,
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
    ///
    /// [`RedisBackend::replica_ack`]: crate::backend::RedisBackend::replica_ack
    pub fn hand_over_limit(mut self, limit: u32) -> Self {
        self.settings.hand_over_limit = limit;
        self
    }

    /// Whether the manager keeps a list of its live holds, for
    /// [`LockManager::local_holds`](crate::LockManager::local_holds) and the admin router's
    /// `GET /process` (default: yes). Keeping it costs each acquire + release about 600
    /// instructions (a mutex and a map entry): nothing beside a Redis round trip, about 12 %
    /// of the memory backend's uncontended pair. With `false`, `local_holds` is empty.
    pub fn track_holds(mut self, track: bool) -> Self {
        self.settings.track_holds = track;
        self
    }

    /// How long before a lease could end its holder is told that the lock may be lost
    /// (default [`LossMargin::DEFAULT`]: 1 % of the lease plus 2 ms, at most a third of
    /// the lease). See [`LossMargin`].
    pub fn loss_margin(mut self, margin: LossMargin) -> Self {
        self.settings.loss_margin = margin;
        self
    }

    /// How long a fair waiter's place in the queue lasts, per place ahead of it, when its
    /// waiter stops asking (default [`DEFAULT_FAIR_QUEUE_TIMEOUT`](crate::manager::DEFAULT_FAIR_QUEUE_TIMEOUT), 5 minutes, Redisson's
    /// `fairLockWaitTimeout`). A waiter's own is the shorter of this and its wait. A live
    /// waiter keeps its place however long the holder keeps the lock (it renews the place
    /// every third of this); one whose process died is dropped from the head of the queue
    /// this long after its last renewal, and the next waiter goes on.
    ///
    /// When Redisson clients share the queues, give both sides the same value (Redisson:
    /// `Config.setFairLockWaitTimeout`, or the same `waitTime` in `tryLock`): when a waiter
    /// takes the lock, Redisson moves the places behind it up by *its* value. Values under
    /// 10 ms are raised to 10 ms. See `docs/fair-locks.md`.
    pub fn fair_queue_timeout(mut self, timeout: Duration) -> Self {
        self.settings.fair_queue_timeout = timeout.clamp(Duration::from_millis(10), MAX_LEASE);
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

    /// A manager on Redis at `url`. Call it inside a Tokio runtime.
    ///
    /// # Errors
    /// When the URL is invalid or Redis cannot be reached.
    ///
    /// # Cancel safety
    /// As [`RedisBackend::connect`]: to bound start-up time use
    /// [`redis_lazy`](Self::redis_lazy) rather than a timeout around this.
    #[cfg(feature = "redis")]
    pub async fn redis(self, url: &str) -> Result<LockManager, BackendError> {
        Ok(self.backend(RedisBackend::connect(url).await?))
    }

    /// A manager on Redis at `url` that starts without waiting for Redis: until Redis
    /// answers, acquisitions fail with [`LockError::Unavailable`](crate::LockError::Unavailable)
    /// (503 from the layer). Call it inside a Tokio runtime.
    ///
    /// # Errors
    /// Only for an invalid URL.
    ///
    /// # Cancel safety
    /// Cancel safe: it does not wait for Redis.
    #[cfg(feature = "redis")]
    pub async fn redis_lazy(self, url: &str) -> Result<LockManager, BackendError> {
        Ok(self.backend(RedisBackend::connect_lazy(url).await?))
    }

    /// A manager on any backend. For [`RedisBackend`], call it inside a Tokio runtime: the
    /// subscriber's tasks are spawned here.
    ///
    /// [`RedisBackend`]: crate::backend::RedisBackend
    pub fn backend(self, backend: impl Backend) -> LockManager {
        LockManager::from_inner(Arc::new(ManagerInner::new(self.settings, backend)))
    }
}

impl LockManager {
    /// A manager on the in-memory backend with default settings (one process only).
    pub fn memory() -> Self {
        Self::builder().memory()
    }

    /// A manager on Redis at `url` with default settings.
    ///
    /// # Errors
    /// When the URL is invalid or Redis cannot be reached.
    ///
    /// # Cancel safety
    /// As [`LockManagerBuilder::redis`](crate::manager::LockManagerBuilder::redis).
    #[cfg(feature = "redis")]
    pub async fn redis(url: &str) -> Result<Self, BackendError> {
        Self::builder().redis(url).await
    }

    /// Settings for a new manager.
    pub fn builder() -> LockManagerBuilder {
        LockManagerBuilder::default()
    }
}
