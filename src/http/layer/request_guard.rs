//! What a request holds while its handler runs: one lock, or several held as one
//! multi-lock; and how the layer releases it before the response goes out.

use crate::backend::BoxFuture;
use crate::engine::{InlineWatchdog, LockGuard, MultiLockGuard, PendingWatchdog};
use crate::error::{BackendError, Released};
use crate::http::rejection::LockRejection;
use crate::key::LockKey;
use crate::telemetry::throttled;

/// The lock (or locks) a request holds.
pub(super) enum RequestGuard {
    One(LockGuard),
    /// The parts' own watchdogs renew them.
    Many(MultiLockGuard),
}

impl RequestGuard {
    /// Starts renewing a single lock inside the response future (a multi-lock's parts
    /// renew themselves): `None` when there is nothing to start here.
    pub(super) fn keep_alive(&self, keeper: PendingWatchdog) -> Option<InlineWatchdog> {
        match self {
            RequestGuard::One(guard) => Some(guard.keep_alive(keeper)),
            RequestGuard::Many(_) => None,
        }
    }

    /// Completes when the lock (any part of a multi-lock) is lost: an explicit lease
    /// ending, or a renewal that found it gone.
    pub(super) fn lost(&self) -> InlineWatchdog {
        let loss = match self {
            RequestGuard::One(guard) => guard.loss(),
            RequestGuard::Many(guard) => guard.loss(),
        };
        Box::pin(async move { loss.lost().await })
    }

    /// The answer for a lock lost while the handler ran, naming the key that was lost.
    pub(super) fn lost_rejection(&self) -> LockRejection {
        let key = match self {
            RequestGuard::One(guard) => guard.key(),
            RequestGuard::Many(guard) => {
                let parts = guard.parts();
                // A multi-lock has at least one part.
                let lost = parts.iter().find(|part| part.is_lost()).or(parts.first());
                match lost {
                    Some(part) => part.key(),
                    // Should that ever change, still a 503.
                    None => {
                        let error = BackendError::new("multi-lock lost");
                        let error = crate::error::LockError::Unavailable(error);
                        return LockRejection::from_error(error, "lock keys", Default::default());
                    }
                }
            }
        };
        LockRejection::Lost { key: key.clone() }
    }

    /// Releases at once when the backend can; otherwise the future that releases.
    pub(super) fn release_now(self) -> Result<(), BoxFuture<()>> {
        let RequestGuard::One(guard) = self else {
            return Err(self.release());
        };
        match guard.release_now() {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => {
                throttled!(warn, %error, "tower-lock: release failed; the lock ends with its lease");
                Ok(())
            }
            Err(guard) => Err(RequestGuard::One(guard).release()),
        }
    }

    /// Releases before the response goes out; while the backend cannot be reached, the
    /// response goes out at once and the release goes on in the background.
    pub(super) fn release(self) -> BoxFuture<()> {
        match self {
            RequestGuard::One(guard) => Box::pin(async move {
                let key = guard.key().clone();
                log_release(&key, guard.release_promptly().await);
            }),
            RequestGuard::Many(guard) => Box::pin(async move {
                for (key, outcome) in guard.release_promptly().await {
                    log_release(&key, outcome);
                }
            }),
        }
    }
}

/// Warns of a layer's release (before its response) that failed, or goes on in the
/// background because the backend cannot be reached (`None`).
fn log_release(key: &LockKey, outcome: Option<Result<Released, BackendError>>) {
    match outcome {
        Some(Err(error)) => {
            throttled!(warn, %key, %error, "tower-lock: release failed; the lock ends with its lease");
        }
        None => {
            throttled!(warn, %key, "tower-lock: lock backend unreachable; answering now and releasing in the background");
        }
        Some(Ok(_)) => {}
    }
}
