//! Settings for a new [`LockManager`], with their defaults.

use std::time::Duration;

use super::manager::LockManager;
use super::LossMargin;
#[cfg(feature = "redis")]
use crate::backend::RedisBackend;
use crate::backend::{Backend, MemoryBackend};
#[cfg(feature = "redis")]
use crate::error::BackendError;
use crate::key::DEFAULT_MAX_NAME_LEN;

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

/// Default [queue timeout](LockManagerBuilder::fair_queue_timeout) of fair locks: Redisson's
/// default `fairLockWaitTimeout`, 5 minutes.
pub const DEFAULT_FAIR_QUEUE_TIMEOUT: Duration = Duration::from_secs(300);

/// A manager's settings (fixed once it is built).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) key_prefix: String,
    pub(crate) lease: Duration,
    pub(crate) wait: Duration,
    pub(crate) max_name_len: usize,
    pub(crate) hand_over_limit: u32,
    pub(crate) loss_margin: LossMargin,
    pub(crate) fair_queue_timeout: Duration,
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
            fair_queue_timeout: DEFAULT_FAIR_QUEUE_TIMEOUT,
        }
    }
}

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

    /// The lease of locks acquired without a [fixed lease](super::LockRequest::fixed_lease),
    /// renewed every lease/3 by a watchdog while held (default [`DEFAULT_LEASE`], 30 s).
    /// Values under 3 ms are raised to 3 ms, values over [`MAX_LEASE`] lowered to it.
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
    ///
    /// [`RedisBackend::replica_ack`]: crate::backend::RedisBackend::replica_ack
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

    /// How long a fair waiter's place in the queue lasts, per place ahead of it, when its
    /// waiter stops asking (default [`DEFAULT_FAIR_QUEUE_TIMEOUT`], 5 minutes, Redisson's
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
        LockManager::with(self.settings, backend)
    }
}
