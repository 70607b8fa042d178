//! A last release offering the lock straight to the head of the local queue.
//!
//! On a backend that [hands over], a release that finds a waiter of this process at the
//! head of the name's queue asks the backend to give it the lock in the release's own step:
//! the backend checks that the releaser still holds the lock and makes the waiter the
//! owner atomically (on Redis, inside the release's script run), so the waiter sends no
//! acquisition of its own (one round trip per hand-over instead of two). The waiter does
//! not try while the offer stands; the release tells it the outcome. The lock is the
//! waiter's only when the backend says so ([`Offer::handed`]): a release that finds the
//! lock gone, or that gets no answer, hands nothing over, and the waiter tries itself.
//!
//! [hands over]: crate::backend::Capabilities::hands_over

use std::sync::Arc;

use tokio::time::Instant;

use super::{WaitQueues, Waiter};
use crate::key::LockKey;
use crate::key::OwnerId;
use crate::kind::LockKind;

/// Where a hand-over to a waiter stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum OfferState {
    /// Waiting; a release may offer it the lock.
    Idle,
    /// Its own attempt is on its way: no offer now.
    Trying,
    /// A release is on its way that may hand it the lock.
    Offered,
    /// The backend made it the owner; its lease runs from this instant (when the release
    /// was sent).
    Handed(Instant),
    /// The release that offered it the lock got no answer: the hand-over may have landed.
    /// The waiter tries itself (an attempt finds a landed hand-over in its name and reports
    /// it acquired); if it leaves first, the lock is released in its name.
    Unknown,
    /// It left the queue (gave up, or was dropped).
    Gone,
}

/// An offer of the lock to a waiter, made by a last release before it is sent. Settle it
/// with [`handed`](Self::handed); dropping it otherwise tells the waiter to try itself.
pub(crate) struct Offer {
    waiter: Arc<Waiter>,
    settled: bool,
}

impl Offer {
    pub(super) fn new(waiter: Arc<Waiter>) -> Self {
        Offer {
            waiter,
            settled: false,
        }
    }

    /// Who the release hands the lock to, and the lease it asks for.
    pub(crate) fn successor(&self) -> (OwnerId, std::time::Duration) {
        (self.waiter.owner.clone(), self.waiter.lease)
    }

    /// The backend answered that the release, sent at `sent`, made the waiter the owner.
    /// `false`: the waiter left meanwhile, so the lock is held in its name and must be
    /// released for it.
    pub(crate) fn handed(mut self, sent: Instant) -> bool {
        self.settled = true;
        let mut offer = self.waiter.offer();
        if *offer != OfferState::Offered {
            return false;
        }
        *offer = OfferState::Handed(sent);
        drop(offer);
        self.waiter.wake.notify_one();
        true
    }
}

impl Offer {
    /// The release, sent with this offer, got no answer (an error): the waiter may own the
    /// lock. It tries itself. `false`: the waiter left meanwhile, so the lock may be held
    /// in its name and must be released for it.
    pub(crate) fn unknown(mut self) -> bool {
        self.settled = true;
        let mut offer = self.waiter.offer();
        if *offer != OfferState::Offered {
            return false;
        }
        *offer = OfferState::Unknown;
        drop(offer);
        self.waiter.signal(true);
        true
    }
}

impl Drop for Offer {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        // Not handed over (the lock was freed, not held, or the outcome is unknown): the
        // waiter tries itself. An attempt after a hand-over that did land finds the lock
        // in its name and reports it acquired (an acquisition applies at most once).
        let mut offer = self.waiter.offer();
        if *offer == OfferState::Offered {
            *offer = OfferState::Idle;
            drop(offer);
            self.waiter.signal(true);
        }
    }
}

/// What a last release does with the lock (see [`WaitQueues::next_holder`]).
pub(crate) enum Handing {
    /// Hands it to the local waiter this offer names, in the release's own step.
    Over(Offer),
    /// Frees it; `announce`: the length of the run of holds of this process it ends, for
    /// other processes to know (see `turns`).
    Free { announce: Option<u32> },
}

impl WaitQueues {
    /// A last release of `key` is about to be sent: what it does with the lock. It offers
    /// the lock to the head of the queue, so that the release asks the backend to hand it
    /// over in the same step (a successor in its release); or it frees the lock, announcing
    /// the run of hand-overs it ends. No offer when there is no head free to take it (none,
    /// or one whose own attempt is on its way), and none after `limit` hand-overs in a row
    /// or, while other processes take turns, after as many holds as they had (see
    /// `turns`): that release frees the lock, so that waiters of other processes get
    /// their chance.
    pub(crate) fn next_holder(&self, key: &LockKey, kind: LockKind, limit: u32) -> Handing {
        // Most releases have nobody waiting near: no mutex for them. Not offering is
        // always safe (the release then frees the lock and wakes whoever queued).
        if limit == 0 || !self.may_be_queued(key) {
            return Handing::Free { announce: None };
        }
        let mut state = self.lock(key);
        let Some(queue) = state.queues.get_mut(key) else {
            return Handing::Free { announce: None };
        };
        // Only to a waiter for a kind that is handed over, and the releaser's (a plain lock
        // taken alone and without a token; as many permits of the same semaphore).
        let head = queue
            .waiters
            .front()
            .filter(|head| head.takes_hand_over() && head.kind == kind);
        let Some(head) = head else {
            return Handing::Free {
                announce: queue.turns.run_ends(),
            };
        };
        let mut offer = head.offer();
        if !queue.turns.may_hand_over(limit) || *offer != OfferState::Idle {
            drop(offer);
            return Handing::Free {
                announce: queue.turns.run_ends(),
            };
        }
        *offer = OfferState::Offered;
        drop(offer);
        queue.turns.handed();
        Handing::Over(Offer::new(head.clone()))
    }
}
