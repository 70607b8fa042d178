//! One name's queue of local waiters, and a waiter.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::offer::OfferState;
use super::turns::Turns;
use crate::key::OwnerId;
use crate::kind::LockKind;

/// The local waiters of one name, in arrival order.
pub(super) struct Queue {
    pub(super) waiters: VecDeque<Arc<Waiter>>,
    /// The backend confirmed its subscription: unlocks from other processes will be seen.
    pub(super) ready: bool,
    /// When the current holder's lease ends, as last reported.
    pub(super) busy_until: Option<Instant>,
    /// Runs of hand-overs, and turns with other processes (see
    /// [`WaitQueues::next_holder`](super::WaitQueues::next_holder)).
    pub(super) turns: Turns,
    /// The kind its first waiter waits for: the backend listens on that kind's channel.
    pub(super) kind: LockKind,
    /// A waiter found the lock's record (see `LockRequest::unless_recorded`): every waiter
    /// will, so all look at once rather than one after another.
    pub(super) recorded: bool,
    /// Its first waiter takes the lock only unless it has a record: the backend also
    /// listens for the records that releases send to such waiters.
    pub(super) records: bool,
    /// The head was held back by a waiting writer's mark (see `Rules::held_back_by_marks`),
    /// which ends at this instant as last reported unless renewed. Meanwhile the waiters
    /// that the marks hold back do not block the queue: the first waiter they do not hold
    /// back (a writer behind them, which may well be the marking one) tries as if it were
    /// the head, and only the head watches for the marks' end (at this instant, or at once
    /// when a release or an unlock notice says the lock changed). Cleared when a held-back
    /// waiter gets in or finds no mark.
    pub(super) held_back: Option<Instant>,
    /// How many times the front was signalled (see [`answer_is_stale`](Self::answer_is_stale)).
    pub(super) signals: u64,
}

impl Queue {
    /// The waiters that may try now: the head, and when it reads, the readers right
    /// behind it (they share; a writer stops the run, and readers behind a writer wait for
    /// it). A semaphore's waiters try one at a time: the next once the head got permits.
    /// While a waiting writer's mark holds the head back, the head (alone) and the first
    /// waiter the marks do not hold back (see [`held_back`](Self::held_back)).
    pub(super) fn front(&self) -> impl Iterator<Item = &Arc<Waiter>> {
        let head = self.waiters.front();
        let held_back = self.held_back.is_some() && head.is_some_and(|h| h.held_back_by_marks());
        // Lazily: a waiter looking for itself stops where it stands, not at the run's end.
        let run = !held_back && head.is_some_and(|head| head.tries_in_a_run());
        let not_held_back = held_back
            .then(|| {
                self.waiters
                    .iter()
                    .skip(1)
                    .find(|waiter| !waiter.held_back_by_marks())
            })
            .flatten();
        self.waiters
            .iter()
            .enumerate()
            .take_while(move |(at, waiter)| *at == 0 || (run && waiter.tries_in_a_run()))
            .map(|(_, waiter)| waiter)
            .chain(not_held_back)
    }

    /// The head was held back by a waiting writer's mark that ends at `until` (as
    /// reported): the first waiter the marks do not hold back tries now, unless it already
    /// was in front.
    pub(super) fn hold_back(&mut self, until: Instant) {
        if self.held_back.replace(until).is_some() {
            return;
        }
        let head_held_back = self
            .waiters
            .front()
            .is_some_and(|head| head.held_back_by_marks());
        if let Some(next) = self
            .waiters
            .iter()
            .skip(1)
            .find(|waiter| !waiter.held_back_by_marks())
            .filter(|_| head_held_back)
        {
            next.signal(true);
        }
    }

    /// When the waiter `waiter` tries next unless told to at once: the marks' end for a
    /// held-back head, the holder's lease as last reported for the others.
    pub(super) fn next_try(&self, waiter: &Waiter) -> Option<Instant> {
        match self.held_back {
            Some(until) if waiter.held_back_by_marks() => Some(until),
            _ => self.busy_until,
        }
    }

    /// Signals the waiters at the [`front`](Self::front): the lock may have changed.
    pub(super) fn signal_front(&mut self, retry: bool) {
        self.signals = self.signals.wrapping_add(1);
        for waiter in self.front() {
            waiter.signal(retry);
        }
    }

    /// A waiter's attempt is sent now: see [`answer_is_stale`](Self::answer_is_stale).
    pub(super) fn trying(&self, waiter: &Waiter) {
        waiter.tried_at.store(self.signals, Ordering::Relaxed);
    }

    /// Whether the front was signalled while `waiter`'s attempt was on its way: its
    /// answer may be older than the change the signal told of (a release by this
    /// process), and must not put off the retry that signal asked for.
    pub(super) fn answer_is_stale(&self, waiter: &Waiter) -> bool {
        waiter.tried_at.load(Ordering::Relaxed) != self.signals
    }
}

pub(crate) struct Waiter {
    pub(super) id: u64,
    pub(super) wake: Notify,
    /// Set when this waiter, as head, should try again now.
    pub(super) retry: AtomicBool,
    /// The queue's signal count when its last attempt was sent.
    pub(super) tried_at: AtomicU64,
    /// The kind it waits for: whether it shares with readers ahead of it, whether a
    /// release may hand it the lock (the kind's rules say).
    pub(super) kind: LockKind,
    /// Who the waiter acquires as, and its lease: a release may hand it the lock.
    pub(super) owner: OwnerId,
    pub(super) lease: std::time::Duration,
    /// Where a hand-over to this waiter stands (taken after its shard's mutex, if both).
    pub(super) offer: Mutex<OfferState>,
    /// For a waiter that takes the lock only unless it has a record: the record another
    /// process's release stored while it waited, as its message brought it (see
    /// `WaitQueues::record_arrived`). `None` for any other waiter: a record is not news
    /// to it.
    pub(super) record: Option<Mutex<Option<bytes::Bytes>>>,
}

impl Waiter {
    pub(super) fn offer(&self) -> MutexGuard<'_, OfferState> {
        self.offer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// It waits for a lock whose holders share (a read lock: it may share with readers
    /// ahead of it).
    pub(super) fn reads(&self) -> bool {
        self.kind.rules().shared
    }

    /// The waiters of its kind right behind the head try together with it (readers).
    pub(super) fn tries_in_a_run(&self) -> bool {
        self.kind.rules().tries_in_a_run
    }

    /// A waiting writer's mark holds it back (a new reader).
    pub(super) fn held_back_by_marks(&self) -> bool {
        self.kind.rules().held_back_by_marks
    }

    /// A release may hand it the lock (it waits for a kind that is handed over).
    pub(super) fn takes_hand_over(&self) -> bool {
        self.kind.rules().hands_over
    }

    pub(super) fn signal(&self, retry: bool) {
        if retry {
            self.retry.store(true, Ordering::Release);
        }
        self.wake.notify_one();
    }
}
