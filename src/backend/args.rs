//! What the manager asks of a backend: one argument type per operation, each built with a
//! constructor and setters (the fields are read by backends; new ones may come, so they
//! are not built by struct literal outside this crate).

use std::time::Duration;

use bytes::Bytes;

use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

#[cfg(doc)]
use super::{Attempt, Backend, Capabilities, Notices, WRITER_MARK_LEASE};
#[cfg(doc)]
use crate::error::Released;

/// One acquisition attempt (see [`Backend::acquire`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
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
    /// single try and a reentry). A waiting fair acquisition ([`LockKind::Fair`]) takes its
    /// place in the backend's queue (see [`queue_timeout`](Self::queue_timeout)) and is
    /// answered [`Attempt::Queued`] while it is not its turn. A writer
    /// ([`LockKind::Write`]) that waits behind readers marks its wait, so that new readers
    /// hold back ([`Attempt::HeldBack`]) until it got in or stopped waiting
    /// ([`Backend::leave_queue`]); a mark lives [`WRITER_MARK_LEASE`] unless the writer's
    /// next attempts renew it (a waiting writer is answered `Busy` for at most a third of
    /// it), so that a dead writer's mark ends within seconds.
    pub waits: bool,
    /// Take the lock only if it has no record (one left by a release with
    /// [`ReleaseArgs::record`] whose retention has not run out); if it has one, take nothing
    /// and answer [`Attempt::Recorded`] with it, in the same atomic step. Only for a first
    /// acquisition (`expected == 0`) of a plain lock, on a backend that has
    /// [records](Capabilities::records). (The idempotency layer runs a handler once per key
    /// this way.)
    pub unless_recorded: bool,
    /// With [`unless_recorded`](Self::unless_recorded): the work the lock is taken for (a
    /// digest of it: the idempotency layer's request fingerprint). The lock keeps it while
    /// held, in the same step as the grant; an acquisition for other work that finds the
    /// lock held for this one answers [`Attempt::HeldForOtherWork`] at once. `None`: no
    /// work named (it neither checks nor is checked).
    pub work: Option<Bytes>,
    /// For a waiting fair acquisition: how long a place in the queue lasts without being
    /// kept alive, per place ahead of it (Redisson's `threadWaitTime`). A waiter that stops
    /// asking (its process died) is dropped from the head of the queue this long after its
    /// last attempt; every attempt keeps the place alive, and the manager makes one at least
    /// every third of this.
    pub queue_timeout: Duration,
    /// For a waiting fair acquisition: this owner's last attempt was answered
    /// [`Attempt::Queued`] at the head of the queue. If the owner is missing from the queue
    /// now, it was dropped as the head while it still waited (its place ran out while it
    /// could not reach the backend, or a client with a shorter timeout shortened it): it
    /// goes back to the front, where it was. A waiter missing for another reason (the queue
    /// was lost with a restart) queues again at the back.
    pub was_head: bool,
    /// For a waiting acquisition: how long its acquirer will go on waiting from this
    /// attempt. A backend whose store queues waiters itself
    /// ([`Capabilities::waits_in_store`]) may keep the attempt in the store's queue up to
    /// this long, answering once it holds the lock or the time is up, instead of answering
    /// `Busy` at once. Zero for a single try.
    pub wait_left: Duration,
}

impl AcquireArgs {
    /// A first acquisition (no hold yet) of `key` by `owner` with `lease`: a single try,
    /// no record asked about.
    pub fn new(key: LockKey, kind: LockKind, owner: OwnerId, lease: Duration) -> Self {
        AcquireArgs {
            key,
            kind,
            owner,
            lease,
            expected: 0,
            waits: false,
            unless_recorded: false,
            work: None,
            queue_timeout: Duration::ZERO,
            was_head: false,
            wait_left: Duration::ZERO,
        }
    }

    /// With [`expected`](Self::expected) holds before it (a reentry).
    pub fn expected(mut self, expected: u32) -> Self {
        self.expected = expected;
        self
    }

    /// With [`waits`](Self::waits) as given.
    pub fn waits(mut self, waits: bool) -> Self {
        self.waits = waits;
        self
    }

    /// Only [unless the lock has a record](Self::unless_recorded), for `work` if named.
    pub fn unless_recorded(mut self, work: Option<Bytes>) -> Self {
        self.unless_recorded = true;
        self.work = work;
        self
    }

    /// A waiting acquisition whose acquirer waits `wait_left` longer (see
    /// [`wait_left`](Self::wait_left)); it waits.
    pub fn wait_left(mut self, wait_left: Duration) -> Self {
        self.waits = true;
        self.wait_left = wait_left;
        self
    }

    /// A waiting fair acquisition's place: its [`queue_timeout`](Self::queue_timeout) and
    /// whether it [was the head](Self::was_head); it waits.
    pub fn fair_place(mut self, queue_timeout: Duration, was_head: bool) -> Self {
        self.waits = true;
        self.queue_timeout = queue_timeout;
        self.was_head = was_head;
        self
    }
}

/// One release (see [`Backend::release`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
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
    /// For the owner's last hold of a plain lock: store this record with the lock's name,
    /// in the same atomic step as the release and only if the owner still holds the lock (a
    /// holder that lost it stores nothing). The lock is then freed (never handed over) and
    /// later acquisitions with [`AcquireArgs::unless_recorded`] get the record instead of
    /// the lock until its retention ends.
    pub record: Option<LockRecord>,
}

impl ReleaseArgs {
    /// A release of one of `owner`'s `expected` holds of `key`, setting `lease` again if a
    /// hold remains; no hand-over, nothing to announce or record.
    pub fn new(
        key: LockKey,
        kind: LockKind,
        owner: OwnerId,
        lease: Duration,
        expected: u32,
    ) -> Self {
        ReleaseArgs {
            key,
            kind,
            owner,
            lease,
            expected,
            successor: None,
            announce_run: None,
            record: None,
        }
    }

    /// With a [`successor`](Self::successor).
    pub fn successor(mut self, successor: Successor) -> Self {
        self.successor = Some(successor);
        self
    }

    /// With a run to [announce](Self::announce_run).
    pub fn announce_run(mut self, holds: u32) -> Self {
        self.announce_run = Some(holds);
        self
    }

    /// With a [`record`](Self::record) to store.
    pub fn record(mut self, record: LockRecord) -> Self {
        self.record = Some(record);
        self
    }
}

/// The waiter a last release hands the lock to (see [`ReleaseArgs::successor`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Successor {
    /// The waiter's owner id.
    pub owner: OwnerId,
    /// The lease the waiter takes.
    pub lease: Duration,
}

impl Successor {
    /// The waiter `owner`, taking `lease`.
    pub fn new(owner: OwnerId, lease: Duration) -> Self {
        Successor { owner, lease }
    }
}

/// A record stored with a lock by its last release (see [`ReleaseArgs::record`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockRecord {
    /// What is stored (opaque to the backend).
    pub value: Bytes,
    /// How long it is kept.
    pub retention: Duration,
    /// Stored only if someone waits for it: an acquisition
    /// [unless recorded](AcquireArgs::unless_recorded) found the lock held by this hold
    /// (answered `Busy`); otherwise the release only frees the lock. A waiter whose attempt
    /// comes after the release finds the lock free, not a record. A backend that cannot tell
    /// stores the record anyway (that is always correct, only slower). The coalescing layer
    /// asks this when it keeps no response beyond its execution.
    pub only_if_awaited: bool,
}

impl LockRecord {
    /// `value`, kept for `retention`.
    pub fn new(value: Bytes, retention: Duration) -> Self {
        LockRecord {
            value,
            retention,
            only_if_awaited: false,
        }
    }

    /// Stored [only if someone waits for it](Self::only_if_awaited).
    pub fn only_if_awaited(mut self) -> Self {
        self.only_if_awaited = true;
        self
    }
}

/// One lease renewal (see [`Backend::renew`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
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

impl RenewArgs {
    /// A renewal of `owner`'s holds of `key` to `lease`.
    pub fn new(key: LockKey, kind: LockKind, owner: OwnerId, lease: Duration) -> Self {
        RenewArgs {
            key,
            kind,
            owner,
            lease,
        }
    }
}

/// A waiter that stops waiting (its wait ended, or its acquisition was dropped): a fair
/// waiter, which leaves the queue, or a writer, which takes back the mark of its wait (see
/// [`Backend::leave_queue`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LeaveArgs {
    /// The lock.
    pub key: LockKey,
    /// Its kind ([`LockKind::Fair`] or [`LockKind::Write`]; others have nothing to leave).
    pub kind: LockKind,
    /// The waiter.
    pub owner: OwnerId,
    /// A fair waiter's [`AcquireArgs::queue_timeout`]: the places behind it move up by this
    /// much (Redisson's `acquireFailed`).
    pub queue_timeout: Duration,
}

impl LeaveArgs {
    /// `owner`, a waiter of `key`, stops waiting.
    pub fn new(key: LockKey, kind: LockKind, owner: OwnerId) -> Self {
        LeaveArgs {
            key,
            kind,
            owner,
            queue_timeout: Duration::ZERO,
        }
    }

    /// With a fair waiter's [`queue_timeout`](Self::queue_timeout).
    pub fn queue_timeout(mut self, queue_timeout: Duration) -> Self {
        self.queue_timeout = queue_timeout;
        self
    }
}
