//! Semaphores over real HTTP: `LockLayer::semaphore(n)` lets at most n requests of one
//! key run at once, answers 429 with `Retry-After` when the wait ends, releases before
//! the response goes out and when a request is dropped; `Permit<K>` does the same in a
//! handler and shares the layer's permit; an invalid limit is a 500 that names the fix.

use std::time::Duration;

use axum::{Extension, Router};
use http::StatusCode;
use tower_lock::extract::{KeySource, Limited, Lockable, Permit};
use tower_lock::layer::LockLayer;
use tower_lock::lock::Released;

use crate::helpers::{manager, oneshot};
use crate::support;
use crate::support::http::{holding, request, send, serve, stalled};
use crate::support::suite::{backend_suite, BackendUnderTest};

/// A tenant from the path; two exports of one tenant at once.
struct Tenant(String);

impl Lockable for Tenant {
    fn source() -> KeySource {
        KeySource::path("tenant")
    }
    fn parse(raw: &str) -> Result<Self, String> {
        Ok(Tenant(raw.to_owned()))
    }
    fn lock_name(&self) -> String {
        format!("exports:{}", self.0)
    }
}

impl Limited for Tenant {
    fn limit() -> u32 {
        2
    }
}

/// A limit of 0: a mistake in the code, answered 500.
struct Misconfigured;

impl Lockable for Misconfigured {
    fn source() -> KeySource {
        KeySource::path("tenant")
    }
    fn parse(_: &str) -> Result<Self, String> {
        Ok(Misconfigured)
    }
    fn lock_name(&self) -> String {
        "misconfigured".to_owned()
    }
}

impl Limited for Misconfigured {
    fn limit() -> u32 {
        0
    }
}

async fn the_layer_lets_in_the_limit_and_answers_429(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (route, mut holding) = holding("exported");
    let tenant = support::unique("tenant");
    let app = Router::new()
        .route("/tenants/{tenant}/exports", route)
        .route_layer(
            LockLayer::by_path_param("tenant")
                .semaphore(2)
                .wait(Duration::from_millis(50))
                .busy_retry_after(Duration::from_secs(3)),
        )
        .layer(Extension(locks.clone()));
    let addr = serve(app).await;
    let path = format!("/tenants/{tenant}/exports");
    let first = send(addr, "POST", &path, &[]).await;
    let second = send(addr, "POST", &path, &[]).await;
    holding.entered.recv().await.unwrap();
    holding.entered.recv().await.unwrap();
    // Both permits are in use: the third request waits 50 ms, then gets 429.
    let third = request(addr, "POST", &path, &[]).await;
    assert_eq!(third.status, 429, "{}", third.body);
    assert_eq!(third.header("retry-after"), Some("3"));
    assert!(
        third.body.contains("all 2 permits are in use"),
        "{}",
        third.body
    );
    // Another tenant has permits of its own.
    let other = format!("/tenants/{}/exports", support::unique("other"));
    let stream = send(addr, "POST", &other, &[]).await;
    holding.entered.recv().await.unwrap();
    for _ in 0..3 {
        holding.release.notify_one();
    }
    for stream in [first, second, stream] {
        let reply = support::http::read(stream).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    // Released before the responses went out: both permits are free again.
    let usage = locks
        .semaphore_usage(&format!("tenant:{tenant}"))
        .await
        .unwrap();
    assert_eq!((usage.limit, usage.in_use), (Some(2), 0));
}

async fn a_dropped_request_gives_its_permit_back(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (route, mut entered) = stalled();
    let tenant = support::unique("tenant");
    let app = Router::new()
        .route("/tenants/{tenant}/exports", route)
        .route_layer(LockLayer::by_path_param("tenant").semaphore(1))
        .layer(Extension(locks.clone()));
    let addr = serve(app).await;
    let path = format!("/tenants/{tenant}/exports");
    let stream = send(addr, "POST", &path, &[]).await;
    entered.recv().await.unwrap();
    let name = format!("tenant:{tenant}");
    assert_eq!(locks.semaphore_usage(&name).await.unwrap().in_use, 1);
    drop(stream);
    // The client went away: the next request gets the permit (it waits for the
    // background release, by the semaphore's notice, within the default wait).
    let next = send(addr, "POST", &path, &[]).await;
    entered.recv().await.unwrap();
    // With limit 1, `next` running means the dropped request's permit came back.
    drop(next);
    // And so does `next`'s: a waiter gets it when its background release lands.
    let after = locks.semaphore(&name, 1).acquire().await.unwrap();
    assert_eq!(after.release().await.unwrap(), Released::Unlocked);
}

async fn the_extractor_takes_and_shares_permits(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let alone = |tenant: Permit<Tenant>| async move {
        let kind = tenant.guard().kind();
        assert!(matches!(kind, tower_lock::lock::LockKind::Semaphore(p) if p.limit() == 2));
        tenant.guard().permit_ids().len().to_string()
    };
    let app = Router::new()
        .route("/alone/{tenant}", axum::routing::get(alone))
        .route(
            "/bad/{tenant}",
            axum::routing::get(|_: Permit<Misconfigured>| async { "never" }),
        )
        .layer(Extension(locks.clone()));
    let tenant = support::unique("t");
    let (status, body) = oneshot(&app, "GET", &format!("/alone/{tenant}")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "1"));
    let (status, body) = oneshot(&app, "GET", "/bad/x").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("at least 1 permit"), "{body}");
    // Two permits held by another process: the extractor waits (the manager's wait),
    // then answers 429.
    let name = format!("exports:{tenant}");
    let waiting = backend
        .manager(tower_lock::LockManager::builder().wait(Duration::from_millis(30)))
        .await;
    let held = [
        waiting.semaphore(&name, 2).acquire().await.unwrap(),
        waiting.semaphore(&name, 2).acquire().await.unwrap(),
    ];
    let app_waiting = Router::new()
        .route("/alone/{tenant}", axum::routing::get(alone))
        .layer(Extension(waiting.clone()));
    let (status, body) = oneshot(&app_waiting, "GET", &format!("/alone/{tenant}")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(body.contains("all 2 permits are in use"), "{body}");
    for guard in held {
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
    let name = format!("exports:{tenant}");
    // Under a semaphore layer of the same key and limit, the extractor shares its permit.
    let shared = |tenant: Permit<Tenant>| async move { tenant.guard().permit_ids().join(",") };
    let app = Router::new()
        .route("/shared/{tenant}", axum::routing::get(shared))
        .route_layer(LockLayer::for_key::<Tenant>().semaphore(2))
        .layer(Extension(locks.clone()));
    let (status, body) = oneshot(&app, "GET", &format!("/shared/{tenant}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(locks.semaphore_usage(&name).await.unwrap().in_use, 0);
    // A layer of another limit: 500, naming the fix.
    let app = Router::new()
        .route("/shared/{tenant}", axum::routing::get(shared))
        .route_layer(LockLayer::for_key::<Tenant>().semaphore(3))
        .layer(Extension(locks.clone()));
    let (status, body) = oneshot(&app, "GET", &format!("/shared/{tenant}")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("the same limit and count"), "{body}");
    // An invalid layer limit: 500, naming the fix.
    let app = Router::new()
        .route("/shared/{tenant}", axum::routing::get(|| async { "never" }))
        .route_layer(LockLayer::for_key::<Tenant>().semaphore(0))
        .layer(Extension(locks));
    let (status, body) = oneshot(&app, "GET", &format!("/shared/{tenant}")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("LockLayer::semaphore"), "{body}");
}

backend_suite!(
    [Memory, Redis]
    the_layer_lets_in_the_limit_and_answers_429,
    a_dropped_request_gives_its_permit_back,
    the_extractor_takes_and_shares_permits,
);
