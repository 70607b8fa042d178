//! Why a request did not get its lock, and the HTTP response that says so.

use std::fmt;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};

use crate::error::BackendError;
use crate::key::LockKey;
use crate::kind::LockKind;

/// A request that could not be served under its lock. Both [`LockLayer`](crate::layer::LockLayer)
/// and [`Locked`](crate::extract::Locked) answer with it; replace the responses with
/// [`LockLayer::map_rejection`](crate::layer::LockLayer::map_rejection) or by mapping the
/// extractor's rejection.
///
/// | case | status | `Retry-After` |
/// |---|---|---|
/// | [`Busy`](Self::Busy): still held after the wait | 409 (configurable: 423, 429, 503…) | 1 s (configurable: [`LockLayer::busy_retry_after`](crate::layer::LockLayer::busy_retry_after)) |
/// | [`NoPermit`](Self::NoPermit): a semaphore's permits all in use for the whole wait | 429 (configurable) | 1 s (configurable) |
/// | [`MissingKey`](Self::MissingKey): no parameter/header to lock on | 400 | — |
/// | [`InvalidKey`](Self::InvalidKey): empty, not UTF-8, too long, unparsable | 400 | — |
/// | [`Unavailable`](Self::Unavailable): the backend failed (fail closed) | 503 | 1 s |
/// | [`Lost`](Self::Lost): the lock was lost while the handler ran (abort policy) | 503 | 1 s |
/// | [`NoManager`](Self::NoManager): no [`LockManager`](crate::LockManager) installed | 500 | — |
/// | [`Misplaced`](Self::Misplaced): path parameters not visible to the layer | 500 | — |
/// | [`InvalidPermits`](Self::InvalidPermits): a semaphore's limit or permit count out of range (a mistake in the code) | 500 | — |
/// | [`Unsupported`](Self::Unsupported): the manager's backend has no such lock (a fair lock on RedLock) | 500 | — |
/// | [`KindMismatch`](Self::KindMismatch): an extractor asked for a lock kind the layer's hold cannot give (a write lock under a read hold) | 500 | — |
/// | [`BodyTooLarge`](Self::BodyTooLarge): the body read before the lock is over the limit | 413 | — |
/// | [`BodyTimeout`](Self::BodyTimeout): the body read before the lock took too long | 408 | — |
/// | [`BodyUnreadable`](Self::BodyUnreadable): the body could not be read (client gone, bad framing) | 400 | — |
///
/// Bodies name the key and what is wrong with it; request values in them are cut to
/// [`SHOWN_CHARS`] characters and control characters escaped, so a response never echoes
/// a large or binary value back.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum LockRejection {
    /// Another request held the lock for the whole wait.
    Busy {
        /// The busy lock.
        key: LockKey,
        /// When to retry (the layer's [`busy_retry_after`], 1 s by default). The holder's
        /// lease says nothing useful here: the watchdog keeps renewing it (30 s) however
        /// short the work.
        ///
        /// [`busy_retry_after`]: crate::layer::LockLayer::busy_retry_after
        retry_after: Duration,
        /// The status to answer with (409 unless configured otherwise).
        status: StatusCode,
    },
    /// Every permit of a semaphore was in use for the whole wait (see
    /// [`LockLayer::semaphore`](crate::layer::LockLayer::semaphore)).
    NoPermit {
        /// The semaphore.
        key: LockKey,
        /// Its limit, as this layer or extractor configures it.
        limit: u32,
        /// When to retry (the layer's [`busy_retry_after`], 1 s by default).
        ///
        /// [`busy_retry_after`]: crate::layer::LockLayer::busy_retry_after
        retry_after: Duration,
        /// The status to answer with (429 unless configured otherwise).
        status: StatusCode,
    },
    /// A semaphore's limit or permit count is out of range: a mistake in the code that
    /// configures it (see [`Permits::new`](crate::lock::Permits::new)).
    InvalidPermits {
        /// What is wrong.
        reason: String,
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
    /// The manager's backend does not have the kind of lock this layer or extractor takes
    /// (see [`Capabilities`](crate::backend::Capabilities)): a setup mistake.
    Unsupported {
        /// The backend's name.
        backend: &'static str,
        /// What it does not have.
        what: String,
    },
    /// An extractor asked for a lock kind the layer's hold of the same key cannot give: a
    /// write lock under a read hold (no upgrade), or a read-write lock under a plain one.
    KindMismatch {
        /// The lock.
        key: LockKey,
        /// The layer's kind.
        held: crate::kind::LockKind,
        /// The extractor's kind.
        asked: crate::kind::LockKind,
    },
    /// The layer runs where axum's path parameters are not available.
    Misplaced {
        /// The parameter the layer looked for.
        param: String,
    },
    /// The body, read before the lock is taken, is larger than the layer's
    /// [`body_limit`](crate::layer::LockLayer::body_limit).
    BodyTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The body, read before the lock is taken, did not arrive within the layer's
    /// [`body_timeout`](crate::layer::LockLayer::body_timeout).
    BodyTimeout {
        /// The time it was given.
        after: Duration,
    },
    /// The body could not be read (the client went away, or sent a broken body).
    BodyUnreadable {
        /// What went wrong.
        error: String,
    },
}

/// Retry-After for backend trouble.
pub(crate) const UNAVAILABLE_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Default Retry-After of a busy answer.
pub const DEFAULT_BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// How many characters of a request value a rejection's body shows.
pub const SHOWN_CHARS: usize = 64;

/// `text` as a response body may show it: at most [`SHOWN_CHARS`] characters (then `…`),
/// control characters escaped (`\0`, `\n`, `\u{1b}`).
fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(SHOWN_CHARS * 2) + 3);
    for (count, c) in text.chars().enumerate() {
        if count == SHOWN_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

impl LockRejection {
    /// The HTTP status of the default response.
    pub fn status(&self) -> StatusCode {
        match self {
            LockRejection::Busy { status, .. } | LockRejection::NoPermit { status, .. } => *status,
            LockRejection::MissingKey { .. }
            | LockRejection::InvalidKey { .. }
            | LockRejection::BodyUnreadable { .. } => StatusCode::BAD_REQUEST,
            LockRejection::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            LockRejection::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            LockRejection::Unavailable { .. } | LockRejection::Lost { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            LockRejection::NoManager
            | LockRejection::Unsupported { .. }
            | LockRejection::InvalidPermits { .. }
            | LockRejection::Misplaced { .. }
            | LockRejection::KindMismatch { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The body of the default response: what happened and, for mistakes, how to fix them.
    pub fn body_text(&self) -> String {
        match self {
            LockRejection::Busy {
                key, retry_after, ..
            } => format!(
                "`{}` is busy: another request holds its lock. Retry after {} s.",
                shown(key.as_str()),
                retry_after_secs(*retry_after)
            ),
            LockRejection::NoPermit {
                key,
                limit,
                retry_after,
                ..
            } => format!(
                "`{}` is at its limit: all {limit} permits are in use by other requests. \
                 Retry after {} s.",
                shown(key.as_str()),
                retry_after_secs(*retry_after)
            ),
            LockRejection::InvalidPermits { reason } => format!(
                "The route's semaphore is misconfigured: {reason}. Fix the limit or the \
                 permit count given to `LockLayer::semaphore` or the extractor."
            ),
            LockRejection::MissingKey { what } => {
                format!("Missing {what}: this request needs it to take its lock.")
            }
            LockRejection::InvalidKey { what, reason } => {
                format!("Invalid {what}: {}.", shown(reason))
            }
            LockRejection::Unavailable { .. } => {
                "The lock service is unavailable; the request was not processed. Retry later."
                    .to_owned()
            }
            LockRejection::Lost { key } => format!(
                "The lock on `{}` was lost while the request ran; it was aborted. Retry later.",
                shown(key.as_str())
            ),
            LockRejection::NoManager => "No `LockManager` found for this request. Did you add \
                `.layer(Extension(lock_manager))` to your Router (outside the `LockLayer`), \
                give one to the layer with `LockLayer::manager`, or put one in the router's \
                state (`FromRef`)?"
                .to_owned(),
            LockRejection::Unsupported { backend, what } => format!(
                "This route's lock needs {what}, which the {backend} lock backend does not \
                 have: give the layer or extractor a manager on a backend that has them, or \
                 take another kind of lock."
            ),
            LockRejection::KindMismatch {
                key,
                held: LockKind::Semaphore(held),
                asked: LockKind::Semaphore(asked),
            } => format!(
                "The handler asks for {} permit(s) of `{}` limited to {}, but its layer holds {} \
                 limited to {}: give the layer and the extractor the same limit and count.",
                asked.count(),
                shown(key.as_str()),
                asked.limit(),
                held.count(),
                held.limit()
            ),
            LockRejection::KindMismatch { key, held, asked } => format!(
                "The handler asks for a {} lock on `{}`, but its layer holds a {} lock on it, \
                 which cannot give one (a read hold never becomes a write hold). Make the \
                 layer take the {} lock for this route, or use the matching extractor.",
                asked.name(),
                shown(key.as_str()),
                held.name(),
                asked.name()
            ),
            LockRejection::Misplaced { param } => format!(
                "Path parameter `{param}` is not available: the `LockLayer` runs before routing. \
                 Add it with `Router::route_layer` (or `.layer` on the routes), not around the \
                 whole Router."
            ),
            LockRejection::BodyTooLarge { limit } => {
                format!("The request body is larger than the {limit} bytes this route accepts.")
            }
            LockRejection::BodyTimeout { after } => format!(
                "The request body did not arrive within {} s.",
                retry_after_secs(*after)
            ),
            LockRejection::BodyUnreadable { error } => {
                format!("The request body could not be read: {}.", shown(error))
            }
        }
    }

    /// The `Retry-After` delay of the default response, if it has one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LockRejection::Busy { retry_after, .. }
            | LockRejection::NoPermit { retry_after, .. } => Some(*retry_after),
            LockRejection::Unavailable { retry_after, .. } => Some(*retry_after),
            LockRejection::Lost { .. } => Some(UNAVAILABLE_RETRY_AFTER),
            _ => None,
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
    fn request_values_are_cut_and_escaped_in_bodies() {
        assert_eq!(shown("order:42"), "order:42");
        assert_eq!(shown("a\0b\nc\u{1b}"), "a\\0b\\nc\\u{1b}");
        let long = "é".repeat(10_000);
        let cut = shown(&long);
        assert_eq!(cut.chars().count(), SHOWN_CHARS + 1);
        assert!(cut.ends_with('…'));
        let key = LockKey::new("", &format!("x{}\0", "y".repeat(5000)), 10_000).unwrap();
        let body = LockRejection::Lost { key }.body_text();
        assert!(body.len() < 300 && !body.contains('\0'), "{body}");
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(30)), 30);
    }
}
