//! Why a request did not get its lock, and the HTTP response that says so.

use std::fmt;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};

use crate::error::BackendError;
use crate::key::LockKey;

/// A request that could not be served under its lock. Both [`LockLayer`](crate::LockLayer)
/// and [`Locked`](crate::Locked) answer with it; replace the responses with
/// [`LockLayer::map_rejection`](crate::LockLayer::map_rejection) or by mapping the
/// extractor's rejection.
///
/// | case | status | `Retry-After` |
/// |---|---|---|
/// | [`Busy`](Self::Busy): still held after the wait | 409 (configurable: 423, 429, 503…) | the holder's remaining lease |
/// | [`MissingKey`](Self::MissingKey): no parameter/header to lock on | 400 | — |
/// | [`InvalidKey`](Self::InvalidKey): empty, not UTF-8, too long, unparsable | 400 | — |
/// | [`Unavailable`](Self::Unavailable): the backend failed (fail closed) | 503 | 1 s |
/// | [`Lost`](Self::Lost): the lock was lost while the handler ran (abort policy) | 503 | 1 s |
/// | [`NoManager`](Self::NoManager): no [`LockManager`](crate::LockManager) installed | 500 | — |
/// | [`Misplaced`](Self::Misplaced): path parameters not visible to the layer | 500 | — |
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum LockRejection {
    /// Another request held the lock for the whole wait.
    Busy {
        /// The busy lock.
        key: LockKey,
        /// When to retry: the holder's remaining lease, as last seen.
        retry_after: Duration,
        /// The status to answer with (409 unless configured otherwise).
        status: StatusCode,
    },
    /// The request does not carry the value the lock key is made of.
    MissingKey {
        /// What is missing, e.g. "path parameter `orderId`".
        what: String,
    },
    /// The value is present but cannot be a lock key.
    InvalidKey {
        /// Where the value came from.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The lock backend is unreachable or failing.
    Unavailable {
        /// The backend's error.
        error: BackendError,
        /// When to retry.
        retry_after: Duration,
    },
    /// The lock was lost while the handler ran, and the layer was told to abort.
    Lost {
        /// The lost lock.
        key: LockKey,
    },
    /// No lock manager was found for the request.
    NoManager,
    /// The layer runs where axum's path parameters are not available.
    Misplaced {
        /// The parameter the layer looked for.
        param: String,
    },
}

/// Retry-After for backend trouble.
pub(crate) const UNAVAILABLE_RETRY_AFTER: Duration = Duration::from_secs(1);

impl LockRejection {
    /// The HTTP status of the default response.
    pub fn status(&self) -> StatusCode {
        match self {
            LockRejection::Busy { status, .. } => *status,
            LockRejection::MissingKey { .. } | LockRejection::InvalidKey { .. } => {
                StatusCode::BAD_REQUEST
            }
            LockRejection::Unavailable { .. } | LockRejection::Lost { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            LockRejection::NoManager | LockRejection::Misplaced { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }

    /// The body of the default response: what happened and, for mistakes, how to fix them.
    pub fn body_text(&self) -> String {
        match self {
            LockRejection::Busy {
                key, retry_after, ..
            } => format!(
                "`{key}` is busy: another request holds its lock. Retry after {} s.",
                retry_after_secs(*retry_after)
            ),
            LockRejection::MissingKey { what } => {
                format!("Missing {what}: this request needs it to take its lock.")
            }
            LockRejection::InvalidKey { what, reason } => format!("Invalid {what}: {reason}."),
            LockRejection::Unavailable { .. } => {
                "The lock service is unavailable; the request was not processed. Retry later."
                    .to_owned()
            }
            LockRejection::Lost { key } => format!(
                "The lock on `{key}` was lost while the request ran; it was aborted. Retry later."
            ),
            LockRejection::NoManager => "No `LockManager` found for this request. Did you add \
                `.layer(Extension(lock_manager))` to your Router (outside the `LockLayer`), or \
                give one to the layer with `LockLayer::manager`?"
                .to_owned(),
            LockRejection::Misplaced { param } => format!(
                "Path parameter `{param}` is not available: the `LockLayer` runs before routing. \
                 Add it with `Router::route_layer` (or `.layer` on the routes), not around the \
                 whole Router."
            ),
        }
    }

    /// The `Retry-After` delay of the default response, if it has one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LockRejection::Busy { retry_after, .. } => Some(*retry_after),
            LockRejection::Unavailable { retry_after, .. } => Some(*retry_after),
            LockRejection::Lost { .. } => Some(UNAVAILABLE_RETRY_AFTER),
            _ => None,
        }
    }
}

impl LockRejection {
    /// Maps a failed acquisition to its rejection; `what` names the key's source.
    pub(crate) fn from_error(
        error: crate::LockError,
        what: &str,
        busy_status: StatusCode,
    ) -> LockRejection {
        use crate::LockError;
        match error {
            LockError::TimedOut {
                key, holder_lease, ..
            } => LockRejection::Busy {
                key,
                retry_after: holder_lease.unwrap_or(Duration::from_secs(1)),
                status: busy_status,
            },
            LockError::Unavailable(error) => {
                tracing::warn!(%error, "tower-lock: lock backend unavailable; answering 503");
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
        }
    }
}

/// Whole seconds, rounded up, at least 1 (a `Retry-After` of 0 invites a busy loop).
fn retry_after_secs(delay: Duration) -> u64 {
    let secs = delay.as_secs() + u64::from(delay.subsec_nanos() > 0);
    secs.max(1)
}

impl fmt::Display for LockRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.body_text())
    }
}

impl std::error::Error for LockRejection {}

impl IntoResponse for LockRejection {
    fn into_response(self) -> Response {
        let mut response = (self.status(), self.body_text()).into_response();
        if let Some(delay) = self.retry_after() {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after_secs(delay)),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(30)), 30);
    }
}
