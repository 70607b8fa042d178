//! Fenced locks over HTTP: the layer's request carries a token, which grows from request
//! to request; `Locked<K>` under a fenced layer reenters with a greater token;
//! `FencedLocked<K>` alone takes its own; under a plain layer, a 500 that names the fix.

use axum::routing::get;
use axum::{Extension, Router};
use http::StatusCode;
use tower_lock::extract::{FencedLocked, HeldLock, Locked};
use tower_lock::layer::LockLayer;

use crate::helpers::{manager, oneshot};
use crate::support;
use crate::support::order::OrderId;
use crate::support::suite::{backend_suite, BackendUnderTest};

fn token(body: &str) -> u64 {
    body.parse()
        .unwrap_or_else(|_| panic!("a token in the body: {body}"))
}

async fn requests_carry_growing_tokens(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let layer_token = |Extension(held): Extension<HeldLock>| async move {
        held.fencing_token().unwrap().to_string()
    };
    // The handler's extractor reenters the layer's hold: a token of its own, greater.
    let both = |Extension(held): Extension<HeldLock>, order: Locked<OrderId>| async move {
        format!(
            "{} {}",
            held.fencing_token().unwrap(),
            order.fencing_token().unwrap()
        )
    };
    let app = Router::new()
        .route("/layer/{orderId}", get(layer_token))
        .route("/both/{orderId}", get(both))
        .route_layer(LockLayer::for_key::<OrderId>().fenced())
        .layer(Extension(locks.clone()));
    let (status, first) = oneshot(&app, "GET", "/layer/7").await;
    assert_eq!(status, StatusCode::OK);
    let (status, second) = oneshot(&app, "GET", "/layer/7").await;
    assert_eq!(status, StatusCode::OK);
    assert!(token(&second) > token(&first), "{second} after {first}");
    let (status, body) = oneshot(&app, "GET", "/both/7").await;
    assert_eq!(status, StatusCode::OK);
    let (layer, handler) = body.split_once(' ').unwrap();
    assert!(
        token(layer) > token(&second) && token(handler) > token(layer),
        "{body}"
    );
    assert_eq!(locks.stats().claimed_names, 0);
}

async fn the_extractor_alone_and_under_a_plain_layer(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let fenced = |order: FencedLocked<OrderId>| async move {
        assert_eq!(order.guard().kind(), tower_lock::lock::LockKind::Fenced);
        order.fencing_token().unwrap().to_string()
    };
    let alone = Router::new()
        .route("/fenced/{orderId}", get(fenced))
        .layer(Extension(locks.clone()));
    let (status, first) = oneshot(&alone, "GET", "/fenced/8").await;
    assert_eq!(status, StatusCode::OK);
    let (_, second) = oneshot(&alone, "GET", "/fenced/8").await;
    assert!(token(&second) > token(&first));
    // Without a layer, the extractor's guard is released in the background once the handler
    // returns; under a layer, the claims below end before each response goes out.
    support::background_releases_done(&locks).await;
    let plain_token =
        |order: Locked<OrderId>| async move { format!("{:?}", order.fencing_token()) };
    let under_plain = Router::new()
        .route("/fenced/{orderId}", get(fenced))
        .route("/plain/{orderId}", get(plain_token))
        .route_layer(LockLayer::for_key::<OrderId>())
        .layer(Extension(locks.clone()));
    assert_eq!(oneshot(&under_plain, "GET", "/plain/8").await.1, "None");
    let (status, body) = oneshot(&under_plain, "GET", "/fenced/8").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        body.contains("fenced lock") && body.contains("plain lock"),
        "{body}"
    );
    assert_eq!(locks.stats().claimed_names, 0);
}

backend_suite!(
    [Memory, Redis, Postgres]
    requests_carry_growing_tokens,
    the_extractor_alone_and_under_a_plain_layer,
);
