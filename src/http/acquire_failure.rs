//! How a failed acquisition is answered over HTTP: the rejection for each error, and the
//! status and `Retry-After` of a busy lock.

use std::time::Duration;

use http::StatusCode;

use super::rejection::{LockRejection, DEFAULT_BUSY_RETRY_AFTER, UNAVAILABLE_RETRY_AFTER};
use crate::telemetry::throttled;

impl LockRejection {
    /// Maps a failed acquisition to its rejection; `what` names the key's source.
    pub(crate) fn from_error(
        error: crate::LockError,
        what: &str,
        busy: BusyAnswer,
    ) -> LockRejection {
        use crate::LockError;
        match error {
            LockError::TimedOut { key, .. } => match busy.permits {
                Some(limit) => LockRejection::NoPermit {
                    key,
                    limit,
                    retry_after: busy.retry_after,
                    status: busy.status,
                },
                None => LockRejection::Busy {
                    key,
                    retry_after: busy.retry_after,
                    status: busy.status,
                },
            },
            LockError::InvalidPermits { reason } => LockRejection::InvalidPermits { reason },
            // A force-unlock's answer, never an acquisition's.
            error @ LockError::NotALock { .. } => LockRejection::Unavailable {
                error: crate::error::BackendError::new(error.to_string()),
                retry_after: UNAVAILABLE_RETRY_AFTER,
            },
            LockError::Unavailable(error) => {
                throttled!(warn, %error, "tower-lock: lock backend unavailable; answering 503");
                LockRejection::Unavailable {
                    error,
                    retry_after: UNAVAILABLE_RETRY_AFTER,
                }
            }
            LockError::InvalidName { reason } => LockRejection::InvalidKey {
                what: what.to_owned(),
                reason,
            },
            LockError::Lost { key } => LockRejection::Lost { key },
            LockError::Unsupported { backend, what } => {
                throttled!(error, backend, %what, "tower-lock: the lock backend has no such lock; answering 500");
                LockRejection::Unsupported { backend, what }
            }
            LockError::KindMismatch { key, held, asked } => {
                LockRejection::KindMismatch { key, held, asked }
            }
            // Only acquisitions that ask for records get them (not the lock layers'): the
            // work was done already, or the lock is held for other work, so the lock is not
            // there to take.
            LockError::Recorded { key, .. } | LockError::HeldForOtherWork { key } => {
                LockRejection::Busy {
                    key,
                    retry_after: busy.retry_after,
                    status: busy.status,
                }
            }
        }
    }
}

/// How a busy lock is answered: its status and `Retry-After`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BusyAnswer {
    pub(crate) status: StatusCode,
    pub(crate) retry_after: Duration,
    /// For a semaphore: its limit (the answer is then [`LockRejection::NoPermit`]).
    pub(crate) permits: Option<u32>,
}

impl BusyAnswer {
    /// The default answer of a semaphore limited to `limit`: 429.
    pub(crate) fn semaphore(limit: u32) -> Self {
        BusyAnswer {
            status: StatusCode::TOO_MANY_REQUESTS,
            permits: Some(limit),
            ..BusyAnswer::default()
        }
    }
}

impl Default for BusyAnswer {
    fn default() -> Self {
        BusyAnswer {
            status: StatusCode::CONFLICT,
            retry_after: DEFAULT_BUSY_RETRY_AFTER,
            permits: None,
        }
    }
}
