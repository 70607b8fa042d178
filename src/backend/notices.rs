//! What a backend tells its manager: unlocks made by other processes, notices that may
//! have been lost, a lost connection; and what it asks: which names have local waiters,
//! so that it listens for exactly those.

use crate::key::LockKey;
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
