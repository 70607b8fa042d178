//! The coalescing layer's own answers: problem details (RFC 9457,
//! `application/problem+json`), only where the layer was told to answer rather than run
//! the handler, or was not given what it needs.

use std::fmt;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::idempotency::rejection::{problem_response, retry_after_secs};

/// Why the coalescing layer answered a request itself. Each has an HTTP status
/// ([`status`](Self::status)) and a message that says what to change
/// ([`body_text`](Self::body_text)); as a response it is `application/problem+json` with a
/// `code` member naming the case.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CoalesceRejection {
    /// The request waited for another request's execution as long as the layer lets it,
    /// and the layer answers rather than run the handler
    /// ([`OnWaitEnd::Reject`](super::OnWaitEnd::Reject)): 503 with `Retry-After`.
    WaitEnded {
        /// When to try again.
        retry_after: Duration,
    },
    /// The lock backend could not be reached, and the layer answers rather than run the
    /// handler uncoalesced ([`OnUnavailable::Reject`](super::OnUnavailable::Reject)): 503
    /// with `Retry-After`.
    Unavailable {
        /// When to try again.
        retry_after: Duration,
    },
    /// The layer has no lock manager: 500. Give it one with `.manager(..)`, or add an
    /// `Extension(LockManager)` outside it.
    NoManager,
}

impl CoalesceRejection {
    /// The HTTP status of this answer.
    pub fn status(&self) -> StatusCode {
        match self {
            CoalesceRejection::WaitEnded { .. } | CoalesceRejection::Unavailable { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            CoalesceRejection::NoManager => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What happened, and what to do about it.
    pub fn body_text(&self) -> String {
        match self {
            CoalesceRejection::WaitEnded { retry_after } => format!(
                "an identical request is still being answered; try again in {}s",
                retry_after_secs(*retry_after)
            ),
            CoalesceRejection::Unavailable { retry_after } => format!(
                "the service's coordination store is unavailable; try again in {}s",
                retry_after_secs(*retry_after)
            ),
            CoalesceRejection::NoManager => "the CoalesceLayer has no LockManager: give it \
                `.manager(..)` or add `.layer(Extension(lock_manager))` outside it"
                .to_owned(),
        }
    }

    /// The name of the case, as in the problem's `code` member and the metrics.
    pub fn code(&self) -> &'static str {
        match self {
            CoalesceRejection::WaitEnded { .. } => "wait_ended",
            CoalesceRejection::Unavailable { .. } => "unavailable",
            CoalesceRejection::NoManager => "no_manager",
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            CoalesceRejection::WaitEnded { retry_after }
            | CoalesceRejection::Unavailable { retry_after } => Some(*retry_after),
            CoalesceRejection::NoManager => None,
        }
    }
}

impl fmt::Display for CoalesceRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.body_text())
    }
}

impl std::error::Error for CoalesceRejection {}

impl IntoResponse for CoalesceRejection {
    fn into_response(self) -> Response {
        problem_response(
            self.status(),
            &self.body_text(),
            self.code(),
            self.retry_after(),
        )
    }
}
