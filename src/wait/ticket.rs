//! A waiter's place in a queue.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::time::Instant;

use super::{OfferState, WaitQueues, Waiter};
use crate::key::{LockKey, OwnerId};

/// What a waiter should do next.
pub(crate) enum Turn {
    /// Try to acquire now.
    Try,
    /// Wait for a signal, or until `Some(instant)` at the latest (then try).
    Wait(Option<Instant>),
    /// A release handed this waiter the lock (the backend confirmed it); its lease runs
    /// from this instant (when the release was sent).
    Handed(Instant),
}

/// A place in a wait queue. Dropping it leaves the queue.
pub(crate) struct Ticket {
    pub(super) queues: WaitQueues,
    pub(super) key: LockKey,
    pub(super) waiter: Arc<Waiter>,
    /// Set when the waiter acquired: the lease it took, for the next head's timer.
    pub(super) acquired_for: Option<std::time::Duration>,
    /// It left the queue already (see [`leave`](Self::leave)).
    pub(super) left: bool,
}

impl Ticket {
    /// Decides whether this waiter tries now or waits (and until when).
    pub(crate) fn turn(&self) -> Turn {
        let state = self.queues.lock(&self.key);
        let Some(queue) = state.queues.get(&self.key) else {
            return Turn::Wait(None);
        };
        let mut offer = self.waiter.offer();
        match *offer {
            OfferState::Handed(lease_from) => return Turn::Handed(lease_from),
            // The release that offered it the lock will say how it went.
            OfferState::Offered => return Turn::Wait(None),
            _ => {}
        }
        // The head tries; so do the readers right behind a reading head (they share), and
        // everyone once a waiter found the lock's record.
        let in_front = queue.recorded || queue.front().any(|w| w.id == self.waiter.id);
        if !in_front {
            return Turn::Wait(None);
        }
        let now =
            (queue.ready || queue.recorded) && self.waiter.retry.swap(false, Ordering::AcqRel);
        match queue.next_try(&self.waiter) {
            _ if now => {}
            Some(until) if until <= Instant::now() => {}
            until => return Turn::Wait(until),
        }
        // No release offers it the lock while its own attempt is on its way.
        *offer = OfferState::Trying;
        queue.trying(&self.waiter);
        Turn::Try
    }

    /// Waits for a signal (unlock, promotion, subscription).
    pub(crate) async fn signalled(&self) {
        self.waiter.wake.notified().await
    }

    /// The attempt found the lock busy for `busy_for` (`None`: no expiry).
    pub(crate) fn busy(&self, busy_for: Option<std::time::Duration>) {
        let mut state = self.queues.lock(&self.key);
        if let Some(queue) = state.queues.get_mut(&self.key) {
            // A signal meanwhile set its own time to retry (or asked for a retry now).
            if !queue.answer_is_stale(&self.waiter) {
                queue.busy_until = busy_for.map(|d| Instant::now() + d);
            }
            if self.waiter.held_back_by_marks() {
                // No mark held it back (a writer holds the lock).
                queue.held_back = None;
            }
        }
        *self.waiter.offer() = OfferState::Idle;
    }

    /// The attempt was held back by waiting writers' marks that end within `marks_end`
    /// unless renewed: the waiters the marks hold back let the first one they do not
    /// hold back try.
    pub(crate) fn held_back(&self, marks_end: std::time::Duration) {
        let mut state = self.queues.lock(&self.key);
        if let Some(queue) = state.queues.get_mut(&self.key) {
            queue.hold_back(Instant::now() + marks_end);
            if queue.answer_is_stale(&self.waiter) {
                // A signal meanwhile (a release here: maybe of the marking writer) set its
                // own time to retry, or asked for a retry now.
                if let (Some(marks_end), Some(busy_until)) =
                    (queue.held_back.as_mut(), queue.busy_until)
                {
                    *marks_end = (*marks_end).min(busy_until);
                }
            }
        }
        *self.waiter.offer() = OfferState::Idle;
    }

    /// The record that another process's release sent this waiter, if any (see
    /// [`WaitQueues::record_arrived`]).
    pub(crate) fn take_record(&self) -> Option<bytes::Bytes> {
        self.waiter
            .record
            .as_ref()?
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// The waiter found the lock's record: every other waiter of the name looks at once
    /// (they will find it too).
    pub(crate) fn recorded(&self) {
        let mut state = self.queues.lock(&self.key);
        if let Some(queue) = state.queues.get_mut(&self.key) {
            queue.recorded = true;
            queue.busy_until = None;
            for waiter in &queue.waiters {
                waiter.signal(true);
            }
        }
    }

    /// The waiter acquired the lock with `lease` (by its own attempt or handed over);
    /// leaving the queue will not make the next head retry before that lease ends or an
    /// unlock is seen.
    pub(crate) fn acquired(mut self, lease: std::time::Duration) {
        self.acquired_for = Some(lease);
    }

    /// Leaves the queue. `Some`: a release handed this waiter the lock (or may have: it got
    /// no answer) and it did not take it ([`acquired`](Self::acquired) was not called): the caller must release it for
    /// the waiter, under the waiter's owner id. Dropping the ticket leaves too, and ignores
    /// that case.
    pub(crate) fn leave(&mut self) -> Option<OwnerId> {
        if std::mem::replace(&mut self.left, true) {
            return None;
        }
        let mut state = self.queues.lock(&self.key);
        let before = std::mem::replace(&mut *self.waiter.offer(), OfferState::Gone);
        // Handed the lock (or maybe, by a release that got no answer) and leaving without
        // it: the caller releases it in this waiter's name.
        let orphaned = match before {
            OfferState::Handed(_) | OfferState::Unknown if self.acquired_for.is_none() => {
                Some(self.waiter.owner.clone())
            }
            _ => None,
        };
        let Some(queue) = state.queues.get_mut(&self.key) else {
            return orphaned;
        };
        let was_head = queue
            .waiters
            .front()
            .is_some_and(|head| head.id == self.waiter.id);
        // In front without being the head: the first waiter past held-back readers.
        let was_front = was_head || queue.front().any(|w| w.id == self.waiter.id);
        if was_head {
            queue.waiters.pop_front();
        } else if let Some(pos) = queue.waiters.iter().position(|w| w.id == self.waiter.id) {
            queue.waiters.remove(pos);
        }
        if queue.waiters.is_empty() {
            state.queues.remove(&self.key);
            if !self.queues.inner.ready_at_once {
                state.changes.insert(self.key.clone());
            }
            self.queues
                .queued_near(&self.key)
                .fetch_sub(1, Ordering::AcqRel);
            drop(state);
            if !self.queues.inner.ready_at_once {
                self.queues.inner.changed.notify_one();
            }
            return orphaned;
        }
        if self.acquired_for.is_some() {
            // The record is gone (its retention ran out): back to one at a time.
            queue.recorded = false;
            if self.waiter.held_back_by_marks() {
                // A new reader got in: no mark holds readers back now.
                queue.held_back = None;
            }
        }
        // The head took the lock by its own attempt: a turn of this process begins.
        if was_head && self.acquired_for.is_some() && !matches!(before, OfferState::Handed(_)) {
            queue.turns.acquired();
        }
        if was_head {
            match self.acquired_for {
                // We read now (or got permits by our own attempt): readers next in line
                // share it, and try at once. Permits handed over freed none: the next
                // waiter has nothing new to try for.
                Some(_)
                    if self.waiter.reads()
                        && !matches!(before, OfferState::Handed(_))
                        && queue.waiters.front().is_some_and(|w| w.reads()) =>
                {
                    queue.signal_front(true);
                }
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
                    queue.signal_front(true);
                }
            }
        } else if was_front {
            match self.acquired_for {
                // A writer past held-back readers holds the lock now: whoever is next
                // waits for its release.
                Some(lease) => queue.busy_until = Some(Instant::now() + lease),
                // It leaves without the lock: the next waiter past them tries.
                None => queue.signal_front(true),
            }
        }
        orphaned
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.leave();
    }
}
