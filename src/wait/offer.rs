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

use super::Waiter;
use crate::key::OwnerId;

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
