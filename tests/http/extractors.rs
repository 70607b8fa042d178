//! The extractors: where they find the lock and the manager, and how they share the layer's hold.

use std::time::Duration;

use axum::body::Body;
use axum::extract::FromRef;
use axum::routing::post;
use axum::{Extension, Router};
use http::{Request, StatusCode};
use tower::ServiceExt;
use tower_lock::extract::{HeldLock, KeySource, LockManagerState, Lockable, Locked};
use tower_lock::layer::LockLayer;
use tower_lock::LockManager;

use crate::helpers::{manager, oneshot, respond};
use crate::support;
use crate::support::order::OrderId;
use crate::support::suite::{backend_suite, BackendUnderTest};

async fn placements_and_misplacement(backend: BackendUnderTest) {
    let locks = manager(backend).await;
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

async fn layer_and_extractor_share_the_lock(backend: BackendUnderTest) {
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
        .layer(Extension(manager(backend).await));
    let (status, body) = oneshot(&app, "POST", "/orders/77/refund").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "refunded 77"));
    // Released in full: the next request gets the lock at once.
    let (status, _) = oneshot(&app, "POST", "/orders/77/refund").await;
    assert_eq!(status, StatusCode::OK);
}

/// A layer given its own manager needs no `Extension` layer: extractors behind it find the
/// manager through the request's `HeldLock`, and on a request it runs unlocked, in the
/// extensions.
async fn layer_with_its_own_manager(backend: BackendUnderTest) {
    let locks = manager(backend).await;
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
            respond(&app, request.body(Body::empty()).unwrap()).await
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

async fn extractor_alone_and_optional(backend: BackendUnderTest) {
    let locks = manager(backend).await;
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
    let quick = backend.manager(quick).await;
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

/// A router state holding a manager, found through `FromRef`.
#[derive(Clone)]
struct WithManager {
    locks: LockManager,
}

impl FromRef<WithManager> for LockManager {
    fn from_ref(state: &WithManager) -> LockManager {
        state.locks.clone()
    }
}

/// A router state without a manager, which says so.
#[derive(Clone)]
struct WithoutManager;

impl LockManagerState for WithoutManager {
    fn lock_manager(&self) -> Option<LockManager> {
        None
    }
}

/// With no extension and no layer's lock, `Locked<K>` finds the manager in the router's
/// state; an extension, when present, comes first. A state without one answers the 500
/// that names the fixes.
async fn the_manager_is_found_in_the_state(backend: BackendUnderTest) {
    let handler = |Locked(order): Locked<OrderId>| async move { order.key().to_string() };
    let in_state = manager(backend).await;
    let app = Router::new()
        .route("/orders/{orderId}", post(handler))
        .with_state(WithManager {
            locks: in_state.clone(),
        });
    let (status, body) = oneshot(&app, "POST", "/orders/5").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, in_state.key("order:5").unwrap().to_string());

    // The state's manager is the one that excludes.
    let quick = LockManager::builder()
        .key_prefix(support::unique("state") + ":")
        .wait(Duration::from_millis(50));
    let quick = backend.manager(quick).await;
    let app_quick = Router::new()
        .route("/orders/{orderId}", post(handler))
        .with_state(WithManager {
            locks: quick.clone(),
        });
    let held = quick.lock("order:6").acquire().await.unwrap();
    let (status, body) = oneshot(&app_quick, "POST", "/orders/6").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    drop(held);

    // An extension comes before the state.
    let in_extension = manager(backend).await;
    let app = Router::new()
        .route("/orders/{orderId}", post(handler))
        .layer(Extension(in_extension.clone()))
        .with_state(WithManager {
            locks: in_state.clone(),
        });
    let (status, body) = oneshot(&app, "POST", "/orders/5").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, in_extension.key("order:5").unwrap().to_string());

    // A state without a manager: the extension, or the 500 naming the fixes.
    let without = Router::new()
        .route("/orders/{orderId}", post(handler))
        .with_state(WithoutManager);
    let (status, body) = oneshot(&without, "POST", "/orders/5").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert!(body.contains("FromRef"), "{body}");
    let with_extension = without.layer(Extension(in_state.clone()));
    let (status, body) = oneshot(&with_extension, "POST", "/orders/5").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, in_state.key("order:5").unwrap().to_string());
}

backend_suite!(
    [Memory, Redis, Postgres]
    placements_and_misplacement,
    layer_and_extractor_share_the_lock,
    layer_with_its_own_manager,
    extractor_alone_and_optional,
    the_manager_is_found_in_the_state,
);
