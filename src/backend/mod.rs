//! The storage behind a [`LockManager`](crate::LockManager): a small trait and two
//! implementations, [`RedisBackend`] and [`MemoryBackend`], which share one behaviour suite.
//!
//! A backend stores the lock state and reports unlocks made by other processes; the
//! manager does the rest (local FIFO queues, hand-overs, deadlines, the watchdog, the loss
//! signal, cancellation).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;

use crate::error::Released;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

mod capabilities;
mod fair;
pub(crate) mod info;
mod memory;
mod notices;
mod permits;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
mod redlock;

pub use crate::error::BackendError;
pub use capabilities::Capabilities;
pub use fair::{FairArgs, FairAttempt};
pub use info::{
    ForceUnlocked, HolderInfo, HolderSide, InspectedKind, LockInfo, NameList, QueuedWaiter,
    LISTED_MAX,
};
pub use memory::MemoryBackend;
pub use notices::Notices;
pub(crate) use permits::permit_ids_hex;
pub use permits::PermitUsage;
#[cfg(feature = "redis")]
pub use redis::{unlock_channel, MissingAck, RedisBackend, ReplicaAck, DEFAULT_COMMAND_TIMEOUT};
#[cfg(feature = "redis")]
pub use redlock::{RedLockBackend, DEFAULT_NODE_TIMEOUT};

/// How long a read-write lock's waiting writer's mark lives unless the writer renews it
/// (see [`AcquireArgs::waits`]): its attempts, made at least every third of this while it
/// waits, renew it, so that the mark of a writer whose process died holds new readers back
/// for at most this long.
pub const WRITER_MARK_LEASE: Duration = Duration::from_millis(1500);

/// A boxed, sendable future that owns its data (it may outlive its caller: an operation whose
/// caller went away is finished and cleaned up in the background).
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The outcome of one acquisition attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Attempt {
    /// The owner now holds the lock (its count went from `expected` to `expected + 1`).
    Acquired,
    /// Another owner holds it; its lease runs for this long (`None`: no expiry set).
    Busy(Option<Duration>),
    /// A reentrant attempt (`expected > 0`) found that the owner no longer holds the lock.
    Lost,
    /// As [`Acquired`](Self::Acquired), for a fenced lock ([`LockKind::Fenced`]): the
    /// fencing token this acquisition got, greater than every token given before for the
    /// name. A backend answers it to a fenced acquisition only, and never
    /// [`Acquired`](Self::Acquired) to one. A re-sent acquisition that already counted
    /// answers the counter as it is then.
    Fenced(u64),
    /// For an acquisition that asked for it ([`AcquireArgs::unless_recorded`]): the lock
    /// has a record (see [`ReleaseArgs::record`]), so nothing was taken; this is the record.
    Recorded(Bytes),
    /// A new reader ([`LockKind::Read`]) was held back, whoever holds the lock: a writer
    /// waits for it and marked its wait (see [`AcquireArgs::waits`]). Nothing was taken. The
    /// marks run out within this long unless their writers renew them; a writer that gets
    /// in or stops waiting takes its mark back and tells the waiters as a write release
    /// does.
    HeldBack(Duration),
    /// For an acquisition that named its work ([`AcquireArgs::work`]): the lock is held
    /// for other work, so this acquisition could never get it for its own and does not
    /// wait. Nothing was taken.
    HeldForOtherWork,
}

impl Attempt {
    /// Whether the owner now holds the lock.
    pub fn is_acquired(&self) -> bool {
        matches!(self, Attempt::Acquired | Attempt::Fenced(_))
    }

    /// A fenced acquisition's token.
    pub fn fencing_token(&self) -> Option<u64> {
        match self {
            Attempt::Fenced(token) => Some(*token),
            _ => None,
        }
    }
}

/// One acquisition attempt.
#[derive(Debug, Clone)]
pub struct AcquireArgs {
    /// The lock.
    pub key: LockKey,
    /// Its kind.
    pub kind: LockKind,
    /// Who asks.
    pub owner: OwnerId,
    /// The lease to set on success.
    pub lease: Duration,
    /// How many holds `owner` has before this one (0 for a first acquisition). A backend
    /// must apply an attempt at most once: an attempt re-sent after it already took effect
    /// finds the count at `expected + 1` and reports `Acquired` without counting again.
    pub expected: u32,
    /// The acquirer goes on waiting if this attempt finds the lock busy (`false` for a
    /// single try and a reentry). A writer ([`LockKind::Write`]) that waits behind readers
    /// then marks its wait, so that new readers hold back ([`Attempt::HeldBack`]) until it
    /// got in or stopped waiting ([`Backend::leave_queue`]). A mark lives a short lease of
    /// its own (1.5 s) that the writer's next attempts renew (a waiting writer is answered
    /// `Busy` for at most a third of it), so that a dead writer's mark ends within seconds.
    pub waits: bool,
    /// Take the lock only if it has no record (one left by a release with
    /// [`ReleaseArgs::record`] whose retention has not run out); if it has one, take nothing
    /// and answer [`Attempt::Recorded`] with it, in the same atomic step. Only for a first
    /// acquisition (`expected == 0`) of a plain or fenced lock; a backend without records
    /// answers an error. (The idempotency layer runs a handler once per key this way.)
    pub unless_recorded: bool,
    /// With [`unless_recorded`](Self::unless_recorded): the work the lock is taken for (a
    /// digest of it: the idempotency layer's request fingerprint). The lock keeps it while
    /// held, in the same step as the grant; an acquisition for other work that finds the
    /// lock held for this one answers [`Attempt::HeldForOtherWork`] at once. `None`: no
    /// work named (it neither checks nor is checked).
    pub work: Option<Bytes>,
}

/// One release.
#[derive(Debug, Clone)]
pub struct ReleaseArgs {
    /// The lock.
    pub key: LockKey,
    /// Its kind.
    pub kind: LockKind,
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
    /// [hands over](Capabilities::hands_over): give the lock straight to this waiter of the
    /// same process instead of freeing it.
    pub successor: Option<Successor>,
    /// For a last release that frees the lock: the length of the run of holds of this
    /// process it ends (its first acquisition and the hand-overs after it), when other
    /// processes should know it. A backend that reports unlocks to other processes tells
    /// them (Redis: the message `-<holds>` published just before Redisson's UNLOCK `0`,
    /// which Redisson ignores; see [`Notices::unlocked_after_run`]), so that their waiters
    /// let this process have about as many holds as they take. `None`: nothing to tell.
    pub announce_run: Option<u32>,
    /// For the owner's last hold of a plain or fenced lock: store this record with the
    /// lock's name, in the same atomic step as the release and only if the owner still
    /// holds the lock (a holder that lost it stores nothing). The lock is then freed (never
    /// handed over) and later acquisitions with [`AcquireArgs::unless_recorded`] get the
    /// record instead of the lock until its retention ends. A backend without records
    /// answers an error and releases nothing.
    pub record: Option<LockRecord>,
}

/// A record stored with a lock by its last release (see [`ReleaseArgs::record`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockRecord {
    /// What is stored (opaque to the backend).
    pub value: Bytes,
    /// How long it is kept.
    pub retention: Duration,
}

/// A waiter that stops waiting (its wait ended, or its acquisition was dropped): a fair
/// waiter, which leaves the queue, or a writer, which takes back the mark of its wait.
#[derive(Debug, Clone)]
pub struct LeaveArgs {
    /// The lock.
    pub key: LockKey,
    /// Its kind ([`LockKind::Fair`] or [`LockKind::Write`]; others have nothing to leave).
    pub kind: LockKind,
    /// The waiter.
    pub owner: OwnerId,
    /// A fair waiter's [`FairArgs::queue_timeout`]: the places behind it move up by this
    /// much (Redisson's `acquireFailed`).
    pub queue_timeout: Duration,
}

/// One lease renewal.
#[derive(Debug, Clone)]
pub struct RenewArgs {
    /// The lock.
    pub key: LockKey,
    /// Its kind.
    pub kind: LockKind,
    /// Whose hold.
    pub owner: OwnerId,
    /// The lease to set.
    pub lease: Duration,
}

/// What a release did, as the backend reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseReply {
    /// What the release found.
    pub released: Released,
    /// For [`Released::Unlocked`]: how many subscribers of *other* processes the unlock
    /// notice reached (Redis: what `PUBLISH` answers, less this process's own
    /// subscription), if the backend can tell. When some did, this process's next waiter
    /// lets them have the first chance at the lock.
    pub other_listeners: Option<u32>,
}

impl ReleaseReply {
    /// A reply with no listener count.
    pub fn new(released: Released) -> Self {
        ReleaseReply {
            released,
            other_listeners: None,
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

    /// Drops one hold. At zero the lock is deleted and other processes waiting on it are
    /// told (unless it was handed over: see [`Capabilities::hands_over`]).
    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>>;

    /// Extends the lease if `args.owner` still holds the lock; `Ok(false)` when it does not.
    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>>;

    /// One attempt of a waiting fair lock ([`LockKind::Fair`]): takes the lock when it is
    /// free and nobody is queued before `args.owner`, else queues the owner (or keeps its
    /// place alive). Like [`acquire`](Self::acquire), applied at most once, and safe to
    /// finish without its caller. ([`acquire`](Self::acquire) with [`LockKind::Fair`] is a
    /// single try that never queues, and the reentry of a holder.)
    ///
    /// A release of a fair lock wakes only the queue's head, through
    /// [`Notices::turn`]. Default: an error (the backend has no fair locks).
    fn fair_acquire(&self, args: FairArgs) -> BoxFuture<Result<FairAttempt, BackendError>> {
        let _ = args;
        unsupported(self.name(), "has no fair locks")
    }

    /// A waiter stopped waiting (its wait ended, or its acquisition was dropped): a fair
    /// waiter ([`LockKind::Fair`]) leaves the queue; a writer ([`LockKind::Write`]) takes
    /// back the mark of its wait, and readers held back by it alone are told. Removing one
    /// that is not queued changes nothing. Default: nothing to do.
    fn leave_queue(&self, args: LeaveArgs) -> BoxFuture<Result<(), BackendError>> {
        let _ = args;
        Box::pin(std::future::ready(Ok(())))
    }

    /// Sets the limit of the semaphore `key` (its available and held permits together); a
    /// limit raised lets waiters in, a limit lowered under the permits held lets no one
    /// in until enough are released. Default: an error (the backend has no semaphores).
    fn set_semaphore_limit(&self, key: LockKey, limit: u32) -> BoxFuture<Result<(), BackendError>> {
        let _ = (key, limit);
        unsupported(self.name(), "has no semaphores")
    }

    /// The permits of the semaphore `key` now (read only). Default: an error (the backend
    /// has no semaphores).
    fn semaphore_usage(&self, key: LockKey) -> BoxFuture<Result<PermitUsage, BackendError>> {
        let _ = key;
        unsupported(self.name(), "has no semaphores")
    }

    /// What `key` holds now (its kind, holders, fair queue, token, permits), read in one
    /// step and changing nothing. Default: an error (the backend cannot be inspected).
    fn inspect(&self, key: LockKey) -> BoxFuture<Result<LockInfo, BackendError>> {
        let _ = key;
        unsupported(self.name(), "cannot be inspected")
    }

    /// Frees `key` whatever holds it and wakes its waiters (in Redis with the kind's own
    /// message, so Redisson's wake too); the holders learn it at their next renewal. A key
    /// holding data that is no lock is left alone (an error says so). Default: an error.
    fn force_unlock(&self, key: LockKey) -> BoxFuture<Result<ForceUnlocked, BackendError>> {
        let _ = key;
        unsupported(self.name(), "cannot force-unlock")
    }

    /// Keys of locks matching `pattern` (Redis's glob syntax, applied to whole keys; the
    /// objects that belong to a lock, such as a fair queue, are not counted), at most
    /// `limit + 1` (one more tells the caller that there are more). Default: an error.
    fn list_names(
        &self,
        pattern: String,
        limit: usize,
    ) -> BoxFuture<Result<Vec<LockKey>, BackendError>> {
        let _ = (pattern, limit);
        unsupported(self.name(), "cannot list names")
    }

    /// Connects the backend to the manager: from now on it reports unlocks of other
    /// processes through `notices`, and keeps its subscriptions in step with the names
    /// that have local waiters (see [`Notices`]). Default: nothing to report (a single
    /// process; waiters then also retry when the holder's lease as last seen ends).
    fn listen(&self, _notices: Notices) {}

    /// What the backend can do besides storing locks. Default: nothing more.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
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

    /// Why the backend cannot be asked now, while [`is_available`](Self::is_available) is
    /// `false`: the error that acquisitions answer then. Default: "the lock backend is
    /// unreachable (reconnecting)".
    fn unavailable_reason(&self) -> BackendError {
        BackendError::new(format!(
            "the {} lock backend is unreachable (reconnecting)",
            self.name()
        ))
    }

    /// Rejects a key this backend cannot lock safely (`Err` says why). Redis Cluster
    /// rejects keys whose braces would put the lock and its channel in different slots.
    fn check_key(&self, _key: &LockKey) -> Result<(), String> {
        Ok(())
    }

    /// A short name for logs ("redis", "memory").
    fn name(&self) -> &'static str;
}

/// The answer of a backend to an operation it does not have: "the <name> lock backend
/// <cannot>".
fn unsupported<T: Send + 'static>(name: &str, cannot: &str) -> BoxFuture<Result<T, BackendError>> {
    let error = BackendError::new(format!("the {name} lock backend {cannot}"));
    Box::pin(std::future::ready(Err(error)))
}
