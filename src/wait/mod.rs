//! Local wait queues: one FIFO queue per lock name that has waiters in this process.
//!
//! Only the head of a queue retries against the backend, and only when it has a reason to:
//! an unlock notification, a release by this process, a lost subscription, or the end of
//! the holder's lease as last reported. So the backend work per hand-over does not grow
//! with the number of local waiters, and a newcomer never overtakes a queued waiter.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::key::{KeyMap, KeySet, LockKey, OwnerId};
use crate::kind::LockKind;

mod claim;
mod counts;
mod fair_waiters;
mod listening;
mod offer;
mod queue;
mod ticket;
mod turns;

pub(crate) use claim::Claim;
pub(crate) use fair_waiters::FairTicket;
use offer::OfferState;
pub(crate) use offer::{Handing, Offer};
use queue::Queue;
pub(crate) use queue::Waiter;
pub(crate) use ticket::{Ticket, Turn};
pub(crate) use turns::COURTESY_MAX;

/// The wait queues of one manager. Backends reach them through
/// [`Notices`](crate::backend::Notices).
#[derive(Clone)]
pub(crate) struct WaitQueues {
    inner: Arc<QueuesInner>,
}

struct QueuesInner {
    /// The queues, split by name like the memory backend's table: requests for different
    /// names on different threads seldom take the same mutex.
    shards: [QueueShard; SHARDS],
    /// Signalled when the set of watched names changed (see [`WaitQueues::changed`]).
    changed: Notify,
    /// Signalled when the backend lost its connection (see
    /// [`WaitQueues::connection_lost`]).
    outage: Notify,
    /// Queues are ready at once: the backend needs no subscription (single process).
    ready_at_once: bool,
    next_waiter: AtomicU64,
    /// Names with waiters, per shard: read without the shard's mutex by holds that an
    /// in-process backend granted without a claim (see [`WaitQueues::may_be_queued`]).
    queued: QueuedNames,
    /// Fair waiters, by name and owner (they wait in the backend's queue, not here).
    fair: fair_waiters::FairWaiters,
}

/// Changed only when a queue is made or removed, so reading it seldom misses the cache.
#[derive(Default)]
#[repr(align(64))]
struct QueuedNames([AtomicU32; SHARDS]);

const SHARDS: usize = 16;

/// One part of the queues, on a cache line of its own.
#[derive(Default)]
#[repr(align(64))]
struct QueueShard(Mutex<ShardState>);

#[derive(Default)]
struct ShardState {
    queues: KeyMap<Queue>,
    /// Locks held by this process (number of holders; more than one only across a
    /// hand-over, or for readers): a newcomer queues behind them instead of trying in vain.
    held: KeyMap<u32>,
    /// How many of `held` are read holds: a reader newcomer may share with them.
    reading: KeyMap<u32>,
    /// Names whose wanted subscription may differ from the backend's (only recorded for a
    /// backend that subscribes: nobody empties it otherwise).
    changes: KeySet,
}

fn lock_shard(shard: &QueueShard) -> MutexGuard<'_, ShardState> {
    // A panic while holding this lock cannot leave the state half-changed in a way that
    // matters more than stopping every waiter would, so keep going.
    shard.0.lock().unwrap_or_else(|e| e.into_inner())
}

impl std::fmt::Debug for WaitQueues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitQueues")
            .field("names", &self.len())
            .finish()
    }
}

impl WaitQueues {
    pub(crate) fn new(ready_at_once: bool) -> Self {
        WaitQueues {
            inner: Arc::new(QueuesInner {
                shards: Default::default(),
                changed: Notify::new(),
                outage: Notify::new(),
                ready_at_once,
                next_waiter: AtomicU64::new(1),
                queued: QueuedNames::default(),
                fair: Default::default(),
            }),
        }
    }

    /// Whether this is the last handle on the queues (their manager is gone).
    pub(crate) fn is_only_handle(&self) -> bool {
        Arc::strong_count(&self.inner) == 1
    }

    /// The part of the queues that holds `key`.
    fn lock(&self, key: &LockKey) -> MutexGuard<'_, ShardState> {
        lock_shard(&self.inner.shards[key.shard(SHARDS)])
    }

    /// The count of names with waiters in `key`'s shard.
    fn queued_near(&self, key: &LockKey) -> &AtomicU32 {
        &self.inner.queued.0[key.shard(SHARDS)]
    }

    /// Whether `key` may have local waiters: `false` means none was queued when asked,
    /// without taking a mutex.
    ///
    /// The in-process backend lets a hold skip the claim when this is `false`: a waiter
    /// that queues later makes the queue, counts it here and then tries the backend
    /// itself. Either its try comes after the holder's release, or the release (which
    /// passes the backend's lock on the same name after that try) sees the count and wakes
    /// it ([`released_unclaimed`](Self::released_unclaimed)).
    pub(crate) fn may_be_queued(&self, key: &LockKey) -> bool {
        self.queued_near(key).load(Ordering::Acquire) > 0
    }

    /// Every part of the queues, one after the other.
    fn each_shard(&self) -> impl Iterator<Item = MutexGuard<'_, ShardState>> {
        self.inner.shards.iter().map(lock_shard)
    }

    /// Claims `key` for a holder or an attempt of `kind` in this process: until the claim
    /// ends, newcomers queue instead of trying in vain (readers share a read claim).
    pub(crate) fn claim(&self, key: &LockKey, kind: LockKind) -> Claim {
        let reads = kind.rules().shared;
        let mut state = self.lock(key);
        *state.held.entry(key.clone()).or_insert(0) += 1;
        if reads {
            *state.reading.entry(key.clone()).or_insert(0) += 1;
        }
        Claim {
            queues: self.clone(),
            key: key.clone(),
            reads,
            ended: false,
        }
    }

    /// [`claim`](Self::claim), only if the name is [`Local::Free`] here (one look at the
    /// table for the both of them).
    pub(crate) fn claim_if_free(&self, key: &LockKey) -> Option<Claim> {
        let mut state = self.lock(key);
        if state.queues.contains_key(key) || state.held.contains_key(key) {
            return None;
        }
        state.held.insert(key.clone(), 1);
        drop(state);
        Some(Claim {
            queues: self.clone(),
            key: key.clone(),
            reads: false,
            ended: false,
        })
    }

    fn hold_ended(&self, key: &LockKey, reads: bool, wake: Wake) {
        let mut guard = self.lock(key);
        let state: &mut ShardState = &mut guard;
        for (counts, counted) in [(&mut state.held, true), (&mut state.reading, reads)] {
            if let Some(count) = counts.get_mut(key).filter(|_| counted) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(key);
                }
            }
        }
        self.wake_next(state, key, wake);
    }

    /// What a newcomer of `kind` for `key` finds in this process. A reader finds the name
    /// free while only readers hold it here.
    pub(crate) fn local_state(&self, key: &LockKey, kind: LockKind) -> Local {
        let state = self.lock(key);
        if state.queues.contains_key(key) {
            Local::Queued
        } else if let Some(held) = state.held.get(key) {
            let shared = kind.rules().shared && state.reading.get(key) == Some(held);
            if shared {
                Local::Free
            } else {
                Local::Held
            }
        } else {
            Local::Free
        }
    }

    /// This process released `key` (the lock is free, or was not ours any more): wake the
    /// next local waiter as `wake` says, without waiting for our own notification to come
    /// back.
    pub(crate) fn released_locally(&self, key: &LockKey, wake: Wake) {
        let mut state = self.lock(key);
        self.wake_next(&mut state, key, wake);
    }

    /// A hold taken without a claim released `key`: wake the next local waiter, if any may
    /// be queued (see [`may_be_queued`](Self::may_be_queued)).
    pub(crate) fn released_unclaimed(&self, key: &LockKey, wake: Wake) {
        if self.may_be_queued(key) {
            self.released_locally(key, wake);
        }
    }

    fn wake_next(&self, state: &mut ShardState, key: &LockKey, wake: Wake) {
        let Some(queue) = state.queues.get_mut(key) else {
            return;
        };
        match wake {
            Wake::No => {}
            Wake::Now | Wake::Alone => {
                if wake == Wake::Alone {
                    queue.turns.alone();
                }
                queue.busy_until = None;
                queue.signal_front(true);
            }
            Wake::After(delay) => {
                // The head tries when the delay is over, or at once if another process's
                // unlock arrives first (it took the lock and let it go).
                let delay = queue.turns.yielded(delay);
                let until = Instant::now() + delay;
                queue.busy_until = Some(until);
                if let Some(marks_end) = queue.held_back.as_mut() {
                    // The mark that held readers back may have been the releaser's.
                    *marks_end = (*marks_end).min(until);
                }
                queue.signal_front(false);
            }
        }
    }

    /// Enqueues a waiter for lock `kind` at the back of `key`'s queue, acquiring as
    /// `owner` with `lease`. `found` is what the caller's attempt just found, if it made
    /// one. `records`: it takes the lock only unless it has a record (it is sent the
    /// records that releases send to waiters; for a queue's first waiter, the backend then
    /// listens for them).
    pub(crate) fn join(
        &self,
        key: &LockKey,
        (kind, records): (LockKind, bool),
        found: Found,
        owner: &OwnerId,
        lease: std::time::Duration,
    ) -> Ticket {
        let waiter = Arc::new(Waiter {
            id: self.inner.next_waiter.fetch_add(1, Ordering::Relaxed),
            wake: Notify::new(),
            retry: AtomicBool::new(false),
            tried_at: AtomicU64::new(0),
            kind,
            owner: owner.clone(),
            lease,
            offer: Mutex::new(OfferState::Idle),
            record: records.then(|| Mutex::new(None)),
        });
        let mut state = self.lock(key);
        let created = !state.queues.contains_key(key);
        let ready_at_once = self.inner.ready_at_once;
        let queue = state.queues.entry(key.clone()).or_insert_with(|| Queue {
            waiters: VecDeque::new(),
            ready: ready_at_once,
            busy_until: None,
            turns: Default::default(),
            kind,
            recorded: false,
            records,
            held_back: None,
            signals: 0,
        });
        match found {
            Found::Nothing => {}
            Found::Busy(busy_for) => queue.busy_until = Some(Instant::now() + busy_for),
            Found::HeldBack(marks_end) => queue.hold_back(Instant::now() + marks_end),
        }
        // The first waiter retries once the subscription is in place, so that a release
        // between its failed attempt and the subscription is not missed. Later waiters wait
        // for a reason to retry, unless they land in front (past readers held back, or
        // in a run of readers) after an attempt of their own: the queue was made while it
        // was on its way, and a notice meanwhile went to the waiters in front then.
        queue.waiters.push_back(waiter.clone());
        let tried = found != Found::Nothing;
        let retry = created || (tried && queue.front().any(|w| w.id == waiter.id));
        waiter.retry.store(retry, Ordering::Relaxed);
        if created {
            if !ready_at_once {
                state.changes.insert(key.clone());
            }
            // Counted before this waiter's first try (see `may_be_queued`).
            self.queued_near(key).fetch_add(1, Ordering::AcqRel);
        }
        drop(state);
        if created && !ready_at_once {
            self.inner.changed.notify_one();
        }
        Ticket {
            queues: self.clone(),
            key: key.clone(),
            waiter,
            acquired_for: None,
            left: false,
        }
    }
}

/// What a newcomer's own attempt found before it queued (see [`WaitQueues::join`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// Nothing known (no attempt, or the holder's lease has no end).
    Nothing,
    /// The lock is busy; the holder's lease ends within this long (or the attempt failed
    /// and is tried again after this long).
    Busy(std::time::Duration),
    /// Waiting writers' marks held it back; they end within this long unless renewed.
    HeldBack(std::time::Duration),
}

/// When the next local waiter tries, after a hold of this process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Not now: the lock was handed to it, or is still held.
    No,
    /// At once: the lock is free (or its state unknown).
    Now,
    /// At once: the lock is free, and no other process listens for it (their turns are
    /// over).
    Alone,
    /// After this delay, unless another process's unlock comes first: the lock is free and
    /// other processes' waiters were told; they get the first chance (see
    /// the courtesy delay of [`turns`]).
    After(std::time::Duration),
}

/// A name's state in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Local {
    /// Waiters are queued: a newcomer goes behind them.
    Queued,
    /// A holder or an attempt here has the lock or is about to (no queue yet).
    Held,
    /// Nothing known here.
    Free,
}

#[cfg(test)]
mod tests;
