//! The layer when Redis fails: 503 while it is down, recovery without restarting the app,
//! fail-open, and the lost-lock policy.

mod support;

use std::time::Duration;

use axum::body::Body;
use axum::routing::post;
use axum::{Extension, Router};
use fred::prelude::KeysInterface;
use http::{Request, StatusCode};
use support::RedisServer;
use tokio::sync::mpsc;
use tower::ServiceExt;
use tower_lock::{HeldLock, LockLayer, LockManager};

async fn call(app: &Router, uri: &str) -> (StatusCode, Option<String>, String) {
    let response = app
        .clone()
        .oneshot(Request::post(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_owned());
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        retry_after,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_is_503_and_recovers_without_restart() {
    let mut server = RedisServer::start();
    let locks = LockManager::redis(&server.url()).await.unwrap();
    let app = Router::new()
        .route("/orders/{orderId}", post(|| async { "ok" }))
        .route_layer(LockLayer::by_path_param("orderId").wait(Duration::from_millis(500)))
        .layer(Extension(locks));
    assert_eq!(call(&app, "/orders/1").await.0, StatusCode::OK);

    server.stop();
    let (status, retry_after, body) = call(&app, "/orders/1").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert!(body.contains("unavailable"), "{body}");

    server.resume();
    // The same app (same manager) serves again once fred has reconnected.
    let mut last = None;
    for _ in 0..200 {
        let (status, _, body) = call(&app, "/orders/1").await;
        if status == StatusCode::OK {
            last = None;
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        last = Some(body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        last.is_none(),
        "no recovery after Redis came back: {last:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_runs_without_the_lock() {
    let mut server = RedisServer::start();
    let locks = LockManager::redis(&server.url()).await.unwrap();
    let app = Router::new()
        .route(
            "/orders/{orderId}",
            post(|held: Option<Extension<HeldLock>>| async move {
                format!("locked={}", held.is_some())
            }),
        )
        .route_layer(LockLayer::by_path_param("orderId").fail_open())
        .layer(Extension(locks));
    assert_eq!(call(&app, "/orders/1").await.2, "locked=true");
    server.stop();
    let (status, _, body) = call(&app, "/orders/1").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "locked=false"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_lock_policies() {
    let url = support::shared_redis_url();
    let admin = support::client(&url).await;
    let prefix = support::unique("lost") + ":";
    let lease = Duration::from_millis(300);
    let locks = LockManager::builder()
        .lease(lease)
        .key_prefix(prefix.clone())
        .redis(&url)
        .await
        .unwrap();
    let (entered_tx, mut entered) = mpsc::unbounded_channel::<()>();
    let handler = move |Extension(held): Extension<HeldLock>| {
        let entered_tx = entered_tx.clone();
        async move {
            let _ = entered_tx.send(());
            held.loss().lost().await;
            "finished after the loss"
        }
    };
    // Default: keep going, the handler sees the loss.
    let keep = Router::new()
        .route("/orders/{orderId}", post(handler.clone()))
        .route_layer(LockLayer::by_path_param("orderId"))
        .layer(Extension(locks.clone()));
    let request = tokio::spawn({
        let keep = keep.clone();
        async move { call(&keep, "/orders/1").await }
    });
    entered.recv().await.unwrap();
    let _: i64 = admin.del(format!("{prefix}orderId:1")).await.unwrap();
    let (status, _, body) = request.await.unwrap();
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "finished after the loss")
    );

    // Abort: the handler's future is dropped and the client gets a 503.
    let abort = Router::new()
        .route(
            "/orders/{orderId}",
            post(std::future::pending::<&'static str>),
        )
        .route_layer(LockLayer::by_path_param("orderId").abort_on_lost())
        .layer(Extension(locks.clone()));
    let request = tokio::spawn({
        let abort = abort.clone();
        async move { call(&abort, "/orders/2").await }
    });
    let key = format!("{prefix}orderId:2");
    loop {
        let deleted: i64 = admin.del(&key).await.unwrap();
        if deleted == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let (status, retry_after, body) = tokio::time::timeout(Duration::from_secs(10), request)
        .await
        .expect("the aborted request is answered")
        .unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(retry_after.is_some());
    assert!(body.contains("was lost"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_while_held_follows_the_lost_lock_policy() {
    let mut server = RedisServer::start();
    let locks = LockManager::builder()
        .lease(Duration::from_millis(600))
        .redis(&server.url())
        .await
        .unwrap();
    let (entered_tx, mut entered) = mpsc::unbounded_channel::<()>();
    let app = Router::new()
        .route(
            "/orders/{orderId}/slow",
            post(move || {
                let entered_tx = entered_tx.clone();
                async move {
                    let _ = entered_tx.send(());
                    std::future::pending::<&'static str>().await
                }
            }),
        )
        .route("/orders/{orderId}", post(|| async { "ok" }))
        .route_layer(LockLayer::by_path_param("orderId").abort_on_lost())
        .layer(Extension(locks));
    let request = tokio::spawn({
        let app = app.clone();
        async move { call(&app, "/orders/1/slow").await }
    });
    entered.recv().await.unwrap();
    // Redis restarts empty: the next renewal finds the lock gone.
    server.stop();
    server.resume();
    let (status, _, body) = tokio::time::timeout(Duration::from_secs(20), request)
        .await
        .expect("the request is answered")
        .unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("was lost"), "{body}");
    // New requests succeed once Redis is back, without restarting the app.
    let mut last = String::new();
    for _ in 0..200 {
        let (status, _, body) = call(&app, "/orders/1").await;
        if status == StatusCode::OK {
            return;
        }
        last = body;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no recovery after the restart: {last}");
}
