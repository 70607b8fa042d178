//! This process's fair waiters ([`LockKind::Fair`](crate::lock::LockKind::Fair)). They do not
//! queue here: each one has its place in the backend's queue, shared by every process, and
//! waits for its own turn (on Redis, a message on a channel of its own), so each is
//! registered by name *and* owner. The backend's subscriber follows the registrations in
//! batches, like the names of the local queues.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::WaitQueues;
use crate::key::{LockKey, OwnerId};

/// A fair waiter: its name and owner.
pub(super) type FairId = (LockKey, OwnerId);

/// The fair waiters of one manager.
#[derive(Default)]
pub(super) struct FairWaiters(Mutex<FairState>);

#[derive(Default)]
struct FairState {
    waiters: HashMap<FairId, Arc<Notify>>,
    /// Waiters whose wanted subscription may differ from the backend's (only recorded for
    /// a backend that subscribes).
    changes: HashSet<FairId>,
}

impl FairWaiters {
    fn lock(&self) -> MutexGuard<'_, FairState> {
        // Each change leaves the state whole; a panic elsewhere must not stop the waiters.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl WaitQueues {
    /// Registers the fair waiter `owner` of `key`: from now on [`turn`](Self::turn) and
    /// subscription changes reach it. It is woken once it is listened to (at once for a
    /// backend without subscriptions), to look again for a turn it may have missed before.
    /// Dropping the ticket unregisters it.
    pub(crate) fn fair_join(&self, key: &LockKey, owner: &OwnerId) -> FairTicket {
        let id = (key.clone(), owner.clone());
        let wake = Arc::new(Notify::new());
        let mut state = self.inner.fair.lock();
        state.waiters.insert(id.clone(), wake.clone());
        let subscribes = !self.inner.ready_at_once;
        if subscribes {
            state.changes.insert(id.clone());
        }
        drop(state);
        if subscribes {
            // The subscriber wakes it once its channel is in place.
            self.inner.changed.notify_one();
        } else {
            // Nothing to wait for: it looks again at once (a turn given before it was
            // registered here found nobody to wake).
            wake.notify_one();
        }
        FairTicket {
            queues: self.clone(),
            id,
            wake,
        }
    }

    /// The fair waiter `owner` of `key` may take the lock now (it is at the head of the
    /// queue and the lock was released), or should look again (a subscription came into
    /// place, messages may have been lost).
    pub(crate) fn turn(&self, key: &LockKey, owner: &OwnerId) {
        let id = (key.clone(), owner.clone());
        if let Some(wake) = self.inner.fair.lock().waiters.get(&id) {
            wake.notify_one();
        }
    }

    /// Every fair waiter looks again (notices may have been lost).
    pub(super) fn resync_fair(&self) {
        for wake in self.inner.fair.lock().waiters.values() {
            wake.notify_one();
        }
    }

    /// The fair waiters whose subscription may need to change, each with whether it is
    /// wanted now.
    pub(crate) fn take_fair_changes(&self) -> Vec<(FairId, bool)> {
        let mut state = self.inner.fair.lock();
        let changes = std::mem::take(&mut state.changes);
        changes
            .into_iter()
            .map(|id| {
                let wanted = state.waiters.contains_key(&id);
                (id, wanted)
            })
            .collect()
    }

    /// Whether the fair waiter `id` is still registered.
    pub(crate) fn is_fair_waiting(&self, id: &FairId) -> bool {
        self.inner.fair.lock().waiters.contains_key(id)
    }

    /// Names with fair waiters here, and how many.
    pub(super) fn fair_waiting_names(&self) -> Vec<(LockKey, usize)> {
        let state = self.inner.fair.lock();
        let mut names: HashMap<&LockKey, usize> = HashMap::new();
        for (key, _) in state.waiters.keys() {
            *names.entry(key).or_default() += 1;
        }
        names.into_iter().map(|(key, n)| (key.clone(), n)).collect()
    }

    /// (fair waiters, of them for `key` if given, subscription changes pending).
    pub(crate) fn fair_counts(&self, key: Option<&LockKey>) -> (usize, usize, usize) {
        let state = self.inner.fair.lock();
        let of_key = key.map_or(0, |key| {
            state.waiters.keys().filter(|(k, _)| k == key).count()
        });
        (state.waiters.len(), of_key, state.changes.len())
    }
}

/// A fair waiter's registration. Dropping it unregisters the waiter.
pub(crate) struct FairTicket {
    queues: WaitQueues,
    id: FairId,
    wake: Arc<Notify>,
}

impl FairTicket {
    /// Waits for [`WaitQueues::turn`] (a wake-up that came before is kept).
    ///
    /// # Cancel safety
    /// Cancel safe: a wake-up not taken stays for the next call.
    pub(crate) async fn signalled(&self) {
        self.wake.notified().await
    }
}

impl Drop for FairTicket {
    fn drop(&mut self) {
        let subscribes = !self.queues.inner.ready_at_once;
        let mut state = self.queues.inner.fair.lock();
        state.waiters.remove(&self.id);
        if subscribes {
            state.changes.insert(self.id.clone());
        }
        drop(state);
        if subscribes {
            self.queues.inner.changed.notify_one();
        }
    }
}
