//! What a backend answers: an acquisition's [`Attempt`], a release's [`ReleaseReply`].

use std::time::Duration;

use bytes::Bytes;

use crate::error::Released;

#[cfg(doc)]
use super::{AcquireArgs, Notices, ReleaseArgs};
#[cfg(doc)]
use crate::kind::LockKind;

/// The outcome of one acquisition attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Attempt {
    /// The owner now holds the lock (its count went from `expected` to `expected + 1`).
    Acquired,
    /// Another owner holds it; its lease runs for this long (`None`: no expiry set).
    Busy(Option<Duration>),
    /// A reentrant attempt (`expected > 0`) found that the owner no longer holds the lock.
    Lost,
    /// As [`Acquired`](Self::Acquired), for a fenced lock ([`LockKind::Fenced`]): the
    /// fencing token this acquisition got, greater than every token given before for the
    /// name. A backend answers it to a fenced acquisition only, and never
    /// [`Acquired`](Self::Acquired) to one. A re-sent acquisition that already counted
    /// answers the counter as it is then.
    Fenced(u64),
    /// For an acquisition that asked for it ([`AcquireArgs::unless_recorded`]): the lock
    /// has a record (see [`ReleaseArgs::record`]), so nothing was taken; this is the record.
    Recorded(Bytes),
    /// A new reader ([`LockKind::Read`]) was held back, whoever holds the lock: a writer
    /// waits for it and marked its wait (see [`AcquireArgs::waits`]). Nothing was taken. The
    /// marks run out within this long unless their writers renew them; a writer that gets
    /// in or stops waiting takes its mark back and tells the waiters as a write release
    /// does.
    HeldBack(Duration),
    /// For an acquisition that named its work ([`AcquireArgs::work`]): the lock is held
    /// for other work, so this acquisition could never get it for its own and does not
    /// wait. Nothing was taken.
    HeldForOtherWork,
    /// A waiting fair acquisition ([`LockKind::Fair`], [`AcquireArgs::waits`]) is not
    /// first in the backend's queue, or the lock is still held: the owner keeps its place
    /// (it was queued, or its place kept alive).
    Queued {
        /// When to try again unless told sooner ([`Notices::turn`]): the holder's lease end
        /// for the queue's head (nothing is published when a lease runs out), or when the
        /// head's place runs out for the others.
        retry_in: Duration,
        /// The holder's remaining lease, if the lock is held and has one.
        holder_lease: Option<Duration>,
        /// The owner heads the queue (see [`AcquireArgs::was_head`]).
        at_head: bool,
    },
}

impl Attempt {
    /// Whether the owner now holds the lock.
    pub fn is_acquired(&self) -> bool {
        matches!(self, Attempt::Acquired | Attempt::Fenced(_))
    }

    /// A fenced acquisition's token.
    pub fn fencing_token(&self) -> Option<u64> {
        match self {
            Attempt::Fenced(token) => Some(*token),
            _ => None,
        }
    }
}

/// What a release did, as the backend reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReleaseReply {
    /// What the release found.
    pub released: Released,
    /// For [`Released::Unlocked`]: how many subscribers of *other* processes the unlock
    /// notice reached (Redis: what `PUBLISH` answers, less this process's own
    /// subscription), if the backend can tell. When some did, this process's next waiter
    /// lets them have the first chance at the lock.
    pub other_listeners: Option<u32>,
}

impl ReleaseReply {
    /// A reply with no listener count.
    pub fn new(released: Released) -> Self {
        ReleaseReply {
            released,
            other_listeners: None,
        }
    }

    /// With the count of [other listeners](Self::other_listeners) the notice reached.
    pub fn other_listeners(mut self, listeners: u32) -> Self {
        self.other_listeners = Some(listeners);
        self
    }
}
