//! What a backend tells its manager: unlocks made by other processes, notices that may
//! have been lost, a lost connection; and what it asks: which names have local waiters,
//! so that it listens for exactly those.

use crate::key::{LockKey, OwnerId};
use crate::wait::WaitQueues;

/// The channel from a backend to its manager's waiters, given to
/// [`Backend::listen`](super::Backend::listen). Cheap to clone.
#[derive(Clone)]
pub struct Notices {
    queues: WaitQueues,
}

impl Notices {
    pub(crate) fn new(queues: WaitQueues) -> Self {
        Notices { queues }
    }

    /// Another process released `key` (the lock is free): the next local waiter tries now
    /// (with the readers right behind it, when it reads). The backend should not report
    /// this process's own releases (the manager wakes its waiters itself).
    pub fn unlocked(&self, key: &LockKey) {
        self.queues.unlocked(key);
    }

    /// Another process released a lock that several waiters may now share (a write
    /// release: Redisson's READ_UNLOCK). The same as [`unlocked`](Self::unlocked): the readers
    /// at the front of the queue all try, up to the first local writer, which later readers
    /// do not overtake.
    pub fn unlocked_all(&self, key: &LockKey) {
        self.queues.unlocked(key);
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
        self.queues.changed().await
    }

    /// The names whose wanted subscription may have changed, each with whether it is
    /// wanted now (it has local waiters).
    pub fn take_changes(&self) -> Vec<(LockKey, bool)> {
        self.queues.take_changes()
    }

    /// The backend now reports unlocks of `keys`: their first waiters try (a release
    /// between their failed attempt and the subscription would otherwise be missed).
    pub fn subscribed(&self, keys: &[LockKey]) {
        self.queues.subscribed(keys);
    }

    /// Whether the local waiters of `key` wait for a read-write lock
    /// ([`LockKind::Read`](crate::LockKind::Read) or [`Write`](crate::LockKind::Write)):
    /// the backend listens on that lock's channel (Redis: `redisson_rwlock:{key}`) rather
    /// than the plain lock's.
    pub fn is_read_write(&self, key: &LockKey) -> bool {
        self.queues.is_read_write(key)
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
