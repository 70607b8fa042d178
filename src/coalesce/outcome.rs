//! What a key's execution left for the requests that waited for it: its response, shared;
//! word that its response is not for sharing (they run the handler themselves); or
//! nothing (the next of them leads).

use std::sync::Arc;

use axum::body::Bytes;
use axum::response::Response;
use http::header::{HeaderName, HeaderValue};

use crate::idempotency::stored::StoredResponse;

/// The header a shared response carries: RFC 9211's `Cache-Status`, as a cache that
/// collapsed the request with another (`fwd=miss; collapsed`).
pub const CACHE_STATUS: HeaderName = HeaderName::from_static("cache-status");

/// The value of [`CACHE_STATUS`] on a shared response.
pub const SHARED_CACHE_STATUS: &str = "tower-lock; fwd=miss; collapsed";

/// The record left when a response is not for sharing: the requests that waited run the
/// handler themselves.
const RUN_YOURSELVES: &[u8] = b"TLCP\x01";

/// What the requests of a key learn from its execution.
#[derive(Clone)]
pub(super) enum Outcome {
    /// The response, to answer as their own.
    Shared(Arc<StoredResponse>),
    /// It is not for sharing (private, a cookie, too large): each runs the handler.
    RunYourselves,
    /// Nothing to share (the handler failed, asked for a retry, or its leader went away):
    /// the next of them leads.
    LeadNext,
    /// The backend cannot be reached.
    Unavailable,
}

impl Outcome {
    /// The record another process reads it from (`None`: nothing is stored).
    pub(super) fn record(&self) -> Option<Bytes> {
        match self {
            Outcome::Shared(stored) => Some(stored.encode()),
            Outcome::RunYourselves => Some(Bytes::from_static(RUN_YOURSELVES)),
            Outcome::LeadNext | Outcome::Unavailable => None,
        }
    }

    /// A record read back, for the key whose digest is `digest`. A record that is not one
    /// (damaged, or another key's under a colliding name) is a reason to run the handler,
    /// never to answer it.
    pub(super) fn from_record(record: &Bytes, digest: &[u8; 32]) -> Outcome {
        if &record[..] == RUN_YOURSELVES {
            return Outcome::RunYourselves;
        }
        match StoredResponse::decode(record) {
            Ok(stored) if stored.fingerprint == *digest => Outcome::Shared(Arc::new(stored)),
            Ok(_) => Outcome::RunYourselves,
            Err(error) => {
                tracing::warn!(target: crate::telemetry::TARGET, %error, "tower-lock: a coalesced response cannot be read; running the handler");
                Outcome::RunYourselves
            }
        }
    }
}

/// A shared response, as a request that waited for it answers it: its `Cache-Status` list
/// gains this layer's member (after any the handler's response had, as RFC 9211 orders
/// them: the one nearest the origin first).
pub(super) fn shared_response(stored: &StoredResponse) -> Response {
    let mut response = stored.clone().into_response();
    response
        .headers_mut()
        .append(CACHE_STATUS, HeaderValue::from_static(SHARED_CACHE_STATUS));
    response
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, StatusCode};

    use super::*;

    #[test]
    fn a_record_is_shared_only_with_the_key_whose_digest_it_carries() {
        let stored = StoredResponse::new(
            [1; 32],
            StatusCode::OK,
            &HeaderMap::new(),
            Bytes::from_static(b"report"),
        )
        .unwrap();
        let record = Outcome::Shared(Arc::new(stored)).record().unwrap();
        assert!(matches!(
            Outcome::from_record(&record, &[1; 32]),
            Outcome::Shared(shared) if shared.body == "report"
        ));
        // Another key under the same name (the name carries half the digest): it runs the
        // handler, never answers another key's response.
        let mut other = [1; 32];
        other[31] = 2;
        assert!(matches!(
            Outcome::from_record(&record, &other),
            Outcome::RunYourselves
        ));
        assert!(matches!(
            Outcome::from_record(&record.slice(..10), &[1; 32]),
            Outcome::RunYourselves
        ));
    }
}
