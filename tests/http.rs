//! LockLayer and Locked<K> over HTTP, on both backends.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Path;
use axum::routing::{get, post};
use axum::{Extension, Router};
use http::{Request, StatusCode};
use support::http::{request, send, serve};
use tokio::sync::{mpsc, Barrier, Notify};
use tower::ServiceExt;
use tower_lock::{HeldLock, KeySource, LockLayer, LockManager, Lockable, Locked};

#[derive(Clone, Copy, Debug)]
enum Kind {
    Memory,
    Redis,
}

async fn manager(kind: Kind) -> LockManager {
    let builder = LockManager::builder().key_prefix(support::unique("http:") + ":");
    match kind {
        Kind::Memory => builder.memory(),
        Kind::Redis => builder.redis(&support::shared_redis_url()).await.unwrap(),
    }
}

use support::order::OrderId;

async fn oneshot(app: &Router, method: &str, uri: &str) -> (StatusCode, String) {
    let response = app
        .clone()
        .oneshot(
            Request::builder()
                .method(method)
                .uri(uri)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(Body::new(response.into_body()), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Tracks how many handlers run at once.
#[derive(Clone, Default)]
struct Inside {
    now: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
}

impl Inside {
    fn enter(&self) -> impl Drop + '_ {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        struct Leave<'a>(&'a AtomicUsize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        Leave(&self.now)
    }
}

async fn one_key_at_a_time_other_keys_in_parallel(kind: Kind) {
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
        .layer(Extension(manager(kind).await));
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

async fn disconnect_frees_the_lock(kind: Kind) {
    let (entered_tx, mut entered) = mpsc::unbounded_channel::<()>();
    let app = Router::new()
        .route(
            "/orders/{orderId}/slow",
            post(move || {
                let entered_tx = entered_tx.clone();
                async move {
                    let _ = entered_tx.send(());
                    std::future::pending::<()>().await;
                }
            }),
        )
        .route("/orders/{orderId}/fast", post(|| async { "done" }))
        .route_layer(LockLayer::by_path_param("orderId").key_prefix("order:"))
        .layer(Extension(manager(kind).await));
    let addr = serve(app).await;
    let stream = send(addr, "POST", "/orders/9/slow", &[]).await;
    entered.recv().await.unwrap();
    drop(stream); // the client goes away mid-handler
                  // The lease is 30 s and the layer waits 10 s: a 200 shows the lock was freed promptly.
    let reply = request(addr, "POST", "/orders/9/fast", &[]).await;
    assert_eq!(reply.status, 200, "{reply:?}");
}

async fn busy_answers_409_with_retry_after(kind: Kind) {
    let release = Arc::new(Notify::new());
    let (entered_tx, mut entered) = mpsc::unbounded_channel::<()>();
    let app = Router::new()
        .route(
            "/orders/{orderId}",
            post({
                let release = release.clone();
                move || {
                    let (release, entered_tx) = (release.clone(), entered_tx.clone());
                    async move {
                        let _ = entered_tx.send(());
                        release.notified().await;
                        "ok"
                    }
                }
            }),
        )
        .route_layer(LockLayer::by_path_param("orderId").wait(Duration::from_millis(100)))
        .layer(Extension(manager(kind).await));
    let addr = serve(app).await;
    let first = tokio::spawn(request(addr, "POST", "/orders/5", &[]));
    entered.recv().await.unwrap();
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
    release.notify_one();
    assert_eq!(first.await.unwrap().status, 200);
}

async fn busy_status_and_retry_after_are_selectable(kind: Kind) {
    let locks = manager(kind).await;
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

async fn missing_keys_are_400(kind: Kind) {
    let locks = manager(kind).await;
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

async fn no_manager_is_500_with_the_fix(_kind: Kind) {
    let app = Router::new()
        .route("/orders/{orderId}", post(|| async { "ok" }))
        .route_layer(LockLayer::by_path_param("orderId"));
    let (status, body) = oneshot(&app, "POST", "/orders/1").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("Extension(lock_manager)"), "{body}");
    assert!(body.contains("LockLayer::manager"), "{body}");
}

async fn placements_and_misplacement(kind: Kind) {
    let locks = manager(kind).await;
    let handler = |Extension(held): Extension<HeldLock>| async move { held.key().to_string() };
    let route_layer = Router::new()
        .route("/orders/{orderId}", post(handler))
        .route_layer(LockLayer::by_path_param("orderId"))
        .layer(Extension(locks.clone()));
    let (status, body) = oneshot(&route_layer, "POST", "/orders/11").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.ends_with("orderId:11"), "{body}");

    let layer = Router::new()
        .route("/orders/{orderId}", post(handler))
        .layer(LockLayer::by_path_param("orderId"))
        .layer(Extension(locks.clone()));
    let (status, body) = oneshot(&layer, "POST", "/orders/12").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.ends_with("orderId:12"), "{body}");

    // Around the whole app (before routing): a clear 500, never a silent pass-through.
    let inner = Router::new().route("/orders/{orderId}", post(handler));
    let outside = tower::ServiceBuilder::new()
        .layer(Extension(locks.clone()))
        .layer(LockLayer::by_path_param("orderId"))
        .service(inner);
    let response = outside
        .oneshot(Request::post("/orders/13").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body = axum::body::to_bytes(Body::new(response.into_body()), usize::MAX)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&body).contains("route_layer"));
}

async fn layer_and_extractor_share_the_lock(kind: Kind) {
    let app = Router::new()
        .route(
            "/orders/{orderId}/refund",
            post(
                |Locked(order): Locked<OrderId>, Extension(held): Extension<HeldLock>| async move {
                    assert_eq!(order.key(), held.key());
                    assert_eq!(order.guard().owner(), held.owner());
                    format!("refunded {}", order.0)
                },
            ),
        )
        .route_layer(LockLayer::for_key::<OrderId>().wait(Duration::from_millis(200)))
        .layer(Extension(manager(kind).await));
    let (status, body) = oneshot(&app, "POST", "/orders/77/refund").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "refunded 77"));
    // Released in full: the next request gets the lock at once.
    let (status, _) = oneshot(&app, "POST", "/orders/77/refund").await;
    assert_eq!(status, StatusCode::OK);
}

/// A layer given its own manager needs no `Extension` layer: extractors behind it find the
/// manager through the request's `HeldLock`, and on a request it runs unlocked, in the
/// extensions.
async fn layer_with_its_own_manager(kind: Kind) {
    let locks = manager(kind).await;
    #[derive(Debug)]
    struct Account(String);
    impl Lockable for Account {
        fn source() -> KeySource {
            KeySource::header("x-account")
        }
        fn parse(raw: &str) -> Result<Self, String> {
            Ok(Account(raw.to_owned()))
        }
        fn lock_name(&self) -> String {
            format!("account:{}", self.0)
        }
    }
    let app = Router::new()
        .route(
            "/orders/{orderId}/refund",
            post(
                |Locked(order): Locked<OrderId>,
                 account: Option<Locked<Account>>,
                 Extension(held): Extension<HeldLock>| async move {
                    // The same lock as the layer's, entered again; another one beside it.
                    assert_eq!(order.key(), held.key());
                    assert_eq!(order.guard().owner(), held.owner());
                    let account = account.map(|a| a.key().to_string());
                    format!("refunded {} {account:?}", order.0)
                },
            ),
        )
        .route_layer(
            LockLayer::for_key::<OrderId>()
                .wait(Duration::from_millis(200))
                .manager(locks.clone()),
        )
        .merge(
            Router::new()
                .route(
                    "/accounts",
                    post(
                        |Locked(account): Locked<Account>| async move { account.key().to_string() },
                    ),
                )
                .route_layer(
                    LockLayer::by_header("x-lock")
                        .allow_missing_key()
                        .manager(locks.clone()),
                ),
        );
    let send = |uri: &'static str, account: Option<&'static str>| {
        let app = app.clone();
        async move {
            let mut request = Request::post(uri);
            if let Some(account) = account {
                request = request.header("x-account", account);
            }
            let response = app
                .oneshot(request.body(Body::empty()).unwrap())
                .await
                .unwrap();
            let status = response.status();
            let body = axum::body::to_bytes(Body::new(response.into_body()), usize::MAX)
                .await
                .unwrap();
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
    let (status, body) = send("/orders/78/refund", None).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "refunded 78 None")
    );
    let (status, body) = send("/orders/79/refund", Some("a1")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.starts_with("refunded 79 Some(") && body.contains("account:a1"),
        "{body}"
    );
    // No `x-lock` header: the request runs unlocked, and its extractor still finds the
    // layer's manager.
    let (status, body) = send("/accounts", Some("a2")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.ends_with("account:a2"), "{body}");
    // Everything was released: the locks are free for the next request.
    let (status, _) = send("/orders/79/refund", Some("a1")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(locks.lock("order:79").try_acquire().await.is_ok());
}

async fn extractor_alone_and_optional(kind: Kind) {
    let locks = manager(kind).await;
    let app =
        Router::new()
            .route(
                "/orders/{orderId}",
                post(|Locked(order): Locked<OrderId>| async move {
                    format!("{} {}", order.0, order.key())
                }),
            )
            .route(
                "/maybe",
                post(
                    |order: Option<Locked<OrderId>>| async move { format!("{}", order.is_some()) },
                ),
            )
            .layer(Extension(locks.clone()));
    let (status, body) = oneshot(&app, "POST", "/orders/8").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.starts_with("8 ") && body.ends_with("order:8"),
        "{body}"
    );
    assert_eq!(
        oneshot(&app, "POST", "/maybe").await,
        (StatusCode::OK, "false".to_owned())
    );
    let (status, body) = oneshot(&app, "POST", "/orders/eight").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("not an order number"), "{body}");

    // Busy: the same 409 as the layer (the extractor waits the manager's wait).
    let quick = LockManager::builder().wait(Duration::from_millis(50));
    let quick = match kind {
        Kind::Memory => quick.memory(),
        Kind::Redis => quick.redis(&support::shared_redis_url()).await.unwrap(),
    };
    let app = Router::new()
        .route(
            "/orders/{orderId}",
            post(|Locked(_o): Locked<OrderId>| async { "ok" }),
        )
        .layer(Extension(quick.clone()));
    let name = format!("order:{}", 4242 + std::process::id() as u64);
    let id = name.trim_start_matches("order:").to_owned();
    let _held = quick.lock(&name).acquire().await.unwrap();
    let (status, body) = oneshot(&app, "POST", &format!("/orders/{id}")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

async fn long_handler_keeps_the_lock(kind: Kind) {
    let lease = Duration::from_millis(300);
    let builder = LockManager::builder()
        .lease(lease)
        .key_prefix(support::unique("long") + ":");
    let locks = match kind {
        Kind::Memory => builder.memory(),
        Kind::Redis => builder.redis(&support::shared_redis_url()).await.unwrap(),
    };
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

macro_rules! http_suite {
    ($($test:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() { super::$test(super::Kind::Memory).await }
            )*
        }
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() { super::$test(super::Kind::Redis).await }
            )*
        }
    };
}

http_suite!(
    one_key_at_a_time_other_keys_in_parallel,
    disconnect_frees_the_lock,
    busy_answers_409_with_retry_after,
    busy_status_and_retry_after_are_selectable,
    missing_keys_are_400,
    no_manager_is_500_with_the_fix,
    placements_and_misplacement,
    layer_and_extractor_share_the_lock,
    layer_with_its_own_manager,
    extractor_alone_and_optional,
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
