//! A waiter's place in a queue.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::time::Instant;

use super::{WaitQueues, Waiter};
use crate::key::LockKey;

/// What a waiter should do next.
pub(crate) enum Turn {
    /// Try to acquire now.
    Try,
    /// Wait for a signal, or until `Some(instant)` at the latest (then try).
    Wait(Option<Instant>),
}

/// A place in a wait queue. Dropping it leaves the queue.
pub(crate) struct Ticket {
    pub(super) queues: WaitQueues,
    pub(super) key: LockKey,
    pub(super) waiter: Arc<Waiter>,
    /// Set when the waiter acquired: the lease it took, for the next head's timer.
    pub(super) acquired_for: Option<std::time::Duration>,
}

impl Ticket {
    /// Decides whether this waiter tries now or waits (and until when).
    pub(crate) fn turn(&self) -> Turn {
        let state = self.queues.lock(&self.key);
        let Some(queue) = state.queues.get(&self.key) else {
            return Turn::Wait(None);
        };
        let is_head = queue
            .waiters
            .front()
            .is_some_and(|head| head.id == self.waiter.id);
        if !is_head {
            return Turn::Wait(None);
        }
        if queue.ready && self.waiter.retry.swap(false, Ordering::AcqRel) {
            return Turn::Try;
        }
        match queue.busy_until {
            Some(until) if until <= Instant::now() => Turn::Try,
            until => Turn::Wait(until),
        }
    }

    /// Waits for a signal (unlock, promotion, subscription).
    pub(crate) async fn signalled(&self) {
        self.waiter.wake.notified().await
    }

    /// The attempt found the lock busy for `busy_for` (`None`: no expiry).
    pub(crate) fn busy(&self, busy_for: Option<std::time::Duration>) {
        let mut state = self.queues.lock(&self.key);
        if let Some(queue) = state.queues.get_mut(&self.key) {
            queue.busy_until = busy_for.map(|d| Instant::now() + d);
        }
    }

    /// The waiter acquired the lock with `lease`; leaving the queue will not make the next
    /// head retry before that lease ends or an unlock is seen.
    pub(crate) fn acquired(mut self, lease: std::time::Duration) {
        self.acquired_for = Some(lease);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.queues.lock(&self.key);
        let Some(queue) = state.queues.get_mut(&self.key) else {
            return;
        };
        let was_head = queue
            .waiters
            .front()
            .is_some_and(|head| head.id == self.waiter.id);
        if was_head {
            queue.waiters.pop_front();
        } else if let Some(pos) = queue.waiters.iter().position(|w| w.id == self.waiter.id) {
            queue.waiters.remove(pos);
        }
        if queue.waiters.is_empty() {
            state.queues.remove(&self.key);
            state.changes.insert(self.key.clone());
            self.queues
                .queued_near(&self.key)
                .fetch_sub(1, Ordering::AcqRel);
            drop(state);
            if !self.queues.inner.ready_at_once {
                self.queues.inner.changed.notify_one();
            }
            return;
        }
        if was_head {
            match self.acquired_for {
                Some(lease) => {
                    // We hold the lock now: the next head waits for its release.
                    queue.busy_until = Some(Instant::now() + lease);
                    if let Some(next) = queue.waiters.front() {
                        next.signal(false);
                    }
                }
                None => {
                    // We leave without the lock; a wake-up meant for us may be lost with
                    // us, so the next head tries at once.
                    if let Some(next) = queue.waiters.front() {
                        next.signal(true);
                    }
                }
            }
        }
    }
}
