//! The storage behind a [`LockManager`](crate::LockManager): the [`Backend`] contract, and
//! its implementations, [`MemoryBackend`], [`RedisBackend`], [`RedLockBackend`], and with
//! their features `PostgresBackend`, `ZooKeeperBackend` and `MySqlBackend`, each in a folder of its own, which all pass the conformance suite (`tower_lock::conformance`,
//! feature `conformance`).
//!
//! A backend stores the lock state and reports unlocks made by other processes; the
//! manager does the rest (local FIFO queues, hand-overs, deadlines, the watchdog, the loss
//! signal, cancellation). A crate of your own can implement [`Backend`] for another store
//! and give it to [`LockManagerBuilder::backend`](crate::manager::LockManagerBuilder::backend):
//! the trait's documentation says what each operation owes, and the conformance suite
//! checks it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

use crate::key::LockKey;

mod args;
mod capabilities;
pub(crate) mod glob;
pub(crate) mod info;
mod memory;
#[cfg(feature = "mysql")]
mod mysql;
mod notices;
mod permits;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
mod redlock;
mod replies;
#[cfg(feature = "zookeeper")]
mod zookeeper;

pub use crate::error::BackendError;
pub use crate::kind::KindSet;
pub use args::{AcquireArgs, LeaveArgs, LockRecord, ReleaseArgs, RenewArgs, Successor};
pub use capabilities::Capabilities;
pub use info::{
    ForceUnlocked, HolderInfo, HolderSide, InspectedKind, LockInfo, NameList, QueuedWaiter,
    LISTED_MAX,
};
pub use memory::MemoryBackend;
#[cfg(feature = "mysql")]
pub use mysql::{
    mysql_lock_name, MySqlBackend, MySqlBackendBuilder,
    DEFAULT_MAX_SESSIONS as MYSQL_DEFAULT_MAX_SESSIONS, MYSQL_MAX_LOCK_NAME,
};
pub use notices::Notices;
pub(crate) use permits::permit_ids_hex;
pub use permits::PermitUsage;
#[cfg(feature = "postgres")]
pub use postgres::{
    schema_sql as postgres_schema_sql, AdvisoryKey, PostgresBackend, PostgresBackendBuilder,
    DEFAULT_MAX_SESSIONS, DEFAULT_SCHEMA,
};
#[cfg(feature = "redis")]
pub use redis::{unlock_channel, MissingAck, RedisBackend, ReplicaAck, DEFAULT_COMMAND_TIMEOUT};
#[cfg(feature = "redis")]
pub use redlock::{RedLockBackend, DEFAULT_NODE_TIMEOUT};
pub use replies::{Attempt, ReleaseReply};
#[cfg(feature = "zookeeper")]
pub use zookeeper::{
    ZooKeeperBackend, ZooKeeperBackendBuilder, DEFAULT_ROOT as ZOOKEEPER_DEFAULT_ROOT,
    DEFAULT_SESSION_TIMEOUT as ZOOKEEPER_DEFAULT_SESSION_TIMEOUT,
    MAX_NAME_LEN as ZOOKEEPER_MAX_NAME_LEN,
};

#[cfg(doc)]
use crate::kind::LockKind;

/// How long a read-write lock's waiting writer's mark lives unless the writer renews it
/// (see [`AcquireArgs::waits`]): its attempts, made at least every third of this while it
/// waits, renew it, so that the mark of a writer whose process died holds new readers back
/// for at most this long.
pub const WRITER_MARK_LEASE: Duration = Duration::from_millis(1500);

/// A boxed, sendable future that owns its data (it may outlive its caller: an operation whose
/// caller went away is finished and cleaned up in the background).
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Storage and notifications for locks: the contract between the manager and a store.
///
/// What every backend owes:
///
/// - **A grant is the store's answer.** [`acquire`](Self::acquire) answers
///   [`Attempt::Acquired`] (or [`Attempt::Fenced`]) only when the store made the owner a
///   holder, in the same atomic step that checked the kind's rules (one holder; readers
///   sharing with readers; permits under the limit; the fair queue's order). The manager
///   grants on that answer alone, and a release that hands over
///   ([`Capabilities::hands_over`]) does so in the releaser's own step.
/// - **At most once.** Every acquisition and release carries the holds its owner expects to
///   find (`expected`): sent twice (re-sent after an answer was lost), it finds the count
///   it left and answers the same outcome without counting again.
/// - **Leases.** A hold ends by itself when its lease runs out, so that a dead process's
///   locks come back; [`renew`](Self::renew) extends only a hold the owner still has. A
///   lost hold is never reported held.
/// - **Cancellation.** Every future is `'static`, owns its data and must be safe to finish
///   without its caller: the manager keeps an abandoned operation running in the background
///   and undoes what it may have done (it releases an acquisition that may have landed, and
///   a waiter leaves the queue).
/// - **Wake-ups.** A backend shared by processes tells the manager of unlocks made
///   elsewhere through [`Notices`] (see [`listen`](Self::listen)), so that waiters never
///   poll; one that cannot tell them answers every busy attempt with the holder's lease, and
///   waiters retry when it ends.
/// - **What it has.** [`capabilities`](Self::capabilities) says which kinds it stores and
///   which of the optional operations it answers; the manager refuses the rest before they
///   reach the backend. The operations it lacks keep their default, an error.
pub trait Backend: Send + Sync + 'static {
    /// Tries once to take `args.key` for `args.owner` (reentrant for the same owner), by
    /// the rules of `args.kind`; a waiting fair acquisition takes or keeps its place in the
    /// queue ([`Attempt::Queued`]). Applied at most once.
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>>;

    /// Drops one hold. At zero the lock is deleted and other processes waiting on it are
    /// told (unless it was handed over: see [`Capabilities::hands_over`]). Applied at most
    /// once.
    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>>;

    /// Extends the lease if `args.owner` still holds the lock; `Ok(false)` when it does not.
    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>>;

    /// A waiter stopped waiting (its wait ended, or its acquisition was dropped): a fair
    /// waiter ([`LockKind::Fair`]) leaves the queue, and the next one is told its turn if
    /// it now heads it; a writer ([`LockKind::Write`]) takes back the mark of its wait, and
    /// readers held back by it alone are told. Removing one that is not queued changes
    /// nothing. Default: nothing to do.
    fn leave_queue(&self, args: LeaveArgs) -> BoxFuture<Result<(), BackendError>> {
        let _ = args;
        Box::pin(std::future::ready(Ok(())))
    }

    /// For a backend that [answers at once](Capabilities::answers_at_once): the acquisition
    /// answered now, without a future, its lease counted from `now`. `None`: ask
    /// [`acquire`](Self::acquire). An answer is final: an error means nothing was taken.
    fn acquire_now(
        &self,
        args: &AcquireArgs,
        now: Instant,
    ) -> Option<Result<Attempt, BackendError>> {
        let _ = (args, now);
        None
    }

    /// For a backend that [answers at once](Capabilities::answers_at_once): the release
    /// answered now. `None`: ask [`release`](Self::release).
    fn release_now(&self, args: &ReleaseArgs) -> Option<Result<ReleaseReply, BackendError>> {
        let _ = args;
        None
    }

    /// Sets the limit of the semaphore `key` (its available and held permits together); a
    /// limit raised lets waiters in, a limit lowered under the permits held lets no one
    /// in until enough are released. For a backend whose [kinds](Capabilities::kinds)
    /// include semaphores. Default: an error.
    fn set_semaphore_limit(&self, key: LockKey, limit: u32) -> BoxFuture<Result<(), BackendError>> {
        let _ = (key, limit);
        unsupported(self.name(), "has no semaphores")
    }

    /// The permits of the semaphore `key` now (read only). For a backend whose
    /// [kinds](Capabilities::kinds) include semaphores. Default: an error.
    fn semaphore_usage(&self, key: LockKey) -> BoxFuture<Result<PermitUsage, BackendError>> {
        let _ = key;
        unsupported(self.name(), "has no semaphores")
    }

    /// What `key` holds now (its kind, holders, fair queue, token, permits), read in one
    /// step and changing nothing. For a backend that [inspects](Capabilities::inspects).
    /// Default: an error.
    fn inspect(&self, key: LockKey) -> BoxFuture<Result<LockInfo, BackendError>> {
        let _ = key;
        unsupported(self.name(), "cannot be inspected")
    }

    /// Frees `key` whatever holds it and wakes its waiters (in Redis with the kind's own
    /// message, so Redisson's wake too); the holders learn it at their next renewal. A key
    /// holding data that is no lock is left alone (an error says so). For a backend that
    /// [inspects](Capabilities::inspects). Default: an error.
    fn force_unlock(&self, key: LockKey) -> BoxFuture<Result<ForceUnlocked, BackendError>> {
        let _ = key;
        unsupported(self.name(), "cannot force-unlock")
    }

    /// Keys of locks matching `pattern` (Redis's glob syntax, applied to whole keys; the
    /// objects that belong to a lock, such as a fair queue, are not counted), at most
    /// `limit + 1` (one more tells the caller that there are more). For a backend that
    /// [inspects](Capabilities::inspects). Default: an error.
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

    /// What the backend has: its kinds and optional operations. Default: the plain lock
    /// alone (see [`Capabilities::default`]).
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

    /// A short name for logs and errors ("redis", "memory").
    fn name(&self) -> &'static str;
}

/// The answer of a backend to an operation it does not have: "the <name> lock backend
/// <cannot>".
fn unsupported<T: Send + 'static>(name: &str, cannot: &str) -> BoxFuture<Result<T, BackendError>> {
    let error = BackendError::new(format!("the {name} lock backend {cannot}"));
    Box::pin(std::future::ready(Err(error)))
}

/// A shared backend is a backend: a manager can be given an `Arc<dyn Backend>` (or an `Arc`
/// of a backend of yours).
impl<B: Backend + ?Sized> Backend for std::sync::Arc<B> {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        (**self).acquire(args)
    }
    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        (**self).release(args)
    }
    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>> {
        (**self).renew(args)
    }
    fn leave_queue(&self, args: LeaveArgs) -> BoxFuture<Result<(), BackendError>> {
        (**self).leave_queue(args)
    }
    fn acquire_now(
        &self,
        args: &AcquireArgs,
        now: Instant,
    ) -> Option<Result<Attempt, BackendError>> {
        (**self).acquire_now(args, now)
    }
    fn release_now(&self, args: &ReleaseArgs) -> Option<Result<ReleaseReply, BackendError>> {
        (**self).release_now(args)
    }
    fn set_semaphore_limit(&self, key: LockKey, limit: u32) -> BoxFuture<Result<(), BackendError>> {
        (**self).set_semaphore_limit(key, limit)
    }
    fn semaphore_usage(&self, key: LockKey) -> BoxFuture<Result<PermitUsage, BackendError>> {
        (**self).semaphore_usage(key)
    }
    fn inspect(&self, key: LockKey) -> BoxFuture<Result<LockInfo, BackendError>> {
        (**self).inspect(key)
    }
    fn force_unlock(&self, key: LockKey) -> BoxFuture<Result<ForceUnlocked, BackendError>> {
        (**self).force_unlock(key)
    }
    fn list_names(
        &self,
        pattern: String,
        limit: usize,
    ) -> BoxFuture<Result<Vec<LockKey>, BackendError>> {
        (**self).list_names(pattern, limit)
    }
    fn listen(&self, notices: Notices) {
        (**self).listen(notices)
    }
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn is_available(&self) -> bool {
        (**self).is_available()
    }
    fn unavailable_reason(&self) -> BackendError {
        (**self).unavailable_reason()
    }
    fn check_key(&self, key: &LockKey) -> Result<(), String> {
        (**self).check_key(key)
    }
    fn name(&self) -> &'static str {
        (**self).name()
    }
}
