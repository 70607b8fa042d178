//! The idempotency layer's own answers: problem details (RFC 9457,
//! `application/problem+json`) with the status codes of the IETF `Idempotency-Key` draft.

use std::fmt;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, StatusCode};

use crate::error::BackendError;

/// Why the idempotency layer answered a request itself. Each has an HTTP status
/// ([`status`](Self::status)) and a message that says what to change
/// ([`body_text`](Self::body_text)); as a response it is `application/problem+json` with a
/// `code` member naming the case (`missing_key`, `invalid_key`, …). None of them is stored:
/// the client may fix the request and retry with the same key.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum IdempotencyRejection {
    /// The route requires a key and the request has none: 400.
    MissingKey {
        /// Where the key is read (`the \`Idempotency-Key\` header`).
        what: String,
    },
    /// The key is not usable: 400.
    InvalidKey {
        /// Where the key is read.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The key was used before with a different request (another method, path, query or
    /// body): 422. Send a new key for a new request.
    Mismatch {
        /// Where the key is read.
        what: String,
    },
    /// A request with the same key is still being processed, and this one did not wait for
    /// it (or waited as long as the layer lets it): 409 with `Retry-After`.
    InProgress {
        /// When to try again.
        retry_after: Duration,
    },
    /// The request's body is larger than the layer reads: 413.
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The request's body did not arrive in time: 408.
    BodyTimeout {
        /// How long the layer waited for it.
        after: Duration,
    },
    /// The request's body could not be read: 400.
    BodyUnreadable {
        /// What went wrong.
        error: String,
    },
    /// The lock backend (Redis) could not be reached: 503 with `Retry-After`.
    Unavailable {
        /// The backend's error.
        error: BackendError,
        /// When to try again.
        retry_after: Duration,
    },
    /// No `LockManager`: the layer was given none and the request has none in its
    /// extensions: 500 (a setup mistake).
    NoManager,
    /// The manager's backend has no locks with a record, which the layer stores responses
    /// with (RedLock): 500 (a setup mistake).
    NoRecords {
        /// The backend's name.
        backend: &'static str,
    },
    /// A handler asked for its request's transaction (`IdempotentTransaction`, feature
    /// `postgres`; `IdempotentMySqlTransaction`, feature `mysql`) on a route whose
    /// idempotency layer has none of that database (its `.transactions(..)` was not set, or
    /// set for the other): 500 (a setup mistake).
    NoTransaction,
    /// The handler's transaction, with its response, could not be committed (or begun):
    /// nothing it did was applied, and a retry runs it again: 503 with `Retry-After`.
    NotCommitted {
        /// What the database answered.
        error: String,
        /// When to try again.
        retry_after: Duration,
    },
    /// The stored response of the key could not be read (written by another version, or
    /// damaged): 500.
    UnreadableRecord {
        /// What is wrong with it.
        error: String,
    },
}

impl IdempotencyRejection {
    /// The HTTP status of this rejection.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MissingKey { .. } | Self::InvalidKey { .. } | Self::BodyUnreadable { .. } => {
                StatusCode::BAD_REQUEST
            }
            Self::Mismatch { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::InProgress { .. } => StatusCode::CONFLICT,
            Self::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            Self::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::NoManager
            | Self::NoRecords { .. }
            | Self::NoTransaction
            | Self::UnreadableRecord { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            Self::NotCommitted { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// A short name of the case, the problem's `code` member.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingKey { .. } => "missing_key",
            Self::InvalidKey { .. } => "invalid_key",
            Self::Mismatch { .. } => "key_reused",
            Self::InProgress { .. } => "in_progress",
            Self::BodyTooLarge { .. } => "body_too_large",
            Self::BodyTimeout { .. } => "body_timeout",
            Self::BodyUnreadable { .. } => "body_unreadable",
            Self::Unavailable { .. } => "unavailable",
            Self::NoManager => "no_lock_manager",
            Self::NoRecords { .. } => "no_records",
            Self::NoTransaction => "no_transaction",
            Self::NotCommitted { .. } => "not_committed",
            Self::UnreadableRecord { .. } => "unreadable_record",
        }
    }

    /// What went wrong and what to change, for the client.
    pub fn body_text(&self) -> String {
        match self {
            Self::MissingKey { what } => format!(
                "this request needs an idempotency key: send {what} with a value unique to \
                 this request (a UUID), and the same value when you retry it"
            ),
            Self::InvalidKey { what, reason } => {
                format!("{what} cannot be used as an idempotency key: {reason}")
            }
            Self::Mismatch { what } => format!(
                "{what} was used before for a different request (another method, path, query \
                 or body): send a new key for a new request"
            ),
            Self::InProgress { retry_after } => format!(
                "a request with this idempotency key is still being processed: retry in {} s \
                 to get its response",
                retry_after_secs(*retry_after)
            ),
            Self::BodyTooLarge { limit } => {
                format!("the request body is larger than {limit} bytes")
            }
            Self::BodyTimeout { after } => {
                format!("the request body did not arrive within {after:?}")
            }
            Self::BodyUnreadable { error } => {
                format!("the request body could not be read: {error}")
            }
            Self::Unavailable { retry_after, .. } => format!(
                "the idempotency store is unavailable: retry in {} s",
                retry_after_secs(*retry_after)
            ),
            Self::NoManager => "the idempotency layer has no lock manager (a server setup \
                                mistake: give the layer `.manager(..)`)"
                .to_owned(),
            Self::NoRecords { backend } => format!(
                "the idempotency layer's lock backend ({backend}) cannot store responses (a \
                 server setup mistake: give the layer a manager on Redis, PostgreSQL, MySQL \
                 or in memory)"
            ),
            Self::NoTransaction => "the handler asked for its request's transaction, but the \
                                    route's idempotency layer has none (a server setup \
                                    mistake: give the layer `.transactions(..)`)"
                .to_owned(),
            Self::NotCommitted { error, retry_after } => format!(
                "the request's work could not be committed, so none of it was applied ({error}); \
                 retry in {} s with the same key",
                retry_after_secs(*retry_after)
            ),
            Self::UnreadableRecord { .. } => {
                "the stored response of this idempotency key cannot be read".to_owned()
            }
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::InProgress { retry_after }
            | Self::Unavailable { retry_after, .. }
            | Self::NotCommitted { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

impl fmt::Display for IdempotencyRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.body_text())
    }
}

impl IntoResponse for IdempotencyRejection {
    fn into_response(self) -> Response {
        problem_response(
            self.status(),
            &self.body_text(),
            self.code(),
            self.retry_after(),
        )
    }
}

/// A problem details response (RFC 9457): `type`, `title`, `status`, `detail` and the
/// layer's `code` for the case, with `Retry-After` when given.
pub(crate) fn problem_response(
    status: StatusCode,
    detail: &str,
    code: &str,
    retry_after: Option<Duration>,
) -> Response {
    let problem = serde_json::json!({
        "type": "about:blank",
        "title": status.canonical_reason().unwrap_or("Error"),
        "status": status.as_u16(),
        "detail": detail,
        "code": code,
    });
    let mut response = (status, problem.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    if let Some(after) = retry_after {
        headers.insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(after)));
    }
    response
}

/// Whole seconds, rounded up, at least 1.
pub(crate) fn retry_after_secs(delay: Duration) -> u64 {
    (delay.as_secs() + u64::from(delay.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rejections_are_problem_details() {
        let response = IdempotencyRejection::InProgress {
            retry_after: Duration::from_millis(1500),
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(response.headers()[RETRY_AFTER], "2");
        assert_eq!(response.headers()[CONTENT_TYPE], "application/problem+json");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(problem["status"], 409);
        assert_eq!(problem["code"], "in_progress");
        assert!(problem["detail"].as_str().unwrap().contains("retry in 2 s"));
    }
}
