//! A held lock: release, reentry, loss signal.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{AcquireArgs, Attempt, BoxFuture, ReleaseArgs, ReleaseReply};
use crate::count::{Count, Counted};
use crate::error::{BackendError, LockError, Released};
use crate::key::{LockKey, OwnerId};
use crate::loss::{Loss, LossSignal};
use crate::manager::ManagerInner;
use crate::orphans::release_unowned;
use crate::outage::answer_within;
use crate::request::InlineWatchdog;
use crate::settle::Settle;
use crate::wait::{Claim, Offer, Wake};
use crate::watchdog::{keep_alive, Keeper, RenewGate};

/// Pauses before re-sending a failed release (about 1.5 s in all).
const RELEASE_RETRIES: [Duration; 4] = [
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
    Duration::from_millis(800),
];

/// One owner's hold on a lock, shared by the guards of its reentrant acquisitions.
pub(crate) struct Hold {
    pub(crate) manager: Arc<ManagerInner>,
    pub(crate) key: LockKey,
    pub(crate) owner: OwnerId,
    pub(crate) lease: Duration,
    /// Whether a watchdog renews the lease (no explicit lease).
    pub(crate) renewed: bool,
    /// The owner's count in the backend; locked around every change so that each change
    /// is sent with the count it expects.
    pub(crate) count: Count,
    /// When the lease may end, and whether the lock was found lost.
    pub(crate) loss: Loss,
    /// Closed before the last release: no renewal after it. Also keeps the hold's place in
    /// the manager's renewal schedule.
    pub(crate) gate: RenewGate,
    /// This process's claim on the name, ended by the last release (`None` from the
    /// start for a hold that an in-process backend granted without one).
    pub(crate) claim: Mutex<Option<Claim>>,
}

/// How long this process's next waiter holds back after a release freed the lock while
/// waiters of other processes listen: about two round trips (the unlock message's way to
/// them and their acquisition's way back), so that their attempt lands first. Without it
/// the releasing process, whose waiter is woken as the release returns, would take the
/// lock back nearly every time (measured: a waiter of another process starved for 10 s
/// while one process made 500 acquisitions).
const COURTESY_MIN: Duration = Duration::from_millis(1);
const COURTESY_MAX: Duration = Duration::from_millis(50);

/// The next local waiter's wake-up after a last release answered `reply` (sent a round
/// trip `round_trip` long) when this process's own subscription `heard` the unlock.
fn wake_after(
    reply: &Result<ReleaseReply, BackendError>,
    heard: bool,
    round_trip: Duration,
) -> Wake {
    match reply {
        // The backend made the waiter the owner: it was told by its offer.
        Ok(ReleaseReply {
            released: Released::HandedOver,
            ..
        }) => Wake::No,
        Ok(ReleaseReply {
            released: Released::Unlocked,
            listeners: Some(listeners),
        }) if *listeners > u32::from(heard) => {
            Wake::After((round_trip * 2).clamp(COURTESY_MIN, COURTESY_MAX))
        }
        // Free, with nobody else listening; or not ours any more (expired, deleted, taken
        // by another), or unknown: the next waiter asks the backend at once and learns.
        _ => Wake::Now,
    }
}

impl Hold {
    /// Stops renewals: none is sent after this returns. Waits only for a renewal already
    /// under way (rare: one per lease/3), never for the watchdog task itself.
    async fn stop_watchdog(&self) {
        let slot = self.gate.close().await;
        self.manager.renewals.cancel(slot);
    }

    /// Drops one hold, with the count lock already taken. Runs to the end even if its
    /// caller goes away.
    fn release(mut count: Counted<Arc<Self>>) -> Settle<Result<Released, BackendError>> {
        let operation: BoxFuture<Result<Released, BackendError>> = Box::pin(async move {
            // The count is changed once, when the release is answered; until then the
            // hold is borrowed from the count lock that carries it.
            let mut remaining = *count;
            let this: &Hold = count.hold();
            let last = remaining <= 1;
            if last {
                this.stop_watchdog().await;
            }
            // The last hold may go straight to the next local waiter, in the release's own
            // step: the backend checks that this owner still holds the lock and makes the
            // waiter the owner, or hands nothing over.
            let offer = if last && this.manager.hands_over {
                let limit = this.manager.settings.hand_over_limit;
                this.manager.queues.offer_next(&this.key, limit)
            } else {
                None
            };
            let mut args = ReleaseArgs {
                key: this.key.clone(),
                owner: this.owner.clone(),
                lease: this.lease,
                expected: remaining,
                successor: offer.as_ref().map(Offer::successor),
            };
            // Our unlock message is expected back (and ignored): counted when this process
            // listens on the name, which also makes it one of the listeners the release
            // reports.
            let heard = last && this.manager.queues.expect_unlock(&this.key);
            // A release is safe to re-send (it carries the count it expects): ride out a
            // short failure (a failover, a reconnect) before giving the lock up to its
            // lease.
            let mut sent = Instant::now();
            let mut reply = this.manager.backend.release(args.clone()).await;
            let round_trip = sent.elapsed();
            if let Some(offer) = offer {
                // The waiter learns the outcome now; re-sends below only free the lock.
                // Anything but the backend's word that it made the waiter the owner (a
                // lock found gone, an error) drops the offer: the waiter tries itself.
                let successor = args.successor.take();
                let handed = matches!(
                    reply,
                    Ok(ReleaseReply {
                        released: Released::HandedOver,
                        ..
                    })
                );
                if handed && !offer.handed(sent) {
                    if let (Some(successor), Some(runtime)) = (successor, this.manager.runtime()) {
                        // The waiter left meanwhile: release the lock in its name.
                        runtime.spawn(release_unowned(
                            this.manager.clone(),
                            this.key.clone(),
                            successor.owner,
                            successor.lease,
                        ));
                    }
                }
            }
            let mut resent = false;
            for delay in RELEASE_RETRIES {
                if reply.is_ok() {
                    break;
                }
                tokio::time::sleep(delay).await;
                sent = Instant::now();
                resent = true;
                reply = this.manager.backend.release(args.clone()).await;
            }
            let wake = wake_after(&reply, heard, round_trip);
            let released = reply.map(|reply| reply.released);
            if heard {
                let unlocked = matches!(released, Ok(Released::Unlocked));
                this.manager.queues.unlock_settled(&this.key, unlocked);
            }
            this.settled(&mut remaining, &released, Some(sent), resent, wake);
            *count = remaining;
            released
        });
        Settle::new(operation, |_| None)
    }

    /// [`release`](Self::release) done at once, or `None` if that would need waiting.
    fn release_now(&self) -> Option<Result<Released, BackendError>> {
        if !self.manager.answers_at_once {
            return None;
        }
        let mut count = Counted::try_lock(self).ok()?;
        if *count <= 1 {
            let slot = self.gate.try_close()?;
            self.manager.renewals.cancel(slot);
        }
        let args = ReleaseArgs {
            key: self.key.clone(),
            owner: self.owner.clone(),
            lease: self.lease,
            expected: *count,
            successor: None,
        };
        // An error falls back to `release`, which re-sends it.
        let reply = self.manager.backend.release_now(&args)?.ok()?;
        let result = Ok(reply.released);
        // One process: nobody else to let go first.
        self.settled(&mut count, &result, None, false, Wake::Now);
        Some(result)
    }

    /// Counts a release that has been answered: at zero ends the claim, waking the next
    /// local waiter as `wake` says; moves or fires the loss signal; says what went wrong.
    /// `sent`: when it was sent (`None`: answered at once, just now).
    fn settled(
        &self,
        count: &mut u32,
        result: &Result<Released, BackendError>,
        sent: Option<Instant>,
        resent: bool,
        wake: Wake,
    ) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            let claim = self.claim.lock().unwrap_or_else(|e| e.into_inner()).take();
            match claim {
                Some(claim) => claim.end(wake),
                None => self.manager.queues.released_unclaimed(&self.key, wake),
            }
        }
        match result {
            Ok(Released::Unlocked | Released::HandedOver) => {}
            Ok(Released::StillHeld) => {
                // The release set the lease again.
                let sent = sent.unwrap_or_else(Instant::now);
                self.loss.extend(sent + self.lease);
            }
            Ok(Released::NotHeld) => {
                if *count > 0 {
                    self.loss.fire();
                }
                if resent {
                    tracing::warn!(key = %self.key, owner = %self.owner, "tower-lock: a release re-sent after an error found the lock gone (the failed send released it, or its lease had ended)");
                } else {
                    tracing::warn!(key = %self.key, owner = %self.owner, "tower-lock: released a lock that was no longer held (its lease had ended, or it was deleted)");
                }
            }
            Err(error) => {
                tracing::warn!(key = %self.key, %error, "tower-lock: release failed; the lock stays until its lease ends");
            }
        }
    }
}

/// A held lock. Release it with [`release`](Self::release); dropping it releases it in the
/// background on the runtime it was acquired on.
///
/// While the guard lives without an explicit lease, a watchdog renews the lease every
/// lease/3. If the lock is lost anyway, [`lost`](Self::lost) completes.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard {
    hold: Option<Arc<Hold>>,
}

impl LockGuard {
    pub(crate) fn new(hold: Arc<Hold>) -> Self {
        LockGuard { hold: Some(hold) }
    }

    /// The shareable view of this hold, for request extensions.
    pub(crate) fn held(&self) -> crate::HeldLock {
        crate::HeldLock::new(self.hold().clone())
    }

    fn hold(&self) -> &Arc<Hold> {
        self.hold.as_ref().expect("a live guard has its hold")
    }

    /// The lock's key (with the manager's prefix).
    pub fn key(&self) -> &LockKey {
        &self.hold().key
    }

    /// The owner id written in the lock. A lock handed over inside this process as it
    /// stands keeps the releaser's (see
    /// [`hand_over_limit`](crate::LockManagerBuilder::hand_over_limit)).
    pub fn owner(&self) -> &OwnerId {
        &self.hold().owner
    }

    /// The lease; renewed by a watchdog unless it was set explicitly.
    pub fn lease(&self) -> Duration {
        self.hold().lease
    }

    /// Whether a watchdog renews the lease.
    pub fn is_renewed(&self) -> bool {
        self.hold().renewed
    }

    /// A handle on the loss signal that outlives the guard (to hand to other tasks).
    pub fn loss(&self) -> LossSignal {
        self.hold().loss.signal()
    }

    /// Whether the lock is known or presumed lost, without waiting.
    pub fn is_lost(&self) -> bool {
        self.hold().loss.is_lost()
    }

    /// Completes when the lock is lost (a renewal found it gone, renewals failed for a
    /// whole lease, or an explicit lease ended).
    pub async fn lost(&self) {
        self.hold().loss.signal().lost().await
    }

    /// Acquires the same lock again for the same owner (count + 1). The returned guard
    /// releases its own hold; the lock is free once every guard has been released.
    /// Fails with [`LockError::Lost`] if the owner no longer holds the lock.
    pub async fn reenter(&self) -> Result<LockGuard, LockError> {
        reenter(self.hold().clone()).await
    }

    /// Releases this hold and reports what it found. The lock is free (and waiters are
    /// told) when this was the owner's last hold. If the future is dropped, the release
    /// still completes in the background.
    pub async fn release(self) -> Result<Released, BackendError> {
        let mut guard = match self.release_now() {
            Ok(result) => return result,
            Err(guard) => guard,
        };
        // Wait for the count lock while the guard still owns its hold: if this future is
        // dropped meanwhile, the guard's drop releases the lock.
        let count = Counted::lock(guard.hold().clone()).await;
        // The count lock now stands for the hold; the guard gives it up without a drop.
        guard.hold = None;
        Hold::release(count).await
    }

    /// Releases, but returns early (`None`) once the backend says it cannot be reached: the
    /// release, with its re-sends, then goes on in the background. For the HTTP layer,
    /// whose response must not wait for Redis to come back.
    pub(crate) async fn release_promptly(self) -> Option<Result<Released, BackendError>> {
        let manager = self.hold().manager.clone();
        answer_within(self.release(), None, &manager).await.ok()
    }

    /// Releases without a future when that needs no waiting: the count lock is free, no
    /// renewal is under way and the backend answers at once. `Err(self)`: not so; use
    /// [`release`](Self::release).
    pub(crate) fn release_now(mut self) -> Result<Result<Released, BackendError>, Self> {
        let hold = self.hold.take().expect("a live guard has its hold");
        match hold.release_now() {
            Some(result) => Ok(result),
            None => {
                self.hold = Some(hold);
                Err(self)
            }
        }
    }

    /// Starts the watchdog that [`LockRequest::acquire_parts`] handed back unstarted, for
    /// the caller to poll.
    ///
    /// [`LockRequest::acquire_parts`]: crate::LockRequest
    pub(crate) fn keep_alive(&self, keeper: Keeper) -> InlineWatchdog {
        Box::pin(keep_alive(self.hold().clone(), keeper))
    }
}

/// Acquires `hold` once more for its owner. Shared with the HTTP layer's lock handle.
pub(crate) async fn reenter(hold: Arc<Hold>) -> Result<LockGuard, LockError> {
    let lost = || LockError::Lost {
        key: hold.key.clone(),
    };
    let count = Counted::lock(hold.clone()).await;
    if *count == 0 || (hold.loss.is_lost() && hold.renewed) {
        return Err(lost());
    }
    let expected = *count;
    // The count lock travels with the attempt: if this future is dropped, the background
    // undo still holds it, so no other change is sent with a stale count meanwhile.
    let count = Arc::new(Mutex::new(Some(count)));
    let undo_count = count.clone();
    let args = AcquireArgs {
        key: hold.key.clone(),
        owner: hold.owner.clone(),
        lease: hold.lease,
        expected,
    };
    let sent = Instant::now();
    let attempt = Settle::new(hold.manager.backend.acquire(args), move |result| {
        let count = undo_count
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        match result {
            Ok(Attempt::Acquired) => {
                let mut count = count;
                *count += 1;
                Some(Box::pin(async move {
                    let _ = Hold::release(count).await;
                }) as BoxFuture<()>)
            }
            _ => None,
        }
    });
    // Not waiting on a lost connection: dropped, the attempt finishes in the background,
    // where its undo keeps the count lock until it is over.
    let result = match answer_within(attempt, None, &hold.manager).await {
        Ok(result) => result,
        Err(_) => {
            return Err(LockError::Unavailable(BackendError::new(
                "the lock backend is unreachable (reconnecting)",
            )))
        }
    };
    let mut count = count
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .expect("the count lock is only taken by the undo of a dropped attempt");
    match result? {
        Attempt::Acquired => {
            *count += 1;
            hold.loss.extend(sent + hold.lease);
            drop(count);
            Ok(LockGuard::new(hold))
        }
        Attempt::Busy(_) | Attempt::Lost => {
            hold.loss.fire();
            Err(lost())
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(hold) = self.hold.take() else {
            return;
        };
        let Some(runtime) = hold.manager.runtime() else {
            // Not reached: a lock is only granted once the manager knows a runtime.
            tracing::warn!(key = %hold.key, "tower-lock: a guard was dropped outside a Tokio runtime; the lock ends with its lease");
            return;
        };
        // Take our place in the count lock now, so that a release that starts after this
        // drop (another guard of the same hold) is ordered after ours.
        match Counted::try_lock(hold) {
            Ok(count) => {
                runtime.spawn(Hold::release(count));
            }
            Err(hold) => {
                runtime.spawn(async move {
                    let count = Counted::lock(hold).await;
                    let _ = Hold::release(count).await;
                });
            }
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.hold {
            Some(hold) => f
                .debug_struct("LockGuard")
                .field("key", &hold.key)
                .field("owner", &hold.owner)
                .field("lease", &hold.lease)
                .field("renewed", &hold.renewed)
                .finish(),
            None => f.write_str("LockGuard(released)"),
        }
    }
}
