//! The idempotency layer under faults, on a Redis of its own: a first request that loses
//! its claim while its handler runs stores nothing over the newer request's response; a
//! Redis restart mid-handler; Redis down (503 at once, or through with `fail_open`).

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use fred::prelude::*;
use tower_lock::idempotency::IdempotencyLayer;
use tower_lock::LockManager;

use crate::app::{self, post, Handlers};
use crate::support::{self, RedisServer};

/// The idempotency locks in Redis now (`idempotency:{…}`).
async fn claims(redis: &Client) -> Vec<String> {
    let keys: Vec<String> = redis
        .custom(fred::cmd!("KEYS"), vec!["idempotency:*"])
        .await
        .unwrap();
    keys
}

/// The first request's lock is deleted while its handler runs; a second request with the
/// key runs and stores its response; the first, finishing later, stores nothing over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_lost_its_claim_stores_nothing() {
    let server = RedisServer::start();
    let redis = support::client(&server.url()).await;
    let locks = LockManager::redis(&server.url()).await.unwrap();
    let (handlers, gate) = Handlers::new(true);
    let layer = IdempotencyLayer::new().manager(locks.clone());
    let addr = app::serve(app::app(&handlers, layer)).await;
    let first = tokio::spawn(async move { post(addr, "/orders", "lost", "first").await });
    handlers.until_started(1).await;
    let claimed = claims(&redis).await;
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    let _: i64 = redis.del(&claimed[0]).await.unwrap();
    let second = tokio::spawn(async move { post(addr, "/orders", "lost", "second").await });
    handlers.until_started(2).await;
    gate.open();
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(
        first.status,
        StatusCode::CREATED,
        "the first client is answered"
    );
    assert_eq!(second.status, StatusCode::CREATED);
    // The stored response is the second's: a repetition of the second is replayed, one of
    // the first is a mismatch (it would be replayed had the first overwritten it).
    let again = post(addr, "/orders", "lost", "second").await;
    assert!(again.replayed() && again.same_as(&second), "{again:?}");
    let first_again = post(addr, "/orders", "lost", "first").await;
    assert_eq!(first_again.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(handlers.runs(), 2);
}

/// Redis restarts (empty) while a handler runs: the client still gets its answer; the
/// claim and the store are gone with the restart, so a retry runs the handler again
/// (at-least-once across a Redis restart without persistence).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_mid_handler_answers_and_runs_again_on_retry() {
    let mut server = RedisServer::start();
    let locks = LockManager::redis(&server.url()).await.unwrap();
    let (handlers, gate) = Handlers::new(true);
    let layer = IdempotencyLayer::new().manager(locks.clone());
    let addr = app::serve(app::app(&handlers, layer)).await;
    let first = tokio::spawn(async move { post(addr, "/orders", "restart", "x").await });
    handlers.until_started(1).await;
    tokio::task::block_in_place(|| {
        server.stop();
        server.resume();
    });
    gate.open();
    let first = first.await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED);
    let retry = support::eventually("Redis is back", || async {
        let retry = post(addr, "/orders", "restart", "x").await;
        (retry.status != StatusCode::SERVICE_UNAVAILABLE).then_some(retry)
    })
    .await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert!(!retry.replayed(), "nothing was stored across the restart");
    assert_eq!(handlers.runs(), 2);
}

/// Redis restarts (empty) while a handler runs and a duplicate waits for it: the duplicate
/// finds the key free once Redis is back and runs the handler while the first still runs
/// (the restart wiped the claim); the first's late store is refused (its lock is gone), and
/// the duplicate's response is the one stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_lets_a_waiting_duplicate_run_beside_the_first() {
    let mut server = RedisServer::start();
    let locks = LockManager::redis(&server.url()).await.unwrap();
    let (handlers, gate) = Handlers::new(true);
    let layer = IdempotencyLayer::new()
        .manager(locks.clone())
        .wait(Duration::from_secs(20));
    let addr = app::serve(app::app(&handlers, layer)).await;
    let first = tokio::spawn(async move { post(addr, "/orders", "twice", "x").await });
    handlers.until_started(1).await;
    let duplicate = tokio::spawn(async move { post(addr, "/orders", "twice", "x").await });
    support::eventually("the duplicate waits", || async {
        (locks.stats().waiters == 1).then_some(())
    })
    .await;
    tokio::task::block_in_place(|| {
        server.stop();
        server.resume();
    });
    // Both handlers run at once: the gate holds the first while the duplicate starts.
    handlers.until_started(2).await;
    gate.open();
    let (first, duplicate) = (first.await.unwrap(), duplicate.await.unwrap());
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(duplicate.status, StatusCode::CREATED);
    assert!(!duplicate.replayed(), "it ran the handler itself");
    let again = post(addr, "/orders", "twice", "x").await;
    assert!(again.replayed(), "{again:?}");
    assert!(
        again.same_as(&duplicate),
        "the duplicate's response is stored, not the first's late one"
    );
    assert_eq!(handlers.runs(), 2);
}

/// Redis down: a 503 with `Retry-After` at once; with `fail_open`, the request runs
/// unprotected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_is_503_at_once_or_through_with_fail_open() {
    let mut server = RedisServer::start();
    let locks = LockManager::redis(&server.url()).await.unwrap();
    let (handlers, _) = Handlers::new(false);
    let strict = app::serve(app::app(
        &handlers,
        IdempotencyLayer::new().manager(locks.clone()),
    ))
    .await;
    let open = app::serve(app::app(
        &handlers,
        IdempotencyLayer::new().manager(locks.clone()).fail_open(),
    ))
    .await;
    server.stop();
    let answer = support::eventually("the client sees Redis down", || async {
        let started = Instant::now();
        let answer = post(strict, "/orders", "down", "x").await;
        (answer.status == StatusCode::SERVICE_UNAVAILABLE
            && started.elapsed() < Duration::from_secs(2))
        .then_some(answer)
    })
    .await;
    assert_eq!(answer.headers["retry-after"], "1");
    assert!(answer.text().contains("unavailable"), "{}", answer.text());
    assert_eq!(handlers.runs(), 0);
    let through = post(open, "/orders", "down", "x").await;
    assert_eq!(through.status, StatusCode::CREATED);
    assert_eq!(handlers.runs(), 1);
    server.resume();
}
