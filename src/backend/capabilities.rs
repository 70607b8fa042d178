//! What a backend has: the kinds it stores and the operations it answers, as the manager
//! asks before anything reaches it.

use std::time::Duration;

use crate::kind::KindSet;

#[cfg(doc)]
use super::{AcquireArgs, Backend, Notices, ReleaseArgs};
#[cfg(doc)]
use crate::error::{LockError, Released};

/// What a backend has (see [`Backend::capabilities`]). The manager refuses what it lacks
/// before anything reaches it ([`LockError::Unsupported`]), and the HTTP layers say so when
/// they are given a manager.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Capabilities {
    /// The kinds of lock it stores. Default: the plain lock alone.
    pub kinds: KindSet,
    /// Locks with a record ([`AcquireArgs::unless_recorded`], [`ReleaseArgs::record`]).
    pub records: bool,
    /// It answers [`inspect`](Backend::inspect), [`force_unlock`](Backend::force_unlock)
    /// and [`list_names`](Backend::list_names).
    pub inspects: bool,
    /// A last release can hand the lock straight to a waiter of this process
    /// ([`ReleaseArgs::successor`], answered with [`Released::HandedOver`]) in the same
    /// atomic step, so that the next holder needs no acquisition of its own. A backend that
    /// says so must check, in that step, that the releaser still holds the lock and make
    /// the successor the owner, and answer [`Released::HandedOver`] only when it did: the
    /// successor is then granted the lock on that answer alone. It must apply a hand-over at
    /// most once, and report [`Released::HandedOver`] again for a re-sent one that already
    /// took effect.
    pub hands_over: bool,
    /// One [`acquire`](Backend::acquire) fails by itself within this time (a command time
    /// limit): a waiting acquisition whose wait is longer needs no timer of its own around
    /// its first attempt.
    pub attempt_time_limit: Option<Duration>,
    /// Unlocks of other processes are reported through subscriptions that the backend
    /// confirms ([`Notices::subscribed`]): the first waiter of a name retries once its
    /// subscription is in place. `false`: waiters are ready at once.
    pub subscribes: bool,
    /// It answers [`acquire_now`](Backend::acquire_now) and
    /// [`release_now`](Backend::release_now) in this process, without a future, applying
    /// the operations on one name one at a time in the order they are asked (the memory
    /// backend: a mutex per shard of names). The manager then takes an uncontended lock
    /// without a future, and a hold granted while nobody waits near its name skips the
    /// claim in the wait queues (its release relies on that order to see a waiter that
    /// queued meanwhile).
    pub answers_at_once: bool,
    /// The store queues waiting acquisitions itself (PostgreSQL's lock queue): an attempt
    /// of a waiting acquisition may wait in it up to [`AcquireArgs::wait_left`], and is
    /// taken out of it by [`leave_queue`](Backend::leave_queue) when its acquirer goes
    /// away first (the manager asks at once, while the attempt may still be waiting).
    pub waits_in_store: bool,
    /// A busy answer says how long the holder's lease has left ([`Attempt::Busy`] with a
    /// time), so that waiters retry when it ends and a wait that times out reports it.
    /// `false` where the store keeps no leases that other processes can read (PostgreSQL:
    /// a lock lasts as long as its session). Default: `true`.
    ///
    /// [`Attempt::Busy`]: super::Attempt::Busy
    pub reports_holder_lease: bool,
    /// Why a kind that [`kinds`](Self::kinds) leaves out is missing, in a few words that
    /// [`LockError::Unsupported`] passes on (`None`: no reason given). Default: none.
    pub why_missing: fn(crate::kind::LockKind) -> Option<&'static str>,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            kinds: KindSet::PLAIN,
            records: false,
            inspects: false,
            hands_over: false,
            attempt_time_limit: None,
            subscribes: false,
            answers_at_once: false,
            waits_in_store: false,
            reports_holder_lease: true,
            why_missing: |_| None,
        }
    }
}

impl Capabilities {
    /// The plain lock alone; no records, inspection, hand-over, time limit, subscriptions,
    /// answers at once or waits in the store; busy answers report the holder's lease.
    pub fn new() -> Self {
        Self::default()
    }

    /// With [`kinds`](Self::kinds) as given.
    pub fn kinds(mut self, kinds: KindSet) -> Self {
        self.kinds = kinds;
        self
    }

    /// With [`records`](Self::records) as given.
    pub fn records(mut self, records: bool) -> Self {
        self.records = records;
        self
    }

    /// With [`inspects`](Self::inspects) as given.
    pub fn inspects(mut self, inspects: bool) -> Self {
        self.inspects = inspects;
        self
    }

    /// With [`hands_over`](Self::hands_over) set as given.
    pub fn hands_over(mut self, hands_over: bool) -> Self {
        self.hands_over = hands_over;
        self
    }

    /// With [`attempt_time_limit`](Self::attempt_time_limit) set as given.
    pub fn attempt_time_limit(mut self, limit: Option<Duration>) -> Self {
        self.attempt_time_limit = limit;
        self
    }

    /// With [`subscribes`](Self::subscribes) set as given.
    pub fn subscribes(mut self, subscribes: bool) -> Self {
        self.subscribes = subscribes;
        self
    }

    /// With [`answers_at_once`](Self::answers_at_once) set as given.
    pub fn answers_at_once(mut self, at_once: bool) -> Self {
        self.answers_at_once = at_once;
        self
    }

    /// With [`waits_in_store`](Self::waits_in_store) set as given.
    pub fn waits_in_store(mut self, waits: bool) -> Self {
        self.waits_in_store = waits;
        self
    }

    /// With [`reports_holder_lease`](Self::reports_holder_lease) set as given.
    pub fn reports_holder_lease(mut self, reports: bool) -> Self {
        self.reports_holder_lease = reports;
        self
    }

    /// With [`why_missing`](Self::why_missing) set as given.
    pub fn why_missing(mut self, why: fn(crate::kind::LockKind) -> Option<&'static str>) -> Self {
        self.why_missing = why;
        self
    }
}
