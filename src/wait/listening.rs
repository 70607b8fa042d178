//! What the backend reports to the wait queues (through `backend::Notices`): unlocks of
//! other processes, lost notices, a lost connection; and which names have waiters, so that
//! it listens for exactly those.

use super::WaitQueues;
use crate::key::LockKey;
use crate::kind::LockKind;

impl WaitQueues {
    /// The backend found its connection lost: operations waiting on it look whether it can
    /// still be reached, and give up if not (an operation sent as the connection dropped
    /// may otherwise wait behind the reconnect).
    pub(crate) fn connection_lost(&self) {
        self.inner.outage.notify_waiters();
    }

    /// Completes at the next [`connection_lost`](Self::connection_lost).
    pub(crate) fn outage(&self) -> tokio::sync::futures::Notified<'_> {
        self.inner.outage.notified()
    }

    /// Completes when names were added or removed since the last [`take_changes`](Self::take_changes).
    pub(crate) async fn changed(&self) {
        self.inner.changed.notified().await
    }

    /// The names whose subscription may need to change, each with whether it is wanted now.
    pub(crate) fn take_changes(&self) -> Vec<(LockKey, bool)> {
        let mut changes = Vec::new();
        for mut state in self.each_shard() {
            let taken = std::mem::take(&mut state.changes);
            changes.extend(taken.into_iter().map(|key| {
                let wanted = state.queues.contains_key(&key);
                (key, wanted)
            }));
        }
        changes
    }

    /// The backend now delivers unlock notifications for `keys`: their heads retry.
    pub(crate) fn subscribed(&self, keys: &[LockKey]) {
        for key in keys {
            if let Some(queue) = self.lock(key).queues.get_mut(key) {
                queue.ready = true;
                queue.signal_front(true);
            }
        }
    }

    /// Another process released `key` after `holds` holds in a row: its local head
    /// retries (with the readers right behind a reading head), and the holds count as the
    /// other process's turn (see `turns`).
    pub(crate) fn unlocked(&self, key: &LockKey, holds: u32) {
        if let Some(queue) = self.lock(key).queues.get_mut(key) {
            queue.turns.foreign_release(holds);
            queue.signal_front(true);
        }
    }

    /// Another process's release of `key` stored `record` for its waiters: those queued now
    /// that take the lock only unless it has a record have it and are woken (they answer
    /// with it); any other waits on for the unlock message that follows. Only those queued
    /// now: one that queues later asks the backend, whose record may have expired by then.
    pub(crate) fn record_arrived(&self, key: &LockKey, record: &bytes::Bytes) {
        if let Some(queue) = self.lock(key).queues.get_mut(key) {
            for waiter in &queue.waiters {
                if let Some(slot) = &waiter.record {
                    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(record.clone());
                    waiter.signal(true);
                }
            }
        }
    }

    /// Whether the first local waiter of `key` takes the lock only unless it has a record
    /// (the backend then listens for the records sent to waiters too).
    pub(crate) fn waits_for_records(&self, key: &LockKey) -> bool {
        self.lock(key)
            .queues
            .get(key)
            .is_some_and(|queue| queue.records)
    }

    /// The kind the local waiters of `key` wait for (the backend listens on that kind's
    /// channel), if it has any.
    pub(crate) fn waiting_kind(&self, key: &LockKey) -> Option<LockKind> {
        self.lock(key).queues.get(key).map(|queue| queue.kind)
    }

    /// Whether `key` has local waiters now.
    pub(crate) fn is_watched(&self, key: &LockKey) -> bool {
        self.lock(key).queues.contains_key(key)
    }

    /// Notifications may have been lost (reconnect, lagging receiver): every head retries.
    pub(crate) fn resync(&self) {
        for mut state in self.each_shard() {
            for queue in state.queues.values_mut() {
                queue.signal_front(true);
            }
        }
        self.resync_fair();
    }
}
