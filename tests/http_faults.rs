//! The layer when Redis fails: 503 while it is down, recovery without restarting the app,
//! fail-open, and the lost-lock policy; the multi-key layer through an outage.

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
use tower_lock::extract::HeldLock;
use tower_lock::layer::LockLayer;
use tower_lock::LockManager;

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

/// New requests succeed once Redis is back, without restarting the app.
async fn serves_again(app: &Router, uri: &str) {
    support::eventually("the app serves again once Redis is back", || async {
        (call(app, uri).await.0 == StatusCode::OK).then_some(())
    })
    .await;
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

/// With an explicit lease, `abort_on_lost` aborts the handler when the lease ends (a
/// margin before it): nothing renews it, and the handler must not run on unprotected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_lease_that_ends_aborts_under_abort_on_lost() {
    let locks = LockManager::redis(&support::shared_redis_url())
        .await
        .unwrap();
    let app = Router::new()
        .route(
            "/orders/{orderId}",
            post(std::future::pending::<&'static str>),
        )
        .route_layer(
            LockLayer::by_path_param("orderId")
                .fixed_lease(Duration::from_millis(300))
                .abort_on_lost(),
        )
        .layer(Extension(locks));
    let uri = format!("/orders/{}", support::unique("explicit"));
    let (status, _, body) = tokio::time::timeout(Duration::from_secs(10), call(&app, &uri))
        .await
        .expect("the handler is aborted once its lease ends");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
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
    let (slow, mut entered) = support::http::stalled();
    let app = Router::new()
        .route("/orders/{orderId}/slow", slow)
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
    serves_again(&app, "/orders/1").await;
}

/// Redis is killed under load. Requests sent after that get a 503 at once (they used to
/// wait the command time limit, or queue behind the reconnect and get a 200 once Redis
/// was back), and a request that was waiting behind a holder when Redis went away gets a
/// 503 when its wait ends, not a 409. Then the same app serves again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_answered_with_503_at_once() {
    const COMMAND_LIMIT: Duration = Duration::from_secs(30);
    const PROMPT: Duration = Duration::from_secs(2);
    let mut server = RedisServer::start();
    let backend = tower_lock::backend::RedisBackend::connect(&server.url())
        .await
        .unwrap()
        .command_timeout(COMMAND_LIMIT);
    let locks = LockManager::builder().backend(backend);
    let (hold_route, mut holding) = support::http::holding("held");
    let app = Router::new()
        .route("/orders/{orderId}/hold", hold_route)
        .route("/orders/{orderId}", post(|| async { "ok" }))
        .route_layer(
            LockLayer::by_path_param("orderId")
                .wait(Duration::from_secs(3))
                .manager(locks.clone()),
        );
    let holder = tokio::spawn({
        let app = app.clone();
        async move { call(&app, "/orders/1/hold").await }
    });
    holding.entered.recv().await.unwrap();
    let waiting = tokio::spawn({
        let app = app.clone();
        async move { call(&app, "/orders/1").await }
    });
    support::eventually("a request waits behind the holder", || async {
        (locks.waiting("orderId:1") == 1).then_some(())
    })
    .await;

    // Load: clients sending requests for many orders, one after the other.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..16)
        .map(|client| {
            let (app, stop) = (app.clone(), stop.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let mut order = 2 + client * 1000;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    order += 1;
                    let sent = tokio::time::Instant::now();
                    let (status, _, _) = call(&app, &format!("/orders/{order}")).await;
                    answers.push((sent, sent.elapsed(), status));
                    // A 503 is answered without waiting on anything: let the others run.
                    tokio::task::yield_now().await;
                }
                answers
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.stop();
    let gone = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (mut after, mut in_flight) = (Vec::new(), Duration::ZERO);
    for client in clients {
        let answers = tokio::time::timeout(COMMAND_LIMIT / 2, client)
            .await
            .expect("every client's last request is answered")
            .unwrap();
        for (sent, took, status) in answers {
            if sent >= gone {
                after.push((took, status));
            } else if sent + took > gone {
                // On its way when Redis went away.
                in_flight = in_flight.max(took);
            }
        }
    }
    println!("slowest request on its way as Redis went away: {in_flight:?}");
    assert!(in_flight < PROMPT, "not held until the command time limit");
    assert!(
        after.len() > 100,
        "load during the outage ({})",
        after.len()
    );
    assert!(
        after
            .iter()
            .all(|(_, status)| *status == StatusCode::SERVICE_UNAVAILABLE),
        "every request sent during the outage is a 503"
    );
    let mut took: Vec<Duration> = after.iter().map(|(took, _)| *took).collect();
    took.sort();
    let p = |q: f64| took[((took.len() - 1) as f64 * q) as usize];
    println!(
        "503s during the outage: {} answered, p50 {:?}, p99 {:?}, max {:?}",
        took.len(),
        p(0.5),
        p(0.99),
        p(1.0)
    );
    assert!(p(1.0) < PROMPT, "answered without waiting for Redis");

    let (status, _, body) = tokio::time::timeout(PROMPT * 3, waiting)
        .await
        .expect("the waiting request is answered when its wait ends")
        .unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "not busy: {body}");

    server.resume();
    holding.release.notify_one();
    let _ = holder.await;
    serves_again(&app, "/orders/1").await;
}

/// The multi-key layer when Redis fails. Stopped while a transfer runs: the response still
/// goes out while Redis is down (the releases go on in the background). Restarted empty
/// while a transfer runs under `abort_on_lost`: the transfer is stopped with a 503. Then the
/// same app serves again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_multi_key_layer_through_an_outage() {
    let mut server = RedisServer::start();
    let locks = LockManager::builder()
        .lease(Duration::from_millis(600))
        .redis(&server.url())
        .await
        .unwrap();
    let accounts = || LockLayer::by_path_params("account:", ["from", "to"]);
    let (hold_route, mut holding) = support::http::holding("moved");
    let (slow, mut entered) = support::http::stalled();
    let app = Router::new()
        .route("/transfers/{from}/{to}/hold", hold_route)
        .route("/transfers/{from}/{to}", post(|| async { "ok" }))
        .route_layer(accounts().manager(locks.clone()))
        .merge(
            Router::new()
                .route("/transfers/{from}/{to}/slow", slow)
                .route_layer(accounts().abort_on_lost().manager(locks.clone())),
        );

    let request = tokio::spawn({
        let app = app.clone();
        async move { call(&app, "/transfers/1/2/hold").await }
    });
    holding.entered.recv().await.unwrap();
    server.stop();
    holding.release.notify_one();
    let (status, _, body) = request.await.unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::OK, "moved"));
    server.resume();
    serves_again(&app, "/transfers/1/2").await;

    let request = tokio::spawn({
        let app = app.clone();
        async move { call(&app, "/transfers/2/1/slow").await }
    });
    entered.recv().await.unwrap();
    // Redis restarts empty: the next renewal of either account finds it gone.
    server.stop();
    server.resume();
    let (status, _, body) = request.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("was lost"), "{body}");
    serves_again(&app, "/transfers/2/1").await;
}
