//! What a backend can do beyond storing locks, as the manager asks it.

use std::time::Duration;

#[cfg(doc)]
use super::{Backend, Notices, ReleaseArgs};
#[cfg(doc)]
use crate::error::Released;

/// What a backend can do beyond storing locks (see [`Backend::capabilities`]).
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// A last release can hand the lock straight to a waiter of this process
    /// ([`ReleaseArgs::successor`], answered with [`Released::HandedOver`]) in the same
    /// atomic step, so that the next holder needs no acquisition of its own. A backend that
    /// says so must check, in that step, that the releaser still holds the lock and make
    /// the successor the owner, and answer [`Released::HandedOver`] only when it did: the
    /// successor is then granted the lock on that answer alone. It must apply a hand-over at
    /// most once, and report [`Released::HandedOver`] again for a re-sent one that already
    /// took effect.
    pub hands_over: bool,
    /// One [`acquire`](Backend::acquire) fails by itself within this time (a command time
    /// limit): a waiting acquisition whose wait is longer needs no timer of its own around
    /// its first attempt.
    pub attempt_time_limit: Option<Duration>,
    /// Unlocks of other processes are reported through subscriptions that the backend
    /// confirms ([`Notices::subscribed`]): the first waiter of a name retries once its
    /// subscription is in place. `false`: waiters are ready at once.
    pub subscribes: bool,
}

impl Capabilities {
    /// No hand-over, no time limit, no subscriptions.
    pub fn new() -> Self {
        Self::default()
    }

    /// With [`hands_over`](Self::hands_over) set as given.
    pub fn hands_over(mut self, hands_over: bool) -> Self {
        self.hands_over = hands_over;
        self
    }

    /// With [`attempt_time_limit`](Self::attempt_time_limit) set as given.
    pub fn attempt_time_limit(mut self, limit: Option<Duration>) -> Self {
        self.attempt_time_limit = limit;
        self
    }

    /// With [`subscribes`](Self::subscribes) set as given.
    pub fn subscribes(mut self, subscribes: bool) -> Self {
        self.subscribes = subscribes;
        self
    }
}
