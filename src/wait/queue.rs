//! One name's queue of local waiters, and a waiter.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
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
}

impl Queue {
    /// The waiters that may try now: the head, and when it reads, the readers right
    /// behind it (they share; a writer stops the run, and readers behind a writer wait for
    /// it). A semaphore's waiters try one at a time: the next once the head got permits.
    pub(super) fn front(&self) -> impl Iterator<Item = &Arc<Waiter>> {
        // Lazily: a waiter looking for itself stops where it stands, not at the run's end.
        let run = self
            .waiters
            .front()
            .is_some_and(|head| head.tries_in_a_run());
        self.waiters
            .iter()
            .enumerate()
            .take_while(move |(at, waiter)| *at == 0 || (run && waiter.tries_in_a_run()))
            .map(|(_, waiter)| waiter)
    }

    /// Signals the waiters at the [`front`](Self::front).
    pub(super) fn signal_front(&self, retry: bool) {
        for waiter in self.front() {
            waiter.signal(retry);
        }
    }
}

pub(crate) struct Waiter {
    pub(super) id: u64,
    pub(super) wake: Notify,
    /// Set when this waiter, as head, should try again now.
    pub(super) retry: AtomicBool,
    /// The kind it waits for: whether it shares with readers ahead of it, whether a
    /// release may hand it the lock (the kind's rules say).
    pub(super) kind: LockKind,
    /// Who the waiter acquires as, and its lease: a release may hand it the lock.
    pub(super) owner: OwnerId,
    pub(super) lease: std::time::Duration,
    /// Where a hand-over to this waiter stands (taken after its shard's mutex, if both).
    pub(super) offer: Mutex<OfferState>,
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
