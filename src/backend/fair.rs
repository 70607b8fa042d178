//! The fair lock (Redisson's `RFairLock`, [`LockKind::Fair`](crate::lock::LockKind::Fair)): one
//! queue of waiters per name, shared by every process, in which a waiter keeps its place
//! while it waits, and which grants the lock to its head only. The lock itself is the
//! plain lock's hash. Here: the attempt a backend answers for a fair waiter
//! ([`FairArgs`], [`FairAttempt`]); `fair.lua` and its channels per waiter on Redis, the
//! queue in memory.

use std::time::Duration;

use crate::key::{LockKey, OwnerId};

/// One attempt of a fair waiter: take the lock if it is free and nobody is queued before
/// this owner, else join the queue (or stay in it, keeping the place alive).
#[derive(Debug, Clone)]
pub struct FairArgs {
    /// The lock.
    pub key: LockKey,
    /// Who asks.
    pub owner: OwnerId,
    /// The lease to set on success.
    pub lease: Duration,
    /// How long a place in the queue lasts without being kept alive, per place ahead of it
    /// (Redisson's `threadWaitTime`): a waiter that stops asking (its process died) is
    /// dropped from the head of the queue this long after its last attempt. Every attempt
    /// keeps the place alive; the manager makes one at least every third of this.
    pub queue_timeout: Duration,
    /// This owner's last attempt was answered [`FairAttempt::Queued`] at the head of the
    /// queue. If the owner is missing from the queue now, it was dropped as the head while
    /// it still waited (its place ran out while it could not reach the backend, or a
    /// client with a longer `queue_timeout` shortened it): it goes back to the front, where
    /// it was. A waiter missing for another reason (the queue was lost with a Redis
    /// restart) queues again at the back.
    pub was_head: bool,
}

/// The outcome of one [`FairArgs`] attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FairAttempt {
    /// The owner now holds the lock.
    Acquired,
    /// The owner waits in the queue.
    Queued {
        /// When to try again unless told sooner
        /// ([`Notices::turn`](crate::backend::Notices::turn)): the holder's lease end for the
        /// queue's head (nothing is published when a lease runs out), or when the head's
        /// place runs out for the others.
        retry_in: Duration,
        /// The holder's remaining lease, if the lock is held and has one.
        holder_lease: Option<Duration>,
        /// The owner heads the queue (see [`FairArgs::was_head`]).
        at_head: bool,
    },
}
