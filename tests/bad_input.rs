//! Arbitrary request input reaches the layer: never a panic, never a stuck lock; always a
//! lock or a documented 400.

mod support;

use std::sync::OnceLock;

use axum::body::Body;
use axum::routing::get;
use axum::{Extension, Router};
use fred::util::redis_keyslot;
use http::{Request, StatusCode};
use proptest::prelude::*;
use tower::ServiceExt;
use tower_lock::backend::unlock_channel;
use tower_lock::extract::HeldLock;
use tower_lock::layer::LockLayer;
use tower_lock::LockManager;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    memory: Router,
    redis: Router,
}

fn app(locks: LockManager) -> Router {
    let handler = |Extension(held): Extension<HeldLock>| async move {
        // The key, the channel and every other Redis key of this lock share a slot.
        let key = held.key();
        let slot = redis_keyslot(key.as_str().as_bytes());
        assert_eq!(
            redis_keyslot(unlock_channel(key).as_bytes()),
            slot,
            "{key:?}"
        );
        key.as_str().to_owned()
    };
    Router::new()
        .route("/p/{id}", get(handler))
        .route_layer(LockLayer::by_path_param("id").wait(std::time::Duration::ZERO))
        .route(
            "/h",
            get(handler).route_layer(LockLayer::by_header("x-key")),
        )
        .route("/q", get(handler).route_layer(LockLayer::by_query("k")))
        .layer(Extension(locks))
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let redis = runtime
            .block_on(LockManager::redis(&support::shared_redis_url()))
            .unwrap();
        Fixture {
            memory: app(LockManager::memory()),
            redis: app(redis),
            runtime,
        }
    })
}

/// Sends a request; returns the status and the body.
fn call(app: &Router, request: Request<Body>) -> (StatusCode, String) {
    fixture().runtime.block_on(async {
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    })
}

fn percent_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("%{b:02X}")).collect()
}

/// What the layer must answer for a raw value `value` under the layer's key prefix.
fn check(status: StatusCode, body: &str, prefix: &str, value: &[u8]) -> Result<(), TestCaseError> {
    match std::str::from_utf8(value) {
        Ok(text) if !text.is_empty() => {
            let name = format!(
                "{prefix}{}",
                text.replace('%', "%25")
                    .replace('{', "%7B")
                    .replace('}', "%7D")
            );
            if name.len() > tower_lock::lock::DEFAULT_MAX_NAME_LEN {
                prop_assert_eq!(status, StatusCode::BAD_REQUEST, "{}", body);
                prop_assert!(body.contains("limit"), "{}", body);
            } else {
                prop_assert_eq!(status, StatusCode::OK, "{}", body);
                prop_assert_eq!(body, name);
            }
        }
        // Empty or not UTF-8.
        _ => prop_assert_eq!(status, StatusCode::BAD_REQUEST, "{}", body),
    }
    Ok(())
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        prop::collection::vec(
            prop::sample::select(b"{}%/:?&=+#\\ \t\x00\x7f'\"ab".to_vec()),
            0..64
        ),
        prop::collection::vec(any::<u8>(), 1000..1100),
        Just(vec![]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn path_segments(value in bytes(), redis in any::<bool>()) {
        let f = fixture();
        let app = if redis { &f.redis } else { &f.memory };
        let uri = format!("/p/{}", percent_encode(&value));
        let (status, body) = call(app, Request::get(uri).body(Body::empty()).unwrap());
        if value.is_empty() {
            // `/p/` matches no route: axum's 404, the layer is not involved.
            prop_assert_eq!(status, StatusCode::NOT_FOUND);
        } else {
            check(status, &body, "id:", &value)?;
        }
    }

    #[test]
    fn header_values(value in bytes(), redis in any::<bool>()) {
        // HTTP cannot carry CR, LF or NUL in a header value.
        prop_assume!(http::HeaderValue::from_bytes(&value).is_ok());
        let f = fixture();
        let app = if redis { &f.redis } else { &f.memory };
        let request = Request::get("/h").header("x-key", value.as_slice()).body(Body::empty()).unwrap();
        let (status, body) = call(app, request);
        check(status, &body, "x-key:", &value)?;
    }

    #[test]
    fn query_strings(value in bytes(), raw in "[ -~]{0,40}", redis in any::<bool>()) {
        let f = fixture();
        let app = if redis { &f.redis } else { &f.memory };
        // An encoded value, then whatever printable junk follows it.
        let junk: String = raw.chars().filter(|c| !matches!(c, '#' | ' ' | '"' | '<' | '>' | '\\' | '^' | '`' | '{' | '|' | '}')).collect();
        let uri = format!("/q?k={}&{junk}", percent_encode(&value));
        let (status, body) = call(app, Request::get(uri).body(Body::empty()).unwrap());
        check(status, &body, "k:", &value)?;
    }
}

#[test]
fn nothing_is_left_held_or_waiting() {
    let f = fixture();
    // Every request above released its lock: the same keys are free again at once.
    let (status, _) = call(
        &f.memory,
        Request::get("/p/again").body(Body::empty()).unwrap(),
    );
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(
        &f.redis,
        Request::get("/p/again").body(Body::empty()).unwrap(),
    );
    assert_eq!(status, StatusCode::OK);
}

use support::order::OrderId;

/// Rejection bodies never echo a request value whole: cut, with control characters
/// escaped (a 10 KB value used to come back whole, a NUL byte too).
#[test]
fn rejections_cut_and_escape_request_values() {
    let f = fixture();
    let locks = LockManager::memory();
    let app = Router::new()
        .route(
            "/orders/{orderId}",
            get(|| async { "ok" })
                .route_layer(LockLayer::for_key::<OrderId>().manager(locks.clone())),
        )
        .route(
            "/p/{id}",
            get(|| async { "ok" }).route_layer(
                LockLayer::by_path_param("id")
                    .wait(std::time::Duration::ZERO)
                    .manager(locks.clone()),
            ),
        );
    let long = format!("{}%00{}", "x".repeat(10_000), "y".repeat(100));
    let (status, body) = call(
        &app,
        Request::get(format!("/orders/{long}"))
            .body(Body::empty())
            .unwrap(),
    );
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.len() < 400, "{} bytes: {body}", body.len());
    assert!(!body.contains('\0') && body.contains('…'), "{body}");

    // A busy answer names the key: a long one with a NUL byte in it.
    let value = format!("{}\0", "z".repeat(900));
    let _held = f
        .runtime
        .block_on(locks.lock(format!("id:{value}")).acquire())
        .unwrap();
    let (status, body) = call(
        &app,
        Request::get(format!("/p/{}", percent_encode(value.as_bytes())))
            .body(Body::empty())
            .unwrap(),
    );
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.len() < 400, "{} bytes: {body}", body.len());
    assert!(!body.contains('\0'), "{body}");
}
