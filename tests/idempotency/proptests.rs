//! Any key and body a client can send: never a panic, never a 5xx, and the handler runs
//! only for a valid key.

use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode};
use proptest::prelude::*;
use tower::ServiceExt;
use tower_lock::idempotency::IdempotencyLayer;
use tower_lock::LockManager;

use crate::app::{self, Handlers};

/// Bytes a header value may hold: visible ASCII, space, tab and obs-text.
fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![Just(b' '), Just(b'\t'), 0x21u8..=0x7e, 0x80u8..=0xff],
        0..300,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_key_and_body_is_answered_without_a_5xx(key in header_bytes(), body in prop::collection::vec(any::<u8>(), 0..64)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let (handlers, _) = Handlers::new(false);
            let locks = LockManager::memory();
            let app = app::app(&handlers, IdempotencyLayer::new().manager(locks));
            let Ok(value) = HeaderValue::from_bytes(&key) else {
                return Ok(());
            };
            let request = Request::post("/orders")
                .header("idempotency-key", value)
                .body(Body::from(body))
                .unwrap();
            let response = app.oneshot(request).await.unwrap();
            let status = response.status();
            prop_assert!(
                status == StatusCode::CREATED || status == StatusCode::BAD_REQUEST,
                "{status} for {key:?}"
            );
            prop_assert_eq!(status == StatusCode::CREATED, handlers.runs() == 1);
            Ok::<(), TestCaseError>(())
        })?;
    }
}
