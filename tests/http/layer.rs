//! The layer: one request per key at a time, busy and missing-key answers, long handlers.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Path;
use axum::routing::{get, post};
use axum::{Extension, Router};
use http::{Request, StatusCode};
use tokio::sync::Barrier;
use tower::ServiceExt;
use tower_lock::extract::HeldLock;
use tower_lock::layer::LockLayer;
use tower_lock::LockManager;

use crate::helpers::{manager, oneshot, Inside};
use crate::support;
use crate::support::http::{holding, request, send, serve, stalled};
use crate::support::suite::{backend_suite, BackendUnderTest};

async fn one_key_at_a_time_other_keys_in_parallel(backend: BackendUnderTest) {
    let inside = Inside::default();
    let barrier = Arc::new(Barrier::new(8));
    let app = Router::new()
        .route(
            "/orders/{orderId}/pay",
            post(|Extension(inside): Extension<Inside>| async move {
                let _in = inside.enter();
                tokio::time::sleep(Duration::from_millis(5)).await;
                "paid"
            }),
        )
        .route(
            "/orders/{orderId}/meet",
            post(|Extension(barrier): Extension<Arc<Barrier>>| async move {
                // Completes only when 8 handlers (8 different orders) are inside at once.
                barrier.wait().await;
                "met"
            }),
        )
        .route_layer(LockLayer::by_path_param("orderId").wait(Duration::from_secs(60)))
        .layer(Extension(inside.clone()))
        .layer(Extension(barrier))
        .layer(Extension(manager(backend).await));
    let addr = serve(app).await;

    let same: Vec<_> = (0..20)
        .map(|_| tokio::spawn(request(addr, "POST", "/orders/1/pay", &[])))
        .collect();
    for reply in same {
        assert_eq!(reply.await.unwrap().status, 200);
    }
    assert_eq!(
        inside.max.load(Ordering::SeqCst),
        1,
        "two requests for one order overlapped"
    );

    let different: Vec<_> = (0..8)
        .map(|i| {
            tokio::spawn(async move {
                request(addr, "POST", &format!("/orders/{}/meet", 100 + i), &[]).await
            })
        })
        .collect();
    for reply in different {
        let reply = tokio::time::timeout(Duration::from_secs(30), reply)
            .await
            .expect("different orders run in parallel")
            .unwrap();
        assert_eq!(reply.status, 200);
    }
}

async fn disconnect_frees_the_lock(backend: BackendUnderTest) {
    let (slow, mut entered) = stalled();
    let app = Router::new()
        .route("/orders/{orderId}/slow", slow)
        .route("/orders/{orderId}/fast", post(|| async { "done" }))
        .route_layer(LockLayer::by_path_param("orderId").key_prefix("order:"))
        .layer(Extension(manager(backend).await));
    let addr = serve(app).await;
    let stream = send(addr, "POST", "/orders/9/slow", &[]).await;
    entered.recv().await.unwrap();
    drop(stream); // the client goes away mid-handler
                  // The lease is 30 s and the layer waits 10 s: a 200 shows the lock was freed promptly.
    let reply = request(addr, "POST", "/orders/9/fast", &[]).await;
    assert_eq!(reply.status, 200, "{reply:?}");
}

async fn busy_answers_409_with_retry_after(backend: BackendUnderTest) {
    let (route, mut holding) = holding("ok");
    let app = Router::new()
        .route("/orders/{orderId}", route)
        .route_layer(LockLayer::by_path_param("orderId").wait(Duration::from_millis(100)))
        .layer(Extension(manager(backend).await));
    let addr = serve(app).await;
    let first = tokio::spawn(request(addr, "POST", "/orders/5", &[]));
    holding.entered.recv().await.unwrap();
    let busy = request(addr, "POST", "/orders/5", &[]).await;
    assert_eq!(busy.status, 409);
    let retry_after: u64 = busy
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert_eq!(
        retry_after, 1,
        "the default hint, not the holder's lease (30 s under the watchdog)"
    );
    assert!(
        busy.body.contains("orderId:5"),
        "the body names the busy key: {}",
        busy.body
    );
    holding.release.notify_one();
    assert_eq!(first.await.unwrap().status, 200);
}

async fn busy_status_and_retry_after_are_selectable(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let app = Router::new()
        .route("/orders/{orderId}", post(|| async { "ok" }))
        .route_layer(
            LockLayer::by_path_param("orderId")
                .wait(Duration::ZERO)
                .busy_status(StatusCode::LOCKED)
                .busy_retry_after(Duration::from_millis(2500)),
        )
        .layer(Extension(locks.clone()));
    let _held = locks.lock("orderId:3").acquire().await.unwrap();
    let busy = app
        .clone()
        .oneshot(Request::post("/orders/3").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(busy.status(), StatusCode::LOCKED);
    assert_eq!(
        busy.headers()[http::header::RETRY_AFTER],
        "3",
        "whole seconds, rounded up"
    );
    assert_eq!(oneshot(&app, "POST", "/orders/4").await.0, StatusCode::OK);
}

async fn missing_keys_are_400(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let app = Router::new()
        .route("/webhook", post(|| async { "ok" }))
        .layer(LockLayer::by_header("Idempotency-Key"))
        .layer(Extension(locks.clone()));
    let (status, body) = oneshot(&app, "POST", "/webhook").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("header `idempotency-key`"), "{body}");

    // A route without the parameter, under `Router::layer`.
    let app = Router::new()
        .route("/orders/{orderId}", post(|| async { "ok" }))
        .route("/health", get(|| async { "up" }))
        .layer(LockLayer::by_path_param("orderId"))
        .layer(Extension(locks.clone()));
    let (status, body) = oneshot(&app, "GET", "/health").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("path parameter `orderId`"), "{body}");
    assert_eq!(oneshot(&app, "POST", "/orders/1").await.0, StatusCode::OK);

    // Unless the layer allows it.
    let app = Router::new()
        .route("/health", get(|| async { "up" }))
        .layer(LockLayer::by_path_param("orderId").allow_missing_key())
        .layer(Extension(locks.clone()));
    assert_eq!(oneshot(&app, "GET", "/health").await.0, StatusCode::OK);

    // Invalid values: empty header, too long.
    let app = Router::new()
        .route("/q", post(|| async { "ok" }))
        .layer(LockLayer::by_query("account"))
        .layer(Extension(locks.clone()));
    assert_eq!(
        oneshot(&app, "POST", "/q?account=").await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        oneshot(&app, "POST", "/q?account=%FF").await.0,
        StatusCode::BAD_REQUEST
    );
    let long = format!("/q?account={}", "x".repeat(2000));
    assert_eq!(
        oneshot(&app, "POST", &long).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        oneshot(&app, "POST", "/q?account=7").await.0,
        StatusCode::OK
    );
}

async fn no_manager_is_500_with_the_fix(_backend: BackendUnderTest) {
    let app = Router::new()
        .route("/orders/{orderId}", post(|| async { "ok" }))
        .route_layer(LockLayer::by_path_param("orderId"));
    let (status, body) = oneshot(&app, "POST", "/orders/1").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("Extension(lock_manager)"), "{body}");
    assert!(body.contains("LockLayer::manager"), "{body}");
}

async fn long_handler_keeps_the_lock(backend: BackendUnderTest) {
    let lease = Duration::from_millis(300);
    let builder = LockManager::builder()
        .lease(lease)
        .key_prefix(support::unique("long") + ":");
    let locks = backend.manager(builder).await;
    let log = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let app = Router::new()
        .route(
            "/orders/{orderId}/{step}",
            post(
                |Path((_, step)): Path<(String, String)>,
                 Extension(log): Extension<Arc<std::sync::Mutex<Vec<String>>>>,
                 Extension(held): Extension<HeldLock>| async move {
                    log.lock().unwrap().push(format!("{step} start"));
                    if step == "long" {
                        tokio::time::sleep(Duration::from_millis(1000)).await; // > 3 leases
                        assert!(!held.is_lost());
                    }
                    log.lock().unwrap().push(format!("{step} end"));
                    "ok"
                },
            ),
        )
        .route_layer(LockLayer::by_path_param("orderId").wait(Duration::from_secs(20)))
        .layer(Extension(log.clone()))
        .layer(Extension(locks));
    let first = tokio::spawn({
        let app = app.clone();
        async move { oneshot(&app, "POST", "/orders/1/long").await }
    });
    while log.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = oneshot(&app, "POST", "/orders/1/short").await;
    assert_eq!(first.await.unwrap().0, StatusCode::OK);
    assert_eq!(second.0, StatusCode::OK);
    assert_eq!(
        *log.lock().unwrap(),
        ["long start", "long end", "short start", "short end"],
        "the second request ran while the first held the lock"
    );
}

backend_suite!(
    [Memory, Redis, Postgres, MySql]
    one_key_at_a_time_other_keys_in_parallel,
    disconnect_frees_the_lock,
    busy_answers_409_with_retry_after,
    busy_status_and_retry_after_are_selectable,
    missing_keys_are_400,
    no_manager_is_500_with_the_fix,
    long_handler_keeps_the_lock,
);

#[tokio::test]
async fn unknown_paths_stay_404_under_router_layer() {
    let app = Router::new()
        .route("/orders/{orderId}", post(|| async { "ok" }))
        .layer(LockLayer::by_path_param("orderId"))
        .layer(Extension(LockManager::memory()));
    let (status, body) = oneshot(&app, "POST", "/nowhere").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}
