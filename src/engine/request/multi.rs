//! A multi-lock: several names held together, all or nothing (Redisson's `RMultiLock`,
//! without its deadlock). The parts are locks of one kind, taken in one canonical order
//! (their keys sorted), so that two multi-locks naming the same keys in any orders never
//! wait for each other in a circle. The request's settings are [`LockRequest`]'s.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::hold::guard::LockGuard;
use crate::engine::hold::multi_guard::MultiLockGuard;
use crate::engine::manager::shared::ManagerInner;
use crate::engine::request::acquire::deadline_after;
use crate::engine::request::{LockRequest, ManyNames};
use crate::error::{BackendError, LockError, Released};
use crate::join::join_all;
use crate::key::LockKey;
use crate::kind::LockKind;

impl LockRequest<ManyNames> {
    /// A multi-lock of `keys` (sorted here, each once) of `kind`.
    pub(crate) fn many(
        manager: Arc<ManagerInner>,
        keys: Result<Vec<LockKey>, LockError>,
        kind: LockKind,
    ) -> Self {
        let keys = keys.and_then(|mut keys| {
            if keys.is_empty() {
                return Err(LockError::InvalidName {
                    reason: "a multi-lock needs at least one name".into(),
                });
            }
            keys.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
            keys.dedup();
            manager.store().check(kind, false)?;
            Ok(keys)
        });
        LockRequest::with_names(manager, ManyNames(keys), kind)
    }

    /// Tries each part once, without waiting.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(self) -> Result<MultiLockGuard, LockError> {
        self.wait(Duration::ZERO).acquire().await
    }

    /// Acquires every part, or none: first all at once (their scripts go out together);
    /// if some are busy, the parts after the first busy one (in the canonical order) are
    /// let go, and the rest are waited for one by one in that order, within what is left
    /// of the wait. A part is only ever waited for while holding parts before it, never
    /// after: two multi-locks cannot wait for each other.
    ///
    /// # Errors
    /// The first part's error that ended the attempt, after every part taken was
    /// released: [`LockError::TimedOut`] (a part stayed busy for the rest of the wait),
    /// [`LockError::Unavailable`], [`LockError::InvalidName`] (an invalid name, or none).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped at any point, the parts taken are released in the background
    /// and the attempts on their way are finished and undone (as [`LockRequest::acquire`]).
    pub async fn acquire(mut self) -> Result<MultiLockGuard, LockError> {
        let keys = std::mem::replace(&mut self.names.0, Ok(Vec::new()))?;
        let started = Instant::now();
        let deadline = deadline_after(started, self.wait);
        let tries = join_all(keys.iter().map(|key| self.part(key).try_acquire())).await;
        let Some(busy) = tries.iter().position(Result::is_err) else {
            return Ok(MultiLockGuard::new(tries.into_iter().flatten().collect()));
        };
        let mut held = Vec::with_capacity(keys.len());
        let mut later = Vec::new();
        let mut failure = None;
        for (at, tried) in tries.into_iter().enumerate() {
            match tried {
                Ok(guard) if at < busy => held.push(guard),
                Ok(guard) => later.push(guard),
                // Busy is waited for below; any other error ends the attempt.
                Err(LockError::TimedOut { .. }) if !self.wait.is_zero() => {}
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
        }
        // Holding a part after one that is waited for could close a circle: let them go.
        release_all(later).await;
        if let Some(error) = failure {
            release_all(held).await;
            return Err(self.waited(error, started));
        }
        // From here on the multi-lock waits: an outage is ridden out while its wait lasts.
        for key in &keys[busy..] {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.part(key).waiting_already().wait(left).acquire().await {
                Ok(guard) => held.push(guard),
                Err(error) => {
                    release_all(held).await;
                    return Err(self.waited(error, started));
                }
            }
        }
        Ok(MultiLockGuard::new(held))
    }

    /// The request for one part.
    fn part(&self, key: &LockKey) -> LockRequest {
        let request = LockRequest::new(self.manager.clone(), Ok(key.clone()), self.kind);
        match self.fixed_lease {
            Some(lease) => request.fixed_lease(lease),
            None => request,
        }
    }

    /// A part's error, with the whole acquisition's wait in it.
    fn waited(&self, error: LockError, started: Instant) -> LockError {
        match error {
            LockError::TimedOut {
                key,
                holder_lease,
                held_back,
                ..
            } => LockError::timed_out(key, started.elapsed(), holder_lease, held_back),
            other => other,
        }
    }
}

/// Releases `guards` together (their outcomes do not matter: a failed release ends with
/// its lease).
async fn release_all(guards: Vec<LockGuard>) {
    if !guards.is_empty() {
        let _: Vec<Result<Released, BackendError>> =
            join_all(guards.into_iter().map(LockGuard::release)).await;
    }
}
