//! The idempotency layer over real TCP, on memory, one Redis, the cluster and PostgreSQL: first and
//! replayed requests, mismatches, missing and bad keys, concurrent duplicates, what is
//! stored and what is not, retention, and a client that hangs up.

use std::time::Duration;

use axum::http::StatusCode;
use tower_lock::idempotency::{IdempotencyLayer, OnConcurrent};
use tower_lock::LockManager;

use crate::app::{self, post, request, Handlers};
use crate::support;
use crate::support::suite::{backend_suite, BackendUnderTest};

async fn manager(backend: BackendUnderTest) -> LockManager {
    backend.manager(LockManager::builder()).await
}

fn layer(locks: &LockManager) -> IdempotencyLayer {
    IdempotencyLayer::new()
        .namespace(support::unique("ns"))
        .manager(locks.clone())
}

/// The first request runs; a repetition gets its response byte for byte, marked
/// replayed; the handler ran once. Quoted and bare keys are one key.
async fn the_first_runs_and_repetitions_are_replayed(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (handlers, _) = Handlers::new(false);
    let addr = app::serve(app::app(&handlers, layer(&locks))).await;
    let first = post(addr, "/orders", "k-1", "{\"n\":1}").await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text());
    assert!(!first.replayed());
    assert_eq!(first.headers["x-run"], "1");
    let again = post(addr, "/orders", "k-1", "{\"n\":1}").await;
    assert!(again.replayed(), "{again:?}");
    assert!(again.same_as(&first), "{again:?} against {first:?}");
    let bare = request(
        addr,
        "POST",
        "/orders",
        &[("idempotency-key", b"k-1")],
        "{\"n\":1}",
    )
    .await;
    assert!(bare.replayed() && bare.same_as(&first));
    assert_eq!(handlers.runs(), 1);
    // Another key is another request.
    let other = post(addr, "/orders", "k-2", "{\"n\":1}").await;
    assert!(!other.replayed());
    assert_eq!(handlers.runs(), 2);
    support::nothing_left_behind(&locks).await;
}

/// The same key with another request (body, path, method or query) is a 422 problem.
async fn a_key_reused_for_another_request_is_422(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (handlers, _) = Handlers::new(false);
    let addr = app::serve(app::app(&handlers, layer(&locks))).await;
    assert_eq!(
        post(addr, "/orders", "k", "a").await.status,
        StatusCode::CREATED
    );
    for (method, path, body) in [
        ("POST", "/orders", "b"),
        ("POST", "/orders?x=1", "a"),
        ("PATCH", "/orders", "a"),
        ("POST", "/binary", "a"),
    ] {
        let answer = request(addr, method, path, &[("idempotency-key", b"k")], body).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{method} {path}: {}",
            answer.text()
        );
        assert_eq!(answer.headers["content-type"], "application/problem+json");
        assert!(answer.text().contains("key_reused"), "{}", answer.text());
    }
    assert_eq!(handlers.runs(), 1);
}

/// No key: a 400 that says what to send; with an optional layer the request runs
/// unprotected. Bad keys: a 400 that says what is wrong. Other methods pass through.
async fn missing_and_bad_keys(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (handlers, _) = Handlers::new(false);
    let addr = app::serve(app::app(&handlers, layer(&locks))).await;
    let missing = request(addr, "POST", "/orders", &[], "").await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert!(
        missing.text().contains("Idempotency-Key") || missing.text().contains("idempotency-key"),
        "{}",
        missing.text()
    );
    let long = "k".repeat(256);
    for (value, reason) in [
        (&b"\"\""[..], "empty"),
        (b"has space", "visible ASCII"),
        (long.as_bytes(), "at most 255"),
        (&[b'k', 0xc3, 0xa9][..], "visible ASCII"),
        // Quoted but not a quoted string: never taken as a bare key (`"abc` is not `"abc"`).
        (b"\"abc", "not a quoted string (unterminated string"),
        (br#""a\qb""#, "not a quoted string (invalid escape sequence"),
        (b"\"abc\"x", "not a quoted string (trailing characters"),
    ] {
        let answer = request(addr, "POST", "/orders", &[("idempotency-key", value)], "").await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{value:?}");
        assert!(
            answer.text().contains(reason),
            "{value:?}: {}",
            answer.text()
        );
    }
    assert_eq!(handlers.runs(), 0, "no bad request reached the handler");
    // PUT is not protected: it runs each time, key or not.
    for _ in 0..2 {
        let put = request(addr, "PUT", "/orders", &[("idempotency-key", b"k")], "").await;
        assert_eq!(put.status, StatusCode::CREATED);
        assert!(!put.replayed());
    }
    assert_eq!(handlers.runs(), 2);

    let optional = app::serve(app::app(&handlers, layer(&locks).optional())).await;
    for _ in 0..2 {
        let answer = request(optional, "POST", "/orders", &[], "").await;
        assert_eq!(answer.status, StatusCode::CREATED);
    }
    assert_eq!(handlers.runs(), 4, "without a key, unprotected");
}

/// 32 duplicates at once while the first runs: one run, and all 32 get its response
/// (they wait for it by pub/sub).
async fn concurrent_duplicates_wait_for_the_first(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (handlers, gate) = Handlers::new(true);
    let addr = app::serve(app::app(
        &handlers,
        layer(&locks).wait(Duration::from_secs(20)),
    ))
    .await;
    let first = tokio::spawn(async move { post(addr, "/orders", "dup", "x").await });
    handlers.until_started(1).await;
    let duplicates: Vec<_> = (0..32)
        .map(|_| tokio::spawn(async move { post(addr, "/orders", "dup", "x").await }))
        .collect();
    support::eventually("the duplicates wait", || async {
        (locks.stats().waiters >= 1).then_some(())
    })
    .await;
    gate.open();
    let first = first.await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED);
    for duplicate in duplicates {
        let duplicate = duplicate.await.unwrap();
        assert!(duplicate.same_as(&first), "{duplicate:?}");
        assert!(duplicate.replayed());
    }
    assert_eq!(handlers.runs(), 1);
    support::nothing_left_behind(&locks).await;
}

/// With `OnConcurrent::Conflict`, a duplicate while the first runs is a 409 with
/// `Retry-After`; after it, the stored response.
async fn concurrent_duplicates_conflict_when_asked(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (handlers, gate) = Handlers::new(true);
    let layer = layer(&locks).on_concurrent(OnConcurrent::Conflict);
    let addr = app::serve(app::app(&handlers, layer)).await;
    let first = tokio::spawn(async move { post(addr, "/orders", "c", "x").await });
    handlers.until_started(1).await;
    let conflict = post(addr, "/orders", "c", "x").await;
    assert_eq!(conflict.status, StatusCode::CONFLICT, "{}", conflict.text());
    assert_eq!(conflict.headers["retry-after"], "1");
    assert!(conflict.text().contains("in_progress"));
    gate.open();
    let first = first.await.unwrap();
    let after = post(addr, "/orders", "c", "x").await;
    assert!(after.replayed() && after.same_as(&first));
    assert_eq!(handlers.runs(), 1);
}

/// The same key with another request while the first still runs is a 422 at once, whether
/// duplicates wait (here for up to 20 s) or conflict: the lock carries the first request's
/// fingerprint. A true duplicate still waits, or conflicts.
async fn a_key_reused_while_the_first_runs_is_422_at_once(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    for on_concurrent in [OnConcurrent::Wait, OnConcurrent::Conflict] {
        let (handlers, gate) = Handlers::new(true);
        let layer = layer(&locks)
            .wait(Duration::from_secs(20))
            .on_concurrent(on_concurrent);
        let addr = app::serve(app::app(&handlers, layer)).await;
        let first = tokio::spawn(async move { post(addr, "/orders", "r", "x").await });
        handlers.until_started(1).await;
        // Answered while the first is held inside its handler (the gate is shut).
        let reused = post(addr, "/orders", "r", "another body").await;
        assert_eq!(
            reused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{on_concurrent:?}: {}",
            reused.text()
        );
        assert!(reused.text().contains("key_reused"), "{}", reused.text());
        assert_eq!(
            handlers.started.load(std::sync::atomic::Ordering::SeqCst),
            1
        );
        gate.open();
        let first = first.await.unwrap();
        assert_eq!(first.status, StatusCode::CREATED);
        let after = post(addr, "/orders", "r", "another body").await;
        assert_eq!(
            after.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "and after it"
        );
        assert_eq!(handlers.runs(), 1);
    }
    support::nothing_left_behind(&locks).await;
}

/// A handler that panics: the connection closes without a response, and the key is freed
/// at once (a retry runs the handler; were the key still claimed, this layer would answer
/// the retry 409 for a whole lease).
async fn a_handler_that_panics_frees_the_key(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (handlers, _) = Handlers::new(false);
    let layer = layer(&locks).on_concurrent(OnConcurrent::Conflict);
    let addr = app::serve(app::app(&handlers, layer)).await;
    let key: &[(&str, &[u8])] = &[("idempotency-key", b"\"boom\"")];
    let closed = app::try_request(addr, "POST", "/panics-once", key, "x").await;
    assert!(closed.is_err(), "no response after a panic: {closed:?}");
    support::background_releases_done(&locks).await;
    let retry = app::request(addr, "POST", "/panics-once", key, "x").await;
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text());
    assert!(!retry.replayed());
    let replay = app::request(addr, "POST", "/panics-once", key, "x").await;
    assert!(replay.replayed() && replay.same_as(&retry));
    assert_eq!(
        handlers.started.load(std::sync::atomic::Ordering::SeqCst),
        2
    );
    support::nothing_left_behind(&locks).await;
}

/// Not stored: a 500 (try again), `Cache-Control: no-store`, `DoNotStore`, and a body
/// over the store limit (sent whole): the retry runs the handler again.
async fn what_is_not_stored_runs_again(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (handlers, _) = Handlers::new(false);
    let addr = app::serve(app::app(&handlers, layer(&locks))).await;
    let mut runs = 0;
    for path in ["/fail", "/no-store", "/do-not-store", "/big"] {
        for _ in 0..2 {
            let answer = post(addr, path, &format!("key{path}"), "").await;
            runs += 1;
            assert!(!answer.replayed(), "{path} was stored");
            if path == "/big" {
                assert_eq!(answer.body.len(), 2 * 1024 * 1024, "sent whole");
            }
        }
    }
    assert_eq!(handlers.runs(), runs);
    support::nothing_left_behind(&locks).await;
}

/// A binary body is replayed byte for byte; a stored response lasts its retention, after
/// which the key is new again.
async fn binary_bodies_and_retention(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (handlers, _) = Handlers::new(false);
    let retention = Duration::from_millis(500);
    let addr = app::serve(app::app(&handlers, layer(&locks).retention(retention))).await;
    let first = post(addr, "/binary", "bin", "").await;
    assert_eq!(first.body.len(), 512);
    let again = post(addr, "/binary", "bin", "").await;
    assert!(again.replayed() && again.body == first.body);
    assert_eq!(handlers.runs(), 1);
    support::eventually("the stored response expires", || async {
        (!post(addr, "/binary", "bin", "").await.replayed()).then_some(())
    })
    .await;
    assert_eq!(handlers.runs(), 2);
}

/// The first request's client hangs up while its handler runs: the handler finishes, its
/// response is stored, and the retry gets it without running the handler again.
async fn a_client_that_hangs_up_gets_the_answer_on_retry(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (handlers, gate) = Handlers::new(true);
    let addr = app::serve(app::app(&handlers, layer(&locks))).await;
    let first = tokio::spawn(async move { post(addr, "/orders", "hang", "x").await });
    handlers.until_started(1).await;
    first.abort(); // the client goes away; its connection closes
    assert!(first.await.unwrap_err().is_cancelled());
    gate.open();
    support::eventually("the handler finishes", || async {
        (handlers.runs() == 1).then_some(())
    })
    .await;
    let retry = support::eventually("the response is stored", || async {
        let retry = post(addr, "/orders", "hang", "x").await;
        retry.replayed().then_some(retry)
    })
    .await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(handlers.runs(), 1);
}

/// Scopes keep clients apart: the same key in two scopes runs twice, and neither reads
/// the other's response.
async fn scopes_keep_clients_apart(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (handlers, _) = Handlers::new(false);
    let layer = layer(&locks).scope(|parts| {
        parts
            .headers
            .get("x-tenant")
            .and_then(|t| t.to_str().ok())
            .map(str::to_owned)
    });
    let addr = app::serve(app::app(&handlers, layer)).await;
    let tenant = |t: &'static str| {
        [
            ("idempotency-key", &b"shared"[..]),
            ("x-tenant", t.as_bytes()),
        ]
    };
    let a = request(addr, "POST", "/orders", &tenant("a"), "x").await;
    let b = request(addr, "POST", "/orders", &tenant("b"), "x").await;
    assert!(!a.replayed() && !b.replayed());
    assert_ne!(a.headers["x-run"], b.headers["x-run"]);
    let a_again = request(addr, "POST", "/orders", &tenant("a"), "x").await;
    assert!(a_again.replayed() && a_again.same_as(&a));
    assert_eq!(handlers.runs(), 2);
}

/// A handler that runs for three leases keeps its key: the lease is renewed while it
/// waits, so a duplicate meanwhile is refused as in progress, never run; then the stored
/// response is replayed. (What is tried is time passing, hence the sleep.)
async fn a_handler_longer_than_its_lease_keeps_its_key(backend: BackendUnderTest) {
    let lease = Duration::from_secs(1);
    let locks = backend.manager(LockManager::builder().lease(lease)).await;
    let (handlers, gate) = Handlers::new(true);
    let layer = layer(&locks).on_concurrent(OnConcurrent::Conflict);
    let addr = app::serve(app::app(&handlers, layer)).await;
    let first = tokio::spawn(async move { post(addr, "/orders", "long", "x").await });
    handlers.until_started(1).await;
    tokio::time::sleep(3 * lease).await;
    // A duplicate that took the key would run the handler, held at the gate: bounded.
    let duplicate =
        tokio::time::timeout(Duration::from_secs(30), post(addr, "/orders", "long", "x"))
            .await
            .expect("a duplicate is answered at once, not run (the first's lease ran out)");
    assert_eq!(
        duplicate.status,
        StatusCode::CONFLICT,
        "{}",
        duplicate.text()
    );
    gate.open();
    let first = first.await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text());
    let after = post(addr, "/orders", "long", "x").await;
    assert!(after.replayed() && after.same_as(&first), "{after:?}");
    assert_eq!(handlers.runs(), 1);
    support::nothing_left_behind(&locks).await;
}

backend_suite!(
    [Memory, Redis, Cluster, Postgres, MySql]
    a_handler_longer_than_its_lease_keeps_its_key,
    the_first_runs_and_repetitions_are_replayed,
    a_key_reused_for_another_request_is_422,
    a_key_reused_while_the_first_runs_is_422_at_once,
    a_handler_that_panics_frees_the_key,
    missing_and_bad_keys,
    concurrent_duplicates_wait_for_the_first,
    concurrent_duplicates_conflict_when_asked,
    what_is_not_stored_runs_again,
    binary_bodies_and_retention,
    a_client_that_hangs_up_gets_the_answer_on_retry,
    scopes_keep_clients_apart,
);
