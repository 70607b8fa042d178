//! Fair locks in memory, with the rules of `fair.lua`: the lock is
//! the plain lock's hold; its waiters queue by name, each place with a deadline that its
//! waiter's attempts keep alive; the head alone may take a free lock, and only the head
//! is told when it may.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::memory::plain;
use crate::backend::memory::{Entry, Locks, PlainHolder};
use crate::backend::{AcquireArgs, Attempt, LeaveArgs, ReleaseArgs};
use crate::error::Released;
use crate::key::{LockKey, OwnerId};

/// One name's queue of fair waiters (of every manager on this backend).
#[derive(Debug, Default)]
pub(in crate::backend) struct FairQueue(VecDeque<FairPlace>);

impl FairQueue {
    /// Waiters queued.
    pub(in crate::backend) fn len(&self) -> usize {
        self.0.len()
    }

    /// The owner at the head of the queue.
    pub(in crate::backend) fn head(&self) -> Option<OwnerId> {
        self.0.front().map(|place| place.owner.clone())
    }

    /// The first `max` places as an inspection shows them.
    pub(in crate::backend) fn inspected(
        &self,
        now: Instant,
        max: usize,
    ) -> Vec<crate::backend::info::QueuedWaiter> {
        self.0
            .iter()
            .take(max)
            .map(|place| crate::backend::info::QueuedWaiter {
                owner: place.owner.as_str().to_owned(),
                place_lasts: Some(place.deadline.saturating_duration_since(now)),
            })
            .collect()
    }
}

/// A waiter's place in a fair queue.
#[derive(Debug)]
struct FairPlace {
    owner: OwnerId,
    /// When the place runs out unless its waiter asks again.
    deadline: Instant,
}

/// The waiter to tell that its turn came (it may take the lock), once the table is let go.
pub(in crate::backend) type NextTurn = Option<(LockKey, OwnerId)>;

impl Locks {
    /// Drops the heads of `key`'s queue whose place ran out, moving the places behind up
    /// by `step` for each (see fair.lua: dead waiters cost one queue timeout in all);
    /// whether any was dropped.
    fn evict(&mut self, key: &LockKey, now: Instant, step: Duration) -> bool {
        let Some(queue) = self.fair.get_mut(key) else {
            return false;
        };
        let mut moved = Duration::ZERO;
        let mut dropped = false;
        while queue.0.front().is_some_and(|place| {
            place
                .deadline
                .checked_sub(moved)
                .is_none_or(|deadline| deadline <= now)
        }) {
            queue.0.pop_front();
            dropped = true;
            moved += step;
        }
        for place in &mut queue.0 {
            place.deadline = place.deadline.checked_sub(moved).unwrap_or(now);
        }
        if queue.0.is_empty() {
            self.fair.remove(key);
        }
        dropped
    }

    /// The first waiter of `key`'s queue whose place has not run out (dropping nobody:
    /// operations without a queue timeout leave that to the waiters' own attempts), and
    /// whether places that ran out are ahead of it.
    fn first_alive(&self, key: &LockKey, now: Instant) -> Option<(&FairPlace, bool)> {
        let queue = self.fair.get(key)?;
        let at = queue.0.iter().position(|place| place.deadline > now)?;
        Some((&queue.0[at], at > 0))
    }

    /// The head of `key`'s queue, to be told, unless it is `except`.
    fn head(&self, key: &LockKey, except: Option<&OwnerId>) -> NextTurn {
        let head = &self.fair.get(key)?.0.front()?.owner;
        (Some(head) != except).then(|| (key.clone(), head.clone()))
    }

    /// The waiter to tell that the lock is free: the first whose place is alive, or the
    /// head when every place ran out (its own attempt sorts the queue out, see fair.lua).
    fn alive_to_wake(&self, key: &LockKey, now: Instant) -> NextTurn {
        match self.first_alive(key, now) {
            Some((place, _)) => Some((key.clone(), place.owner.clone())),
            None => self.head(key, None),
        }
    }

    /// `owner` takes the free lock; if it was the head, it leaves the queue and the places
    /// behind move up by `step`.
    fn take_fair(
        &mut self,
        key: &LockKey,
        owner: &OwnerId,
        lease: Duration,
        step: Duration,
        now: Instant,
    ) {
        if let Some(queue) = self.fair.get_mut(key) {
            if queue.0.front().is_some_and(|place| place.owner == *owner) {
                queue.0.pop_front();
                for place in &mut queue.0 {
                    place.deadline = place.deadline.checked_sub(step).unwrap_or(now);
                }
            }
            if queue.0.is_empty() {
                self.fair.remove(key);
            }
        }
        let holder = PlainHolder {
            owner: owner.clone(),
            count: 1,
            expires: now + lease,
            awaited: false,
        };
        self.held.insert(key.clone(), Entry::Plain(holder));
    }

    /// When the head's place runs out (at least 1 ms from now).
    fn head_deadline_in(&self, key: &LockKey, now: Instant) -> Duration {
        let deadline = self
            .fair
            .get(key)
            .and_then(|queue| queue.0.front())
            .map(|place| place.deadline);
        deadline
            .map_or(Duration::ZERO, |deadline| deadline - now)
            .max(Duration::from_millis(1))
    }

    /// The holder's remaining lease, if the lock is live.
    fn holder_lease(&mut self, key: &LockKey, now: Instant) -> Option<Duration> {
        self.live(key, now).map(|entry| entry.expires() - now)
    }
}

/// An attempt: a waiting one queues (or keeps its place alive); a single try never
/// queues; a holder's reentry is the plain lock's.
pub(in crate::backend) fn take(
    locks: &mut Locks,
    args: &AcquireArgs,
    now: Instant,
) -> (Attempt, NextTurn) {
    if args.expected > 0 {
        let attempt = match plain::take(locks, args, now) {
            Ok(_) => Attempt::Acquired,
            Err(attempt) => attempt,
        };
        return (attempt, None);
    }
    if args.waits {
        return queue(locks, args, now);
    }
    try_take(locks, args, now)
}

/// A first try that never queues.
fn try_take(locks: &mut Locks, args: &AcquireArgs, now: Instant) -> (Attempt, NextTurn) {
    if let Some(lease) = locks.holder_lease(&args.key, now) {
        return (Attempt::Busy(Some(lease)), None);
    }
    let Some((head, behind_dead)) = locks.first_alive(&args.key, now) else {
        // Nobody queues, or every place ran out: the queue is over.
        locks.fair.remove(&args.key);
        locks.take_fair(&args.key, &args.owner, args.lease, Duration::ZERO, now);
        return (Attempt::Acquired, None);
    };
    let busy = Attempt::Busy(Some((head.deadline - now).max(Duration::from_millis(1))));
    // Places that ran out are ahead of it: it may not know that its turn came.
    let wake = behind_dead.then(|| (args.key.clone(), head.owner.clone()));
    (busy, wake)
}

/// An attempt that queues, or keeps its place alive.
fn queue(locks: &mut Locks, args: &AcquireArgs, now: Instant) -> (Attempt, NextTurn) {
    let (key, owner, step) = (&args.key, &args.owner, args.queue_timeout);
    let holder = locks.live(key, now).map(|entry| match entry {
        Entry::Plain(holder) => holder.owner == *owner,
        Entry::Shared(_) => false,
    });
    if holder == Some(true) {
        // A re-sent attempt that took the lock already.
        return (Attempt::Acquired, None);
    }
    let free = holder.is_none();
    let dropped = locks.evict(key, now, step);
    let pttl = locks.holder_lease(key, now);
    let found = locks
        .fair
        .get(key)
        .and_then(|queue| queue.0.iter().position(|place| place.owner == *owner));
    let empty = locks.fair.get(key).is_none_or(|queue| queue.0.is_empty());
    if found.is_none() && free && empty {
        locks.take_fair(key, owner, args.lease, step, now);
        return (Attempt::Acquired, None);
    }
    let queue = locks.fair.entry(key.clone()).or_default();
    let pos = match found {
        Some(pos) => pos,
        None if args.was_head && !empty => {
            // Dropped as the head while it still waited: back to the front; the places
            // behind move back by one timeout, as they moved up when it was dropped.
            for place in &mut queue.0 {
                place.deadline += step;
            }
            let place = FairPlace {
                owner: owner.clone(),
                deadline: now,
            };
            queue.0.push_front(place);
            0
        }
        None => {
            // Behind the last place, not padded with the holder's lease (see fair.lua).
            let base = queue.0.back().map_or(now, |last| last.deadline);
            let place = FairPlace {
                owner: owner.clone(),
                deadline: base + step,
            };
            queue.0.push_back(place);
            queue.0.len() - 1
        }
    };
    // Keep the place alive: at least one timeout per place up to its own.
    let alive = now + step * (pos as u32 + 1);
    let place = &mut queue.0[pos];
    place.deadline = place.deadline.max(alive);
    if free && pos == 0 {
        locks.take_fair(key, owner, args.lease, step, now);
        return (Attempt::Acquired, None);
    }
    let wake = if free && dropped {
        locks.head(key, Some(owner))
    } else {
        None
    };
    let retry_in = if pos > 0 {
        locks.head_deadline_in(key, now)
    } else {
        pttl.unwrap_or(step)
    };
    let queued = Attempt::Queued {
        retry_in,
        holder_lease: pttl,
        at_head: pos == 0,
    };
    (queued, wake)
}

/// A fair lock's release: the plain lock's, then the head is told if the lock is free.
pub(in crate::backend) fn release(
    locks: &mut Locks,
    args: &ReleaseArgs,
    now: Instant,
) -> (Released, NextTurn) {
    let released = plain::release(locks, args, now);
    let free = locks.live(&args.key, now).is_none();
    if released == Released::StillHeld || !free {
        return (released, None);
    }
    (released, locks.alive_to_wake(&args.key, now))
}

/// A waiter leaves the queue; the places behind move up by its timeout.
pub(in crate::backend) fn leave(locks: &mut Locks, args: &LeaveArgs, now: Instant) -> NextTurn {
    let queue = locks.fair.get_mut(&args.key)?;
    let at = queue.0.iter().position(|place| place.owner == args.owner)?;
    queue.0.remove(at);
    for place in queue.0.iter_mut().skip(at) {
        place.deadline = place
            .deadline
            .checked_sub(args.queue_timeout)
            .unwrap_or(now);
    }
    if queue.0.is_empty() {
        locks.fair.remove(&args.key);
    }
    if at == 0 && locks.live(&args.key, now).is_none() {
        locks.evict(&args.key, now, args.queue_timeout);
        return locks.head(&args.key, None);
    }
    None
}
