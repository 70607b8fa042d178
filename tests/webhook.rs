//! The webhook example driven with duplicate deliveries, on both backends.

mod support;

#[path = "../examples/webhook/replay.rs"]
#[allow(dead_code)]
mod replay;

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use http::{Request, StatusCode};
use replay::{Duplicates, Store};
use support::suite::{backend_suite, BackendUnderTest};
use tower::ServiceExt;
use tower_lock::LockManager;

async fn app(backend: BackendUnderTest, duplicates: Duplicates) -> (Router, replay::Processed) {
    let ttl = Duration::from_secs(60);
    let locks = backend.manager(LockManager::builder()).await;
    let store = match backend.url() {
        None => Store::memory(ttl),
        Some(url) => Store::redis(support::client(&url).await, ttl),
    };
    replay::app(locks, store, duplicates, "Idempotency-Key")
}

async fn deliver(app: &Router, key: Option<&str>, payload: &str) -> (StatusCode, bool, String) {
    let mut request = Request::post("/webhooks");
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from(payload.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let replayed = response.headers().get("idempotent-replayed").is_some();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        replayed,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

async fn concurrent_duplicates_are_processed_once(backend: BackendUnderTest) {
    let (app, processed) = app(backend, Duplicates::Wait(Duration::from_secs(20))).await;
    let key = support::unique("evt");
    let deliveries: Vec<_> = (0..8)
        .map(|_| {
            let (app, key) = (app.clone(), key.clone());
            tokio::spawn(async move { deliver(&app, Some(&key), r#"{"paid":1}"#).await })
        })
        .collect();
    let mut replays = 0;
    for delivery in deliveries {
        let (status, replayed, body) = delivery.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body, format!("processed delivery {key}\n"));
        replays += usize::from(replayed);
    }
    assert_eq!(
        processed.0.load(Ordering::SeqCst),
        1,
        "the event was handled once"
    );
    assert_eq!(replays, 7, "every duplicate got the stored response");

    // A redelivery after completion: replayed, not run again.
    let (status, replayed, _) = deliver(&app, Some(&key), r#"{"paid":1}"#).await;
    assert_eq!((status, replayed), (StatusCode::OK, true));
    assert_eq!(processed.0.load(Ordering::SeqCst), 1);

    // The same key with another payload: 422.
    let (status, _, body) = deliver(&app, Some(&key), r#"{"paid":2}"#).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(processed.0.load(Ordering::SeqCst), 1);

    // No key: 400.
    let (status, _, body) = deliver(&app, None, "{}").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

async fn duplicates_in_progress_get_409_when_rejecting(backend: BackendUnderTest) {
    let (app, processed) = app(backend, Duplicates::Reject).await;
    let key = support::unique("evt");
    let deliveries: Vec<_> = (0..8)
        .map(|_| {
            let (app, key) = (app.clone(), key.clone());
            tokio::spawn(async move { deliver(&app, Some(&key), "{}").await })
        })
        .collect();
    let mut in_progress = 0;
    for delivery in deliveries {
        let (status, replayed, body) = delivery.await.unwrap();
        match status {
            StatusCode::CONFLICT => in_progress += 1,
            StatusCode::OK => assert!(body.starts_with("processed"), "{body} {replayed}"),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(processed.0.load(Ordering::SeqCst), 1);
    assert!(
        in_progress >= 1,
        "a duplicate arrived while the first was running"
    );
}

/// Delivery ids built to reach into the other namespace (`done:X` once locked the key of
/// `X`'s record and its release deleted it; `X` was then processed again) keep their locks
/// and records apart.
async fn ids_built_to_collide_keep_locks_and_records_apart(backend: BackendUnderTest) {
    let (app, processed) = app(backend, Duplicates::Wait(Duration::from_secs(20))).await;
    let id = support::unique("evt");
    let ids = [
        id.clone(),
        format!("done:{id}"),
        format!("lock:{id}"),
        format!("lock:done:{id}"),
    ];
    // All at once: each runs (50 ms) while the others lock and store.
    let deliveries: Vec<_> = ids
        .iter()
        .cloned()
        .map(|id| {
            let app = app.clone();
            tokio::spawn(async move { deliver(&app, Some(&id), "{}").await })
        })
        .collect();
    for delivery in deliveries {
        let (status, replayed, body) = delivery.await.unwrap();
        assert_eq!((status, replayed), (StatusCode::OK, false), "{body}");
    }
    assert_eq!(processed.0.load(Ordering::SeqCst), ids.len());
    for id in &ids {
        let (status, replayed, body) = deliver(&app, Some(id), "{}").await;
        assert_eq!(
            (status, replayed),
            (StatusCode::OK, true),
            "`{id}` is replayed from its record: {body}"
        );
    }
    assert_eq!(
        processed.0.load(Ordering::SeqCst),
        ids.len(),
        "no delivery ran twice"
    );
}

backend_suite!(
    [Memory, Redis]
    concurrent_duplicates_are_processed_once,
    duplicates_in_progress_get_409_when_rejecting,
    ids_built_to_collide_keep_locks_and_records_apart
);
