//! Releasing a hold. The last release may hand the lock to the next local waiter in the
//! backend's same atomic step; otherwise it frees the lock and lets the next waiter try
//! (after waiters of other processes, when some listen).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{Instrument, Span};

use crate::backend::{BoxFuture, LockRecord, ReleaseReply, Successor};
use crate::engine::background::drop_safe::DropSafe;
use crate::engine::background::unowned::release_unowned;
use crate::engine::hold::count_lock::Counted;
use crate::engine::hold::Hold;
use crate::error::{BackendError, Released};
use crate::telemetry::{self, throttled, TARGET};
use crate::wait::{Handing, Offer, Wake, COURTESY_MAX};

/// Pauses before re-sending a failed release (about 1.5 s in all).
const RELEASE_RETRIES: [Duration; 4] = [
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
    Duration::from_millis(800),
];

/// How long this process's next waiter holds back after a release freed the lock while
/// waiters of other processes listen: about two round trips (the unlock notice's way to
/// them and their acquisition's way back), so that their attempt lands first; longer when
/// they turned out to need it (see `wait::turns`). Without it the releasing process, whose
/// waiter is woken as the release returns, would take the lock back nearly every time
/// (measured: a waiter of another process starved for 13 s while one process made 634
/// acquisitions).
const COURTESY_MIN: Duration = Duration::from_millis(1);

/// The next local waiter's wake-up after a last release answered `reply`, sent a round
/// trip `round_trip` long.
fn wake_after(reply: &Result<ReleaseReply, BackendError>, round_trip: Duration) -> Wake {
    match reply {
        // The backend made the waiter the owner: it was told by its offer.
        Ok(ReleaseReply {
            released: Released::HandedOver,
            ..
        }) => Wake::No,
        Ok(ReleaseReply {
            released: Released::Unlocked,
            other_listeners: Some(others),
        }) if *others > 0 => Wake::After((round_trip * 2).clamp(COURTESY_MIN, COURTESY_MAX)),
        // Free, with nobody else listening: their turns are over.
        Ok(ReleaseReply {
            released: Released::Unlocked,
            other_listeners: Some(0),
        }) => Wake::Alone,
        // Not ours any more (expired, deleted, taken by another), or unknown: the next
        // waiter asks the backend at once and learns.
        _ => Wake::Now,
    }
}

impl Hold {
    /// Stops renewals: none is sent after this returns. Waits only for a renewal already
    /// under way (rare: one per lease/3), never for the watchdog task itself.
    async fn stop_watchdog(&self) {
        let slot = self.gate().close().await;
        self.manager().renewals().cancel(slot);
    }

    /// Drops one hold, with the count lock already taken. Runs to the end even if its
    /// caller goes away.
    pub(in crate::engine) fn release(
        count: Counted<Arc<Self>>,
    ) -> DropSafe<Result<Released, BackendError>> {
        Self::release_with(count, None)
    }

    /// [`release`](Self::release), the last hold storing `record` with the lock in the same
    /// step (see [`ReleaseArgs::record`](crate::backend::ReleaseArgs::record)): never handed
    /// over, so that the waiters find the record.
    pub(in crate::engine) fn release_with(
        mut count: Counted<Arc<Self>>,
        record: Option<LockRecord>,
    ) -> DropSafe<Result<Released, BackendError>> {
        let span = telemetry::release_span(&count.hold().span());
        let recorded = span.clone();
        let operation = async move {
            // The count is changed once, when the release is answered; until then the
            // hold is borrowed from the count lock that carries it.
            let mut remaining = *count;
            let this: &Hold = count.hold();
            let last = remaining <= 1;
            if last {
                this.stop_watchdog().await;
            }
            let manager = this.manager();
            // The last hold may go straight to the next local waiter, in the release's own
            // step: the backend checks that this owner still holds the lock and makes the
            // waiter the owner, or hands nothing over.
            // Only a plain lock is handed over; freeing it, a release announces the run of
            // hand-overs it ends, for other processes taking turns.
            let record = record.filter(|_| last);
            let handing = if last
                && record.is_none()
                && manager.hands_over()
                && this.kind().rules().hands_over
            {
                let limit = manager.settings().hand_over_limit;
                manager.queues().next_holder(this.key(), this.kind(), limit)
            } else {
                Handing::Free { announce: None }
            };
            let (offer, announce) = match handing {
                Handing::Over(offer) => (Some(offer), None),
                Handing::Free { announce } => (None, announce),
            };
            let successor = offer.as_ref().map(|offer| {
                let (owner, lease) = offer.successor();
                Successor { owner, lease }
            });
            let mut args = this.release_args(remaining, successor, announce, record);
            // A release is safe to re-send (it carries the count it expects): ride out a
            // short failure (a failover, a reconnect) before giving the lock up to its
            // lease.
            let mut sent = Instant::now();
            let mut reply = manager.store().release(args.clone()).await;
            let round_trip = sent.elapsed();
            if let Some(offer) = offer {
                // The waiter learns the outcome now; re-sends below only free the lock.
                // Without the backend's word that it made the waiter the owner, the waiter
                // tries itself (after an error, knowing that it may own the lock).
                hand_over(this, offer, &reply, args.successor.take(), sent);
            }
            let mut resent = false;
            for delay in RELEASE_RETRIES {
                if reply.is_ok() {
                    break;
                }
                tokio::time::sleep(delay).await;
                sent = Instant::now();
                resent = true;
                reply = manager.store().release(args.clone()).await;
            }
            let wake = wake_after(&reply, round_trip);
            let released = reply.map(|reply| reply.released);
            this.settled(
                &mut remaining,
                &released,
                Some(sent),
                resent,
                wake,
                &recorded,
            );
            *count = remaining;
            released
        };
        let operation: BoxFuture<Result<Released, BackendError>> =
            Box::pin(operation.instrument(span));
        DropSafe::new(operation, |_| None)
    }

    /// [`release`](Self::release) done at once, or `None` if that would need waiting.
    pub(in crate::engine) fn release_now(
        &self,
        record: Option<&LockRecord>,
    ) -> Option<Result<Released, BackendError>> {
        let manager = self.manager();
        if !manager.store().answers_at_once() {
            return None;
        }
        let mut count = Counted::try_lock(self).ok()?;
        if *count <= 1 {
            let slot = self.gate().try_close()?;
            manager.renewals().cancel(slot);
        }
        let record = record.filter(|_| *count <= 1).cloned();
        let args = self.release_args(*count, None, None, record);
        // An error falls back to `release`, which re-sends it.
        let reply = manager.store().release_now(&args)?.ok()?;
        let result = Ok(reply.released);
        // One process: nobody else to let go first.
        let span = telemetry::release_span(&self.span());
        self.settled(&mut count, &result, None, false, Wake::Now, &span);
        Some(result)
    }

    /// Counts a release that has been answered: at zero ends the claim, waking the next
    /// local waiter as `wake` says; moves or fires the loss signal; says what went wrong,
    /// in the release's `span` too. `sent`: when it was sent (`None`: answered at once,
    /// just now).
    fn settled(
        &self,
        count: &mut u32,
        result: &Result<Released, BackendError>,
        sent: Option<Instant>,
        resent: bool,
        wake: Wake,
        span: &Span,
    ) {
        *count = count.saturating_sub(1);
        let last = *count == 0;
        if last {
            match self.take_claim() {
                Some(claim) => claim.end(wake),
                None => self.manager().queues().released_unclaimed(self.key(), wake),
            }
        }
        telemetry::released(span, self.kind(), result, last, || self.held_for());
        if last {
            self.end_span();
        }
        let (key, owner) = (self.key(), self.owner());
        match result {
            Ok(Released::Unlocked | Released::HandedOver) => {}
            Ok(Released::StillHeld) => {
                // The release set the lease again.
                let sent = sent.unwrap_or_else(Instant::now);
                self.loss().extend(sent + self.lease());
            }
            Ok(Released::NotHeld) => {
                if *count > 0 {
                    self.mark_lost();
                }
                if resent {
                    tracing::warn!(target: TARGET, %key, %owner, "tower-lock: a release re-sent after an error found the lock gone (the failed send released it, or its lease had ended)");
                } else {
                    tracing::warn!(target: TARGET, %key, %owner, "tower-lock: released a lock that was no longer held (its lease had ended, or it was deleted)");
                }
            }
            Err(error) => {
                throttled!(warn, %key, %error, "tower-lock: release failed; the lock stays until its lease ends");
            }
        }
    }
}

/// Tells the waiter offered the lock how its hand-over went: the lock is its own only on
/// the backend's word. With no answer (an error) the hand-over may have landed: the waiter
/// tries itself and, if it leaves first, releases it in its own name. A waiter that left
/// meanwhile has the lock released in its name.
fn hand_over(
    this: &Hold,
    offer: Offer,
    reply: &Result<ReleaseReply, BackendError>,
    successor: Option<Successor>,
    sent: Instant,
) {
    let waiter_stayed = match reply {
        Ok(ReleaseReply {
            released: Released::HandedOver,
            ..
        }) => offer.handed(sent),
        Err(_) => offer.unknown(),
        // Freed, or not ours: nothing was handed over; the dropped offer lets it try.
        Ok(_) => return,
    };
    if waiter_stayed {
        return;
    }
    let manager = this.manager();
    if let (Some(successor), Some(runtime)) = (successor, manager.runtime()) {
        runtime.spawn(release_unowned(
            manager.clone(),
            this.key().clone(),
            this.kind(),
            successor.owner,
            successor.lease,
        ));
    }
}
