//! What a backend tells its manager: unlocks made by other processes, notices that may
//! have been lost, a lost connection; and what it asks: which names have local waiters,
//! so that it listens for exactly those.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::engine::Registry;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;
use crate::wait::WaitQueues;

/// The channel from a backend to its manager's waiters, given to
/// [`Backend::listen`](super::Backend::listen). Cheap to clone.
#[derive(Clone)]
pub struct Notices {
    queues: WaitQueues,
    /// The manager's live holds, told of the ones the backend knows are lost.
    holds: Arc<Registry>,
    /// For one of several backends that each listen for the same waiters (see
    /// [`split`](Self::split)): the name changes the others took, kept for this one.
    share: Option<(Arc<ChangeShare>, usize)>,
}

/// The name changes of one manager, shared by several listeners: each change taken by one
/// is kept for every other until it takes its own.
struct ChangeShare {
    pending: Vec<Mutex<Vec<(LockKey, bool)>>>,
    wake: Vec<Notify>,
}

impl Notices {
    pub(crate) fn new(queues: WaitQueues, holds: Arc<Registry>) -> Self {
        Notices {
            queues,
            holds,
            share: None,
        }
    }

    /// `count` handles for `count` backends that each listen for every waiter (RedLock's
    /// nodes): each sees every change of names through [`take_changes`](Self::take_changes),
    /// whoever took it first. (Fair waiters' changes are not shared: a backend made of
    /// several does not have fair locks.)
    #[cfg(feature = "redis")]
    pub(crate) fn split(&self, count: usize) -> Vec<Notices> {
        let share = Arc::new(ChangeShare {
            pending: (0..count).map(|_| Mutex::default()).collect(),
            wake: (0..count).map(|_| Notify::new()).collect(),
        });
        (0..count)
            .map(|at| Notices {
                queues: self.queues.clone(),
                holds: self.holds.clone(),
                share: Some((share.clone(), at)),
            })
            .collect()
    }

    /// Another process released `key` (the lock is free): the next local waiter tries now
    /// (with the readers right behind it, when it reads). The backend should not report
    /// this process's own releases (the manager wakes its waiters itself).
    pub fn unlocked(&self, key: &LockKey) {
        self.queues.unlocked(key, 1);
    }

    /// Another process's release of `key` stored `record` for the acquisitions
    /// [unless recorded](super::AcquireArgs::unless_recorded) that found the lock held: the
    /// local waiters queued now answer with it without another attempt. A backend sends it
    /// before the [`unlocked`](Self::unlocked) of the same release, if it can.
    pub fn recorded(&self, key: &LockKey, record: &bytes::Bytes) {
        self.queues.record_arrived(key, record);
    }

    /// Whether the first local waiter of `key` takes the lock only unless it has a record:
    /// a backend that sends records to waiters listens for those of `key` too.
    pub fn waits_for_records(&self, key: &LockKey) -> bool {
        self.queues.waits_for_records(key)
    }

    /// Another process released `key` ending a run of `holds` holds in a row (a tower-lock
    /// process announces the runs of hand-overs it ends: see
    /// [`ReleaseArgs::announce_run`](super::ReleaseArgs::announce_run)): as
    /// [`unlocked`](Self::unlocked), and this process's next run may be as long, and one
    /// hold longer (so that two processes lengthen their runs back to the hand-over limit
    /// together).
    pub fn unlocked_after_run(&self, key: &LockKey, holds: u32) {
        self.queues.unlocked(key, holds.saturating_add(1));
    }

    /// Another process released a lock that several waiters may now share (a write
    /// release: Redisson's READ_UNLOCK). The same as [`unlocked`](Self::unlocked): the readers
    /// at the front of the queue all try, up to the first local writer, which later readers
    /// do not overtake.
    pub fn unlocked_all(&self, key: &LockKey) {
        self.queues.unlocked(key, 1);
    }

    /// The backend knows that `owner`'s holds of `key` are gone (PostgreSQL: the session
    /// that held them ended): their loss signals fire now, rather than at the next renewal.
    /// (A manager built with `track_holds(false)` does not list its holds: they learn it at
    /// their next renewal.)
    pub fn lost(&self, key: &LockKey, owner: &OwnerId) {
        self.holds.lose(key, owner);
    }

    /// Notices may have been lost (a reconnect, a lagging receiver): every waiting head
    /// tries now.
    pub fn resync(&self) {
        self.queues.resync();
    }

    /// The backend lost its connection: operations waiting on it look whether it can still
    /// be reached ([`Backend::is_available`](super::Backend::is_available)) and give up if
    /// not (one sent as the connection dropped may otherwise wait behind the reconnect).
    pub fn connection_lost(&self) {
        self.queues.connection_lost();
    }

    /// Completes when names got their first local waiter or lost their last one since the
    /// last [`take_changes`](Self::take_changes).
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits; changes are kept until taken.
    pub async fn changed(&self) {
        let Some((share, at)) = &self.share else {
            return self.queues.changed().await;
        };
        let wake = share.wake[*at].notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        if !lock(&share.pending[*at]).is_empty() {
            return;
        }
        tokio::select! {
            _ = self.queues.changed() => {}
            _ = wake => {}
        }
    }

    /// The names whose wanted subscription may have changed, each with whether it is
    /// wanted now (it has local waiters).
    pub fn take_changes(&self) -> Vec<(LockKey, bool)> {
        let fresh = self.queues.take_changes();
        let Some((share, at)) = &self.share else {
            return fresh;
        };
        if !fresh.is_empty() {
            for (other, pending) in share.pending.iter().enumerate() {
                if other != *at {
                    lock(pending).extend(fresh.iter().cloned());
                    share.wake[other].notify_one();
                }
            }
        }
        let mut mine = std::mem::take(&mut *lock(&share.pending[*at]));
        mine.extend(fresh);
        mine
    }

    /// The backend now reports unlocks of `keys`: their first waiters try (a release
    /// between their failed attempt and the subscription would otherwise be missed).
    pub fn subscribed(&self, keys: &[LockKey]) {
        self.queues.subscribed(keys);
    }

    /// The kind of lock the local waiters of `key` wait for, if it has local waiters: a
    /// backend whose kinds tell their unlocks apart listens for that kind's (Redis: a
    /// read-write lock's on `redisson_rwlock:{key}`, the others' on the plain lock's
    /// channel).
    pub fn waiting_kind(&self, key: &LockKey) -> Option<LockKind> {
        self.queues.waiting_kind(key)
    }

    /// The fair waiter `owner` of `key` may take the lock now: it is at the head of the
    /// backend's queue and the lock was released (Redis: a message on its own channel,
    /// `redisson_lock__channel:{key}:<owner>`). Also how a backend that confirms
    /// subscriptions tells a fair waiter that its channel is now listened to (it then
    /// looks again, so that a release just before is not missed).
    pub fn turn(&self, key: &LockKey, owner: &OwnerId) {
        self.queues.turn(key, owner);
    }

    /// The fair waiters whose channel subscription may have changed since the last call,
    /// each with whether it is wanted now (the waiter is still waiting). Changes are
    /// signalled by [`changed`](Self::changed), like the names'.
    pub fn take_waiter_changes(&self) -> Vec<((LockKey, OwnerId), bool)> {
        self.queues.take_fair_changes()
    }

    /// Whether the fair waiter `owner` of `key` is still waiting.
    pub fn is_waiter_watched(&self, key: &LockKey, owner: &OwnerId) -> bool {
        self.queues.is_fair_waiting(&(key.clone(), owner.clone()))
    }

    /// Whether any name or fair waiter is watched now.
    pub fn has_waiters(&self) -> bool {
        self.watched_names() > 0 || self.queues.fair_counts(None).0 > 0
    }

    /// Whether the manager these notices reach is gone (only this handle is left).
    pub(crate) fn is_orphaned(&self) -> bool {
        self.queues.is_only_handle()
    }

    /// Whether `key` has local waiters now.
    pub fn is_watched(&self, key: &LockKey) -> bool {
        self.queues.is_watched(key)
    }

    /// `false` when `key` has no local waiter, answered without taking a lock (`true`: it
    /// may have one; ask [`is_watched`](Self::is_watched)).
    pub fn may_be_watched(&self, key: &LockKey) -> bool {
        self.queues.may_be_queued(key)
    }

    /// How many names have local waiters now.
    pub fn watched_names(&self) -> usize {
        self.queues.len()
    }
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notices")
            .field("watched_names", &self.watched_names())
            .finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
