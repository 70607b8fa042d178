//! A last release offering the lock straight to the head of the local queue.
//!
//! On a backend that [hands over], a release that finds a waiter of this process at the
//! head of the name's queue gives it the lock in the same step: the waiter does not send
//! an acquisition of its own after the release (one round trip per hand-over instead of
//! two). The waiter does not try while the offer stands; the release tells it the outcome.
//!
//! When the releasing hold's lease still has at least half of it to run (as when its
//! watchdog renews it), and both renew their leases, the waiter instead takes the hold over
//! as it stands in the backend, under the same owner id ([`Offer::adopt`]): nothing is
//! sent, so the lock idles for no round trip between the two holders. The lease runs on
//! from the releaser's last acquisition or renewal, and the new holder's watchdog renews it
//! from there. To every other process the lock simply stays held.
//!
//! [hands over]: crate::backend::Backend::hands_over

use std::sync::Arc;

use tokio::time::Instant;

use super::Waiter;
use crate::backend::Successor;
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
    /// The lock is its own; its lease runs from this instant. `Some`: it took a hold of
    /// this process over as it stands, held under that owner id (else under its own).
    Handed(Instant, Option<OwnerId>),
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

    /// Who the release hands the lock to.
    pub(crate) fn successor(&self) -> Successor {
        Successor {
            owner: self.waiter.owner.clone(),
            lease: self.waiter.lease,
        }
    }

    /// Whether the waiter may take over a hold with `lease`, renewed by a watchdog, as it
    /// stands (see [`adopt`](Self::adopt)).
    pub(crate) fn can_adopt(&self, lease: std::time::Duration) -> bool {
        self.waiter.renewed && self.waiter.lease == lease
    }

    /// The waiter takes over the releaser's hold as it stands: held under `owner`, its lease
    /// running from `lease_from`. `false`: the waiter left meanwhile; nothing was handed,
    /// and the releaser releases as usual.
    pub(crate) fn adopt(self, owner: OwnerId, lease_from: Instant) -> bool {
        self.hand(lease_from, Some(owner))
    }

    /// The release, sent at `sent`, handed the lock over. `false`: the waiter left
    /// meanwhile, so the lock is held in its name and must be released for it.
    pub(crate) fn handed(self, sent: Instant) -> bool {
        self.hand(sent, None)
    }

    /// Tells the waiter the lock is its own (see [`OfferState::Handed`]), unless it left.
    fn hand(mut self, lease_from: Instant, adopted: Option<OwnerId>) -> bool {
        self.settled = true;
        let mut offer = self.waiter.offer();
        if *offer != OfferState::Offered {
            return false;
        }
        *offer = OfferState::Handed(lease_from, adopted);
        drop(offer);
        self.waiter.wake.notify_one();
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
