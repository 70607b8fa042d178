//! The storage behind a [`LockManager`](crate::LockManager): a small trait and two
//! implementations, [`RedisBackend`] and [`MemoryBackend`], which share one behaviour suite.
//!
//! A backend stores the lock state and carries unlock notifications; the manager does the
//! rest (local FIFO queues, wake-one hand-over, deadlines, watchdog, cancellation).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::error::{BackendError, Released};
use crate::key::{LockKey, OwnerId};
use crate::wait::WaitQueues;

pub mod memory;
pub mod redis;

pub use memory::MemoryBackend;
pub use redis::{MissingAck, RedisBackend, ReplicaAck};

/// A boxed, sendable future that owns its data (it may outlive its caller: an operation whose
/// caller went away is finished and cleaned up in the background).
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The outcome of one acquisition attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The owner now holds the lock (its count went from `expected` to `expected + 1`).
    Acquired,
    /// Another owner holds it; its lease runs for this long (`None`: no expiry set).
    Busy(Option<Duration>),
    /// A reentrant attempt (`expected > 0`) found that the owner no longer holds the lock.
    Lost,
}

/// One acquisition attempt.
#[derive(Debug, Clone)]
pub struct AcquireArgs {
    /// The lock.
    pub key: LockKey,
    /// Who asks.
    pub owner: OwnerId,
    /// The lease to set on success.
    pub lease: Duration,
    /// How many holds `owner` has before this one (0 for a first acquisition). A backend
    /// must apply an attempt at most once: an attempt re-sent after it already took effect
    /// finds the count at `expected + 1` and reports `Acquired` without counting again.
    pub expected: u32,
}

/// One release.
#[derive(Debug, Clone)]
pub struct ReleaseArgs {
    /// The lock.
    pub key: LockKey,
    /// Who releases.
    pub owner: OwnerId,
    /// The lease to set again when a reentrant hold remains.
    pub lease: Duration,
    /// How many holds `owner` has before this release (at least 1). A backend must apply a
    /// release at most once: a release re-sent after it already took effect finds the
    /// count at `expected - 1` and reports `StillHeld` without counting again (a re-sent
    /// last release finds the lock gone: `NotHeld`).
    pub expected: u32,
    /// For the owner's last hold (`expected == 1`) on a backend that
    /// [`hands_over`](Backend::hands_over): give the lock straight to this waiter of the
    /// same process instead of freeing it.
    pub successor: Option<Successor>,
}

/// What a release did, as the backend reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseReply {
    /// What the release found.
    pub released: Released,
    /// For [`Released::Unlocked`]: how many subscribers the unlock notification reached,
    /// this process's own included when it listens (Redis: what `PUBLISH` answers), if the
    /// backend can tell. A process whose own waiters were not told yet lets waiters of
    /// other processes have the first chance at the lock when this says some listen.
    pub listeners: Option<u32>,
}

impl ReleaseReply {
    /// A reply with no listener count.
    pub fn new(released: Released) -> Self {
        ReleaseReply {
            released,
            listeners: None,
        }
    }
}

/// The waiter a last release hands the lock to (see [`ReleaseArgs::successor`]).
#[derive(Debug, Clone)]
pub struct Successor {
    /// The waiter's owner id.
    pub owner: OwnerId,
    /// The lease the waiter takes.
    pub lease: Duration,
}

/// Storage and notifications for locks.
///
/// Every future is `'static` and must be safe to finish without its caller: the manager
/// keeps an abandoned acquisition running in the background so that it can undo it.
pub trait Backend: Send + Sync + 'static {
    /// Tries once to take `args.key` for `args.owner` (reentrant for the same owner).
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>>;

    /// Drops one hold. At zero the lock is deleted and an unlock notification goes to every
    /// process waiting on it.
    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>>;

    /// Whether a last release can hand the lock straight to a waiter of this process
    /// ([`ReleaseArgs::successor`], answered with [`Released::HandedOver`]) in the same
    /// step, so that the next holder needs no acquisition of its own (one round trip per
    /// hand-over instead of two). A backend that says so must check, in that same atomic
    /// step, that the releaser still holds the lock and make the successor the owner, and
    /// answer [`Released::HandedOver`] only when it did: the successor is then granted the
    /// lock on that answer alone. It must apply a hand-over at most once and report
    /// [`Released::HandedOver`] again for a re-sent one that already took effect. Default:
    /// `false` (a successor is ignored; the release frees the lock).
    fn hands_over(&self) -> bool {
        false
    }

    /// Whether [`acquire_now`](Self::acquire_now) and [`release_now`](Self::release_now)
    /// answer: a backend that needs no waiting (an in-process one) lets the manager skip the
    /// futures, their allocations and the background undo a future needs. Such a backend
    /// must apply the operations on one name one at a time (a lock or a mutex per name):
    /// a hold it grants while no waiter is queued near the name takes no claim in the wait
    /// queues, and its release relies on that order to see a waiter that queued meanwhile.
    /// Default: `false`.
    fn answers_at_once(&self) -> bool {
        false
    }

    /// [`acquire`](Self::acquire) answered at once, for a backend that
    /// [`answers_at_once`](Self::answers_at_once). An answer is final: an error means
    /// nothing was taken. `None` (the default): call `acquire`.
    fn acquire_now(&self, _args: &AcquireArgs) -> Option<Result<Attempt, BackendError>> {
        None
    }

    /// [`release`](Self::release) answered at once, like
    /// [`acquire_now`](Self::acquire_now). `None` (the default): call `release`.
    fn release_now(&self, _args: &ReleaseArgs) -> Option<Result<ReleaseReply, BackendError>> {
        None
    }

    /// Whether the backend can be asked now: `false` while it knows that it cannot reach
    /// its store (Redis: the connection is down and being made again). An acquisition that
    /// would otherwise wait in the local queue fails at once with
    /// [`LockError::Unavailable`](crate::LockError::Unavailable) instead, and a waiter whose
    /// wait ends meanwhile reports the backend unavailable rather than the lock busy.
    /// Default: `true`.
    fn is_available(&self) -> bool {
        true
    }

    /// How long one [`acquire`](Self::acquire) can take at most before it fails, if the
    /// backend bounds it itself (a command time limit). A waiting acquisition whose wait
    /// is longer than this does not need a timer of its own around its first attempt.
    /// Default: `None` (unbounded; the manager sets a timer).
    fn acquire_time_limit(&self) -> Option<Duration> {
        None
    }

    /// Extends the lease if `owner` still holds the lock; `Ok(false)` when it does not.
    fn renew(
        &self,
        key: LockKey,
        owner: OwnerId,
        lease: Duration,
    ) -> BoxFuture<Result<bool, BackendError>>;

    /// Connects the backend to the manager's wait queues: from now on the backend keeps its
    /// notification subscriptions in step with the names that have local waiters (wait
    /// for [`WaitQueues::changed`], then apply [`WaitQueues::take_changes`] and confirm
    /// with [`WaitQueues::subscribed`]), and reports unlocks from other processes with
    /// [`WaitQueues::unlocked`] and possibly lost notifications with
    /// [`WaitQueues::resync`]. Releases made through this manager are announced to local
    /// waiters by the manager itself.
    fn attach(&self, queues: WaitQueues);

    /// Rejects a key this backend cannot lock safely (`Err` says why). Redis Cluster
    /// rejects keys whose braces would put the lock and its channel in different slots.
    fn check_key(&self, _key: &LockKey) -> Result<(), String> {
        Ok(())
    }

    /// Whether unlocks from other processes arrive only after a subscription is confirmed
    /// (see [`WaitQueues::subscribed`]). A single-process backend returns `false`: its
    /// waiters are ready at once.
    fn needs_subscription(&self) -> bool {
        true
    }

    /// A short name for logs ("redis", "memory").
    fn kind(&self) -> &'static str;
}
