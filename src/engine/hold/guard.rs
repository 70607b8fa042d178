//! A held lock's guard: release and the loss signal (reentry: `reentry.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::LockRecord;
use crate::engine::hold::count_lock::Counted;
use crate::engine::hold::loss::LossSignal;
use crate::engine::hold::Hold;
use crate::error::{BackendError, Released};
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;
use crate::telemetry;

/// A held lock. Release it with [`release`](Self::release); dropping it releases it: at
/// once on the in-memory backend (unless a renewal is under way), else in the background on
/// the runtime it was acquired on.
///
/// While the guard lives without an explicit lease, a watchdog renews the lease every
/// lease/3. If the lock is lost anyway, [`lost`](Self::lost) completes.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard {
    hold: Option<Arc<Hold>>,
    /// A fenced lock's token for this acquisition.
    token: Option<u64>,
}

impl LockGuard {
    pub(crate) fn new(hold: Arc<Hold>, token: Option<u64>) -> Self {
        LockGuard {
            hold: Some(hold),
            token,
        }
    }

    pub(in crate::engine) fn hold(&self) -> &Arc<Hold> {
        self.hold.as_ref().expect("a live guard has its hold")
    }

    /// The lock's key (with the manager's prefix).
    pub fn key(&self) -> &LockKey {
        self.hold().key()
    }

    /// The kind of lock held.
    pub fn kind(&self) -> LockKind {
        self.hold().kind()
    }

    /// The owner id written in the lock: this acquisition's own (reentries share it).
    pub fn owner(&self) -> &OwnerId {
        self.hold().owner()
    }

    /// The lease; renewed by a watchdog unless it is a
    /// [fixed lease](crate::lock::LockRequest::fixed_lease).
    pub fn lease(&self) -> Duration {
        self.hold().lease()
    }

    /// Whether a watchdog renews the lease.
    pub fn is_renewed(&self) -> bool {
        self.hold().is_renewed()
    }

    /// The fencing token of this acquisition of a fenced lock
    /// ([`LockManager::fenced_lock`](crate::LockManager::fenced_lock)): a number greater
    /// than every token given before for this name, by any process (Redisson's
    /// `RFencedLock` included). Send it with every write to the protected resource and have
    /// the resource refuse a token lower than the last it accepted: a holder that lost the
    /// lock without knowing it (a pause longer than its lease) then cannot overwrite the
    /// next holder's work. `None` for the other kinds.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let locks = tower_lock::LockManager::memory();
    /// let first = locks.fenced_lock("invoice:7").acquire().await.unwrap();
    /// let first_token = first.fencing_token().unwrap();
    /// first.release().await.unwrap();
    /// let second = locks.fenced_lock("invoice:7").acquire().await.unwrap();
    /// assert!(second.fencing_token().unwrap() > first_token);
    /// assert_eq!(locks.lock("invoice:8").acquire().await.unwrap().fencing_token(), None);
    /// # }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    /// A handle on the loss signal that outlives the guard (to hand to other tasks).
    pub fn loss(&self) -> LossSignal {
        self.hold().loss().signal()
    }

    /// Whether the lock is known or presumed lost, without waiting.
    pub fn is_lost(&self) -> bool {
        self.hold().loss().is_lost()
    }

    /// Completes when the lock is lost: a renewal found it gone, or no renewal succeeded
    /// (or a fixed lease ran) until a [`LossMargin`](crate::lock::LossMargin) before the lease
    /// could end.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn lost(&self) {
        self.hold().loss().signal().lost().await
    }

    /// Releases this hold and reports what it found. The lock is free (and waiters are
    /// told) when this was the owner's last hold.
    ///
    /// # Errors
    /// [`BackendError`] when the backend could not be reached or failed (after re-sending
    /// the release for about 1.5 s): the lock then ends with its lease.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped, the release still completes in the
    /// background.
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

    /// Releases the lock and leaves `record` with its name for `retention`, in the same
    /// atomic step and only if this owner still holds it: a holder that lost the lock (its
    /// lease ran out, it was deleted) stores nothing over what a newer holder may store.
    /// The lock is freed (never handed over to a waiter of this process) and, until the
    /// record expires, acquisitions made
    /// [`unless_recorded`](crate::lock::LockRequest::unless_recorded) get the record instead of
    /// the lock. `Released::Unlocked`: stored; `NotHeld`: the lock was not held any more,
    /// nothing stored. With other holds of this owner left (a reentry), it is a plain
    /// release and stores nothing.
    ///
    /// # Errors
    /// As [`release`](Self::release); a backend without records (RedLock) answers an error
    /// and the lock ends with its lease.
    ///
    /// # Cancel safety
    /// As [`release`](Self::release): it completes in the background if dropped.
    pub async fn release_recording(
        self,
        record: bytes::Bytes,
        retention: Duration,
    ) -> Result<Released, BackendError> {
        self.release_with_record(LockRecord::new(record, retention))
            .await
    }

    /// As [`release_recording`](Self::release_recording), with the record's options: one
    /// stored [only if awaited](LockRecord::only_if_awaited) is left only when an
    /// acquisition unless recorded found the lock held by this hold (someone waits for it);
    /// otherwise the lock is only freed, and still `Released::Unlocked`.
    ///
    /// # Errors
    /// As [`release_recording`](Self::release_recording).
    ///
    /// # Cancel safety
    /// As [`release`](Self::release): it completes in the background if dropped.
    pub async fn release_with_record(
        self,
        mut record: LockRecord,
    ) -> Result<Released, BackendError> {
        let mut guard = self;
        // Waiters of this manager queue behind its holder without asking the backend (it
        // cannot know of them): with any queued, the record is awaited.
        let hold = guard.hold();
        if record.only_if_awaited && hold.manager().queues().queued(hold.key()) > 0 {
            record.only_if_awaited = false;
        }
        // In-process and nothing in the way: at once, without a future.
        if let Some(result) = guard.hold().release_now(Some(&record)) {
            guard.hold = None;
            return result;
        }
        let count = Counted::lock(guard.hold().clone()).await;
        guard.hold = None;
        Hold::release_with(count, Some(record)).await
    }

    /// Releases without a future when that needs no waiting: the count lock is free, no
    /// renewal is under way and the backend answers at once. `Err(self)`: not so; use
    /// [`release`](Self::release).
    pub(crate) fn release_now(mut self) -> Result<Result<Released, BackendError>, Self> {
        let hold = self.hold.take().expect("a live guard has its hold");
        match hold.release_now(None) {
            Some(result) => Ok(result),
            None => {
                self.hold = Some(hold);
                Err(self)
            }
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(hold) = self.hold.take() else {
            return;
        };
        let Some(runtime) = hold.manager().runtime() else {
            // Not reached: a lock is only granted once the manager knows a runtime.
            tracing::warn!(target: telemetry::TARGET, key = %hold.key(), "tower-lock: a guard was dropped outside a Tokio runtime; the lock ends with its lease");
            return;
        };
        // In-process and nothing in the way: at once, without a task.
        if hold.release_now(None).is_some() {
            return;
        }
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
                .field("key", hold.key())
                .field("kind", &hold.kind())
                .field("owner", hold.owner())
                .field("lease", &hold.lease())
                .field("renewed", &hold.is_renewed())
                .field("fencing_token", &self.token)
                .finish(),
            None => f.write_str("LockGuard(released)"),
        }
    }
}

/// What the HTTP layers drive themselves: the hold's label and view, a release that does
/// not wait out an outage, and the watchdog polled inside the response future.
#[cfg(feature = "axum")]
impl LockGuard {
    /// Records the request the hold was taken for (see `LockManager::local_holds`).
    pub(crate) fn label(&self, label: crate::engine::RequestLabel) {
        self.hold().set_label(label);
    }

    /// A view of the hold, to share with what runs under the lock.
    pub(crate) fn view(&self) -> crate::engine::HoldView {
        crate::engine::HoldView::new(self.hold().clone())
    }

    /// Releases, but returns early (`None`) once the backend says it cannot be reached: the
    /// release, with its re-sends, then goes on in the background. For the HTTP layer,
    /// whose response must not wait for Redis to come back.
    pub(crate) async fn release_promptly(self) -> Option<Result<Released, BackendError>> {
        let manager = self.hold().manager().clone();
        crate::engine::background::outage::answer_within(self.release(), None, &manager)
            .await
            .ok()
    }

    /// Starts the watchdog that `LockRequest::acquire_parts` handed back unstarted, for
    /// the caller to poll.
    pub(crate) fn keep_alive(
        &self,
        keeper: crate::engine::PendingWatchdog,
    ) -> crate::engine::InlineWatchdog {
        Box::pin(crate::engine::background::renewal::keep_alive(
            self.hold().clone(),
            keeper,
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::LockManager;

    /// A guard dropped on an in-process backend frees its lock before the drop returns: no
    /// task of its own (one per request for every extractor, which drops its guard), and
    /// the next acquisition finds the lock free at once. With a renewal under way, the drop
    /// leaves the release to the background, which waits for it.
    #[tokio::test(flavor = "current_thread")]
    async fn a_guard_dropped_in_process_frees_its_lock_before_the_drop_returns() {
        let locks = LockManager::memory();
        for reentered in [false, true] {
            let outer = locks.lock("dropped").acquire().await.unwrap();
            let inner = match reentered {
                true => Some(outer.reenter().await.unwrap()),
                false => None,
            };
            drop(outer);
            if let Some(inner) = inner {
                assert_ne!(locks.stats(), Default::default(), "one hold of two is left");
                drop(inner);
            }
            // Nothing has yielded since the drop: a release left to a task has not run on
            // this one thread.
            assert_eq!(locks.stats(), Default::default(), "reentered: {reentered}");
            let next = locks.lock("dropped").try_acquire().await.expect("free");
            assert!(next.release_now().is_ok());
        }
        let guard = locks.lock("renewing").acquire().await.unwrap();
        let hold = guard.hold().clone();
        let renewing = hold.gate().begin().expect("the gate is open");
        drop(guard);
        assert_eq!(
            locks.stats().renewals,
            1,
            "the release waits for the renewal"
        );
        drop(renewing);
        let next = locks
            .lock("renewing")
            .wait(std::time::Duration::from_secs(10))
            .acquire()
            .await
            .expect("released once the renewal ended");
        assert!(next.release_now().is_ok());
        assert_eq!(locks.stats(), Default::default());
    }

    /// A release answered at once (in process) does not release while a renewal is under
    /// way: it falls back to the release that waits for the renewal, then frees the lock.
    #[tokio::test]
    async fn a_release_at_once_waits_for_a_renewal_under_way() {
        let locks = LockManager::memory();
        let guard = locks.lock("renewing").acquire().await.unwrap();
        let hold = guard.hold().clone();
        let renewing = hold.gate().begin().expect("the gate is open");
        let guard = guard
            .release_now()
            .expect_err("not released while a renewal is under way");
        let release = tokio::spawn(guard.release());
        tokio::task::yield_now().await;
        assert!(!release.is_finished(), "the release waits for the renewal");
        drop(renewing);
        assert_eq!(
            release.await.unwrap().unwrap(),
            crate::error::Released::Unlocked
        );
        let again = locks.lock("renewing").try_acquire().await.expect("free");
        assert_eq!(
            again.release().await.unwrap(),
            crate::error::Released::Unlocked
        );
        assert_eq!(locks.stats(), Default::default());
    }
}
