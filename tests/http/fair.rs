//! Fair locks over HTTP: requests for one key get in in the order they arrived (real TCP),
//! one that waits too long gets the plain lock's busy answer and leaves the queue, and the
//! `FairLocked` extractor under the layer's hold.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Extension, Router};
use http::{HeaderMap, StatusCode};
use tokio::sync::watch;
use tower_lock::extract::{FairLocked, HeldLock, Locked};
use tower_lock::layer::LockLayer;
use tower_lock::lock::LockKind;

use crate::helpers::{manager, oneshot};
use crate::support;
use crate::support::http::{read, send, serve};
use crate::support::order::OrderId;
use crate::support::suite::{backend_suite, BackendUnderTest};

#[derive(Clone)]
struct Payments {
    /// The `x-mark` of each request, in the order they got in.
    order: Arc<Mutex<Vec<String>>>,
    /// The first request holds until this turns true.
    go: watch::Receiver<bool>,
}

async fn pay(State(payments): State<Payments>, headers: HeaderMap) -> &'static str {
    let mark = headers["x-mark"].to_str().unwrap().to_owned();
    let first = mark == "0";
    payments.order.lock().unwrap().push(mark);
    if first {
        let mut go = payments.go.clone();
        go.wait_for(|go| *go).await.unwrap();
    }
    "paid"
}

async fn requests_get_in_in_arrival_order(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (open, go) = watch::channel(false);
    let payments = Payments {
        order: Arc::default(),
        go,
    };
    let app = Router::new()
        .route("/orders/{orderId}/payments", post(pay))
        .route_layer(
            LockLayer::by_path_param("orderId")
                .fair()
                .manager(locks.clone()),
        )
        .with_state(payments.clone());
    let addr = serve(app).await;
    let path = "/orders/42/payments";
    let first = send(addr, "POST", path, &[("x-mark", "0")]).await;
    support::eventually("the first request is in", || async {
        (payments.order.lock().unwrap().len() == 1).then_some(())
    })
    .await;
    let mut queued = Vec::new();
    for mark in 1..6 {
        let mark = mark.to_string();
        queued.push(send(addr, "POST", path, &[("x-mark", &mark)]).await);
        support::eventually("the request queues", || async {
            (locks.waiting("orderId:42") == queued.len()).then_some(())
        })
        .await;
    }
    open.send(true).unwrap();
    assert_eq!(read(first).await.status, 200);
    for request in queued {
        assert_eq!(read(request).await.status, 200);
    }
    assert_eq!(
        *payments.order.lock().unwrap(),
        ["0", "1", "2", "3", "4", "5"]
    );
    assert_eq!(locks.stats().claimed_names, 0);
}

/// A request whose wait ends gets the same answer as under the plain lock, and leaves the
/// queue.
async fn a_request_that_waits_too_long_is_busy_and_leaves(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let wait = Duration::from_millis(150);
    let route = |layer: LockLayer| {
        Router::new()
            .route("/orders/{orderId}", get(|| async { "ok" }))
            .route_layer(layer.wait(wait).manager(locks.clone()))
    };
    let fair = route(LockLayer::by_path_param("orderId").fair());
    let plain = route(LockLayer::by_path_param("orderId"));
    let holder = locks.fair_lock("orderId:9").acquire().await.unwrap();
    let (fair_status, fair_body) = oneshot(&fair, "GET", "/orders/9").await;
    let (plain_status, _) = oneshot(&plain, "GET", "/orders/9").await;
    assert_eq!(fair_status, plain_status, "{fair_body}");
    assert_ne!(fair_status, StatusCode::OK);
    assert_eq!(locks.waiting("orderId:9"), 0, "it left the queue");
    assert_eq!(
        holder.release().await.unwrap(),
        tower_lock::lock::Released::Unlocked
    );
    assert_eq!(oneshot(&fair, "GET", "/orders/9").await.0, StatusCode::OK);
}

/// `FairLocked` reenters the layer's fair hold, takes its own lock without a layer, and is
/// a 500 naming the mistake under a layer holding another kind.
async fn the_extractor_under_the_layer(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let kind = |Extension(held): Extension<HeldLock>| async move { format!("{:?}", held.kind()) };
    let fair = |FairLocked(order): FairLocked<OrderId>| async move {
        format!("{:?} {}", order.guard().kind(), order.0)
    };
    let under_fair = Router::new()
        .route("/kind/{orderId}", get(kind))
        .route("/fair/{orderId}", get(fair))
        .route_layer(LockLayer::for_key::<OrderId>().fair())
        .layer(Extension(locks.clone()));
    assert_eq!(
        oneshot(&under_fair, "GET", "/kind/7").await.1,
        format!("{:?}", LockKind::Fair)
    );
    let (status, body) = oneshot(&under_fair, "GET", "/fair/7").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "Fair 7"));
    let alone = Router::new()
        .route("/fair/{orderId}", get(fair))
        .layer(Extension(locks.clone()));
    assert_eq!(oneshot(&alone, "GET", "/fair/7").await.0, StatusCode::OK);
    // Without a layer, the extractor's guard is released in the background once the handler
    // returns; under a layer, the claims below end before each response goes out.
    support::background_releases_done(&locks).await;
    let plain = |Locked(_order): Locked<OrderId>| async { "plain" };
    let under_plain = Router::new()
        .route("/fair/{orderId}", get(fair))
        .route("/plain/{orderId}", get(plain))
        .route_layer(LockLayer::for_key::<OrderId>())
        .layer(Extension(locks.clone()));
    let (status, body) = oneshot(&under_plain, "GET", "/fair/7").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        body.contains("fair lock") && body.contains("plain lock"),
        "{body}"
    );
    assert_eq!(locks.stats().claimed_names, 0);
}

backend_suite!(
    [Memory, Redis]
    requests_get_in_in_arrival_order,
    a_request_that_waits_too_long_is_busy_and_leaves,
    the_extractor_under_the_layer,
);
