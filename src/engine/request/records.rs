//! Locks with a record: a request that takes the lock only while it has no record, for
//! named work or not.

#[cfg(doc)]
use crate::engine::LockGuard;
use crate::engine::LockRequest;
#[cfg(doc)]
use crate::LockError;

impl LockRequest {
    /// Takes the lock only if it has no record: the last holder of the name may leave one
    /// when it releases ([`LockGuard::release_recording`]), to say that what the lock guards
    /// was done, and with what result. While the record lasts, the acquisition takes nothing
    /// and ends with [`LockError::Recorded`], which carries it; an acquisition that waits
    /// for the holder ends so as soon as the holder leaves a record. A holder that leaves
    /// none (it failed, and the work may be tried again) lets the next waiter take the lock.
    /// This is how something runs once per key across processes (the idempotency layer runs
    /// a request's handler once this way, the record being its response).
    ///
    /// For the plain lock only (a backend answers another kind with
    /// [`LockError::Unavailable`]); RedLock has no records.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use tower_lock::{LockError, LockManager};
    ///
    /// let locks = LockManager::memory();
    /// let guard = locks.lock("job:7").unless_recorded().acquire().await.unwrap();
    /// // … run the job once …
    /// guard
    ///     .release_recording("done".into(), Duration::from_secs(3600))
    ///     .await
    ///     .unwrap();
    /// match locks.lock("job:7").unless_recorded().acquire().await {
    ///     Err(LockError::Recorded { record, .. }) => assert_eq!(&record[..], b"done"),
    ///     other => panic!("the job ran already: {other:?}"),
    /// }
    /// # }
    /// ```
    pub fn unless_recorded(mut self) -> Self {
        self.unless_recorded = Some(Box::new(None));
        self
    }

    /// [`unless_recorded`](Self::unless_recorded), for one piece of work named by `work` (a
    /// digest of it: the idempotency layer's request fingerprint). The lock keeps `work` while
    /// it is held, and another acquisition for other work that finds it held ends at once
    /// with [`LockError::HeldForOtherWork`] instead of waiting for a holder whose outcome
    /// can never be its own. (Whether a record is for the same work is the caller's to
    /// check: the record is given back as it is.)
    pub fn unless_recorded_for(mut self, work: impl Into<bytes::Bytes>) -> Self {
        self.unless_recorded = Some(Box::new(Some(work.into())));
        self
    }
}
