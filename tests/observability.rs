//! What tower-lock reports: spans for acquire, hold and release under the target
//! `tower_lock`, and warnings that a down backend repeats at most once per period.

mod support;

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Request, StatusCode};
use support::suite::{backend_suite, BackendUnderTest};
use support::trace::Capture;
use tower::ServiceExt;
use tower_lock::layer::LockLayer;
use tower_lock::lock::Released;
use tower_lock::LockManager;
use tracing::Instrument;

/// One acquisition of each outcome, the hold and its release, as spans: the acquisition's
/// span and the hold's sit in the caller's span, the release's in the hold's, which closes
/// with the last release.
async fn spans_trace_acquire_hold_and_release(backend: BackendUnderTest) {
    let capture = Capture::global();
    let locks = backend.manager(LockManager::builder()).await;
    let name = support::unique("traced");
    let request = tracing::info_span!("request");
    let request_id = request
        .id()
        .expect("the capture enables every span")
        .into_u64();

    let guard = locks
        .lock(&name)
        .acquire()
        .instrument(request.clone())
        .await
        .unwrap();
    assert!(locks.lock(&name).try_acquire().await.is_err());
    let timed_out = locks
        .lock(&name)
        .wait(Duration::from_millis(20))
        .acquire()
        .await;
    assert!(timed_out.is_err());
    let waiter = support::spawn_waiter(&locks, &name, Duration::from_secs(30));
    while locks.waiting(&name) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    let again = guard.reenter().await.unwrap();
    assert_eq!(again.release().await.unwrap(), Released::StillHeld);
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);

    let acquires = capture.spans("acquire", &name);
    let outcomes: Vec<&str> = acquires
        .iter()
        .map(|s| s.fields["outcome"].as_str())
        .collect();
    assert_eq!(
        outcomes,
        ["acquired", "busy", "timed_out", "cancelled", "acquired"],
        "{acquires:#?}"
    );
    for span in &acquires {
        assert_eq!(span.target, "tower_lock");
        assert_eq!(span.fields["kind"], "plain");
        assert!(span.fields.contains_key("waited_ms"), "{span:?}");
        assert!(span.fields.contains_key("wait_ms"), "{span:?}");
    }
    assert_eq!(acquires[0].parent, Some(request_id), "in the caller's span");

    let holds = capture.spans("hold", &name);
    assert_eq!(holds.len(), 1, "one hold, entered twice: {holds:#?}");
    let hold = &holds[0];
    assert_eq!(hold.target, "tower_lock");
    assert_eq!(hold.parent, Some(request_id), "in the caller's span");
    assert!(hold.fields.contains_key("owner"));
    assert!(
        capture.span(hold.id).unwrap().closed,
        "the hold's span closes with the last release"
    );

    let releases = capture.children(hold.id);
    let outcomes: Vec<&str> = releases
        .iter()
        .map(|s| s.fields["outcome"].as_str())
        .collect();
    assert_eq!(outcomes, ["still_held", "unlocked"], "{releases:#?}");
    assert!(!releases[0].fields.contains_key("held_ms"));
    assert!(
        releases[1].fields.contains_key("held_ms"),
        "the last says how long"
    );
    assert!(releases
        .iter()
        .all(|s| s.name == "release" && s.target == "tower_lock"));
}

backend_suite!([Memory, Redis] spans_trace_acquire_hold_and_release);

/// With Redis unreachable every request is a 503, but the warning about it is logged once
/// per period (10 s), carrying how many were left out, not once per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_backend_warns_once_per_period_not_per_request() {
    const PERIOD: Duration = Duration::from_secs(10);
    let capture = Capture::global();
    let unreachable = format!("redis://127.0.0.1:{}", support::free_port());
    let locks = LockManager::builder()
        .redis_lazy(&unreachable)
        .await
        .unwrap();
    let app = Router::new()
        .route("/orders/{orderId}", post(|| async { "ok" }))
        .route_layer(LockLayer::by_path_param("orderId").manager(locks));
    let started = Instant::now();
    for order in 0..50 {
        let request = Request::post(format!("/orders/{order}"))
            .body(Body::empty())
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    let periods = (started.elapsed().as_secs_f64() / PERIOD.as_secs_f64()).ceil() as usize;
    let warnings = capture.events("answering 503");
    assert!(
        !warnings.is_empty() && warnings.len() <= periods.max(1),
        "{} warnings for 50 refused requests in {:?}",
        warnings.len(),
        started.elapsed()
    );
    let first = &warnings[0];
    assert_eq!(first.target, "tower_lock");
    assert_eq!(first.level, tracing::Level::WARN);
    assert_eq!(
        first.fields["left_out"], "0",
        "the first of a period says none were left out"
    );
}

/// A force-unlock is a warning that names the key, who asked, and what it freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlock_is_logged_with_who_asked() {
    let capture = Capture::global();
    let locks = LockManager::memory();
    let name = support::unique("forced");
    let _guard = locks.lock(&name).acquire().await.unwrap();
    locks.force_unlock(&name, "bob (on call)").await.unwrap();
    let key = locks.key(&name).unwrap();
    let events = capture.events("force-unlocked");
    let event = events
        .iter()
        .find(|event| event.fields.get("key").map(String::as_str) == Some(key.as_str()))
        .expect("the force-unlock's warning");
    assert_eq!(event.level, tracing::Level::WARN);
    assert_eq!(event.fields["asked_by"], "bob (on call)");
    assert_eq!(event.fields["kind"], "lock");
    assert_eq!(event.fields["freed"], "1");
}
