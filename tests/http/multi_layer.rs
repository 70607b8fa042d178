//! `LockLayer` over HTTP: transfers locked crosswise through the layer never overlap
//! nor deadlock and leave nothing held; the same account twice is taken once; a busy
//! account is 409 and leaves the other free; missing, bad and too many keys are 400s
//! before any lock; `Locked<K>` behind the layer enters its part; a lost part aborts the
//! handler (503) and frees the rest; a request dropped while it runs or waits frees
//! everything.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::post;
use axum::{Extension, Router};
use http::{Request, StatusCode};
use tokio::sync::mpsc::UnboundedReceiver;
use tower_lock::backend::MemoryBackend;
use tower_lock::extract::{HeldMultiLock, Locked};
use tower_lock::layer::LockLayer;
use tower_lock::lock::Released;
use tower_lock::LockManager;

use crate::helpers::{oneshot, respond};
use crate::multi::From;
use crate::support;
use crate::support::http::stalled;
use crate::support::suite::{backend_suite, BackendUnderTest};

/// Transfers between accounts 0 and 1 count who is inside each account.
fn transfers(layer: LockLayer, inside: Arc<[AtomicUsize; 2]>) -> Router {
    let transfer =
        move |Extension(held): Extension<HeldMultiLock>,
              axum::extract::Path((from, to)): axum::extract::Path<(u64, u64)>| {
            let inside = inside.clone();
            async move {
                // Accounts 0 and 1 are watched; a transfer within one account enters it once.
                let watched: Vec<usize> = [from, to]
                    .into_iter()
                    .filter(|id| *id < 2 && from != to)
                    .map(|id| id as usize)
                    .collect();
                for id in &watched {
                    let was = inside[*id].fetch_add(1, Ordering::SeqCst);
                    assert_eq!(was, 0, "two transfers in account {id} at once");
                }
                tokio::task::yield_now().await;
                for id in &watched {
                    inside[*id].fetch_sub(1, Ordering::SeqCst);
                }
                let keys: Vec<String> = held.keys().map(|k| k.as_str().to_owned()).collect();
                keys.join(",")
            }
        };
    Router::new()
        .route("/transfers/{from}/{to}", post(transfer))
        .route_layer(layer)
}

fn gauge() -> Arc<[AtomicUsize; 2]> {
    Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)])
}

async fn crosswise_transfers_through_the_layer(backend: BackendUnderTest) {
    let builder = LockManager::builder()
        .wait(Duration::from_secs(30))
        .key_prefix(support::unique("multi-layer") + ":");
    let locks = backend.manager(builder).await;
    let layer = LockLayer::by_path_params("account:", ["from", "to"]).manager(locks.clone());
    let app = transfers(layer, gauge());
    let mut tasks = Vec::new();
    for n in 0..200 {
        let app = app.clone();
        let uri = ["/transfers/0/1", "/transfers/1/0"][n % 2];
        tasks.push(tokio::spawn(
            async move { oneshot(&app, "POST", uri).await },
        ));
    }
    let key = |name: &str| locks.key(name).unwrap().as_str().to_owned();
    let both = format!("{},{}", key("account:0"), key("account:1"));
    for task in tasks {
        assert_eq!(task.await.unwrap(), (StatusCode::OK, both.clone()));
    }
    // Released before each response went out: nothing is left once all are answered.
    support::nothing_left_behind(&locks).await;
    // One account named twice is taken once.
    let (status, body) = oneshot(&app, "POST", "/transfers/3/3").await;
    assert_eq!((status, body), (StatusCode::OK, key("account:3")));
    support::nothing_left_behind(&locks).await;
}

async fn a_busy_account_is_409_and_leaves_the_other_free(backend: BackendUnderTest) {
    // A prefix of its own: other tests lock `account:9` on the shared Redis too.
    let builder = LockManager::builder()
        .wait(Duration::from_millis(50))
        .key_prefix(support::unique("multi-layer") + ":");
    let locks = backend.manager(builder).await;
    let layer = LockLayer::by_path_params("account:", ["from", "to"]).manager(locks.clone());
    let app = transfers(layer, gauge());
    let held = locks.lock("account:9").acquire().await.unwrap();
    let response = {
        let request = Request::post("/transfers/8/9").body(Body::empty()).unwrap();
        tower::ServiceExt::oneshot(app.clone(), request)
            .await
            .unwrap()
    };
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_eq!(response.headers()["retry-after"], "1");
    let other = locks
        .lock("account:8")
        .try_acquire()
        .await
        .expect("account 8 left free");
    assert_eq!(other.release().await.unwrap(), Released::Unlocked);
    assert_eq!(held.release().await.unwrap(), Released::Unlocked);
    assert_eq!(
        oneshot(&app, "POST", "/transfers/8/9").await.0,
        StatusCode::OK
    );
    support::nothing_left_behind(&locks).await;
}

backend_suite!(
    [Memory, Redis, Cluster, Postgres]
    crosswise_transfers_through_the_layer,
    a_busy_account_is_409_and_leaves_the_other_free,
);

#[tokio::test]
async fn missing_bad_and_too_many_keys_are_400_before_any_lock() {
    let locks = LockManager::memory();
    let app = |layer: LockLayer| {
        Router::new()
            .route("/one/{from}", post(|| async { "ran" }))
            .route("/many", post(|| async { "ran" }))
            .route_layer(layer.manager(locks.clone()))
    };
    // A route without the second parameter: missing (400), or unlocked when allowed.
    let strict = app(LockLayer::by_path_params("account:", ["from", "to"]));
    let (status, body) = oneshot(&strict, "POST", "/one/7").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("path parameter `to`"), "{body}");
    let lenient = app(LockLayer::by_path_params("account:", ["from", "to"]).allow_missing_key());
    assert_eq!(oneshot(&lenient, "POST", "/one/7").await.0, StatusCode::OK);

    // Names from a function: none, an empty one, too many.
    let named = |names: Option<Vec<String>>| {
        app(LockLayer::by_names_fn(move |_| names.clone()).max_keys(3))
    };
    let (status, body) = oneshot(&named(None), "POST", "/many").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = oneshot(&named(Some(vec![])), "POST", "/many").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let empty = Some(vec!["a".to_owned(), String::new()]);
    let (status, body) = oneshot(&named(empty), "POST", "/many").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let four = Some(["a", "b", "c", "d"].map(str::to_owned).to_vec());
    let (status, body) = oneshot(&named(four), "POST", "/many").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("4 locks, more than the 3"), "{body}");
    let three = Some(["a", "b", "a"].map(str::to_owned).to_vec());
    assert_eq!(
        oneshot(&named(three), "POST", "/many").await.0,
        StatusCode::OK
    );

    // The limit bounds a function's names; key sources are the layer's own configuration.
    let sourced = app(LockLayer::by_path_params("account:", ["from"]).max_keys(0));
    assert_eq!(oneshot(&sourced, "POST", "/one/7").await.0, StatusCode::OK);

    // A body over the limit is refused before the locks are asked for.
    let limited = app(LockLayer::by_path_params("account:", ["from"]).body_limit(4));
    let request = Request::post("/one/7")
        .body(Body::from("0123456789"))
        .unwrap();
    assert_eq!(
        respond(&limited, request).await.0,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    // A path no route matches goes on to the fallback, unlocked.
    let outside = Router::new()
        .route("/one/{from}", post(|| async { "ran" }))
        .layer(LockLayer::by_path_params("account:", ["from"]).manager(locks.clone()));
    assert_eq!(
        oneshot(&outside, "POST", "/nowhere").await.0,
        StatusCode::NOT_FOUND
    );
    // No manager anywhere: 500.
    let unmanaged = Router::new()
        .route("/one/{from}", post(|| async { "ran" }))
        .route_layer(LockLayer::by_path_params("account:", ["from"]));
    let (status, body) = oneshot(&unmanaged, "POST", "/one/7").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    support::nothing_left_behind(&locks).await;
}

/// `Locked<K>` naming one of the layer's keys enters that part (the same owner) instead of
/// waiting for the request's own lock until its wait ends.
#[tokio::test]
async fn an_extractor_behind_the_layer_enters_its_part() {
    let locks = LockManager::builder()
        .wait(Duration::from_millis(100))
        .memory();
    let handler = |Locked(account): Locked<From>| async move {
        format!("{} by {}", account.0, account.guard().owner())
    };
    let app = Router::new()
        .route("/transfers/{from}/{to}", post(handler))
        .route_layer(LockLayer::by_path_params("account:", ["from", "to"]).manager(locks.clone()));
    let (status, body) = oneshot(&app, "POST", "/transfers/7/9").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.starts_with("7 by "), "{body}");
    support::nothing_left_behind(&locks).await;
}

/// A part deleted behind the handler: under `abort_on_lost` the handler is dropped, the
/// answer is 503 naming the lost key, and the other part is released.
#[tokio::test]
async fn a_lost_part_aborts_the_handler_and_frees_the_rest() {
    let memory = MemoryBackend::new();
    let locks = LockManager::builder()
        .lease(Duration::from_millis(300))
        .backend(memory.clone());
    let layer = LockLayer::by_path_params("account:", ["from", "to"]).abort_on_lost();
    let (app, mut entered) = endless_transfers(layer.manager(locks.clone()));
    let request = tokio::spawn({
        let app = app.clone();
        async move { oneshot(&app, "POST", "/transfers/1/2").await }
    });
    entered.recv().await.unwrap();
    let lost = locks.key("account:2").unwrap();
    assert!(memory.force_unlock(&lost));
    let (status, body) = request.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("account:2"), "{body}");
    let other = locks.lock("account:1").try_acquire().await.expect("freed");
    assert_eq!(other.release().await.unwrap(), Released::Unlocked);
    support::nothing_left_behind(&locks).await;
}

/// A request dropped while its handler runs (client gone) releases every part.
#[tokio::test]
async fn a_dropped_request_releases_every_part() {
    let locks = LockManager::memory();
    let layer = LockLayer::by_path_params("account:", ["from", "to"]);
    let (app, mut entered) = endless_transfers(layer.manager(locks.clone()));
    let request = tokio::spawn({
        let app = app.clone();
        async move { oneshot(&app, "POST", "/transfers/1/2").await }
    });
    entered.recv().await.unwrap();
    assert!(locks.lock("account:1").try_acquire().await.is_err());
    request.abort();
    assert!(request.await.unwrap_err().is_cancelled());
    crate::support::eventually("both accounts released", || async {
        (locks.stats() == Default::default()).then_some(())
    })
    .await;
    for account in ["account:1", "account:2"] {
        let guard = locks.lock(account).try_acquire().await.expect("released");
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }

    // Dropped while waiting for a busy account, holding the one before it: freed too.
    let busy = locks.lock("account:2").acquire().await.unwrap();
    let request = tokio::spawn({
        let app = app.clone();
        async move { oneshot(&app, "POST", "/transfers/2/1").await }
    });
    crate::support::eventually("the request waits for account 2", || async {
        (locks.stats().waiters == 1).then_some(())
    })
    .await;
    assert!(locks.lock("account:1").try_acquire().await.is_err());
    request.abort();
    assert!(request.await.unwrap_err().is_cancelled());
    crate::support::eventually("account 1 released", || async {
        (locks.stats().waiters == 0 && locks.stats().renewals == 1).then_some(())
    })
    .await;
    let freed = locks
        .lock("account:1")
        .try_acquire()
        .await
        .expect("released");
    assert_eq!(freed.release().await.unwrap(), Released::Unlocked);
    assert_eq!(busy.release().await.unwrap(), Released::Unlocked);
    support::nothing_left_behind(&locks).await;
}

/// Transfers whose handler never ends, behind `layer`; `entered` hears of each handler.
fn endless_transfers(layer: LockLayer) -> (Router, UnboundedReceiver<()>) {
    let (stalled, entered) = stalled();
    let app = Router::new()
        .route("/transfers/{from}/{to}", stalled)
        .route_layer(layer);
    (app, entered)
}

/// The backend down: 503 (fail closed), or the request runs unlocked under `fail_open`.
#[tokio::test]
async fn a_backend_down_is_503_or_runs_unlocked_when_failing_open() {
    let unreachable = format!("redis://127.0.0.1:{}", support::free_port());
    let down = LockManager::builder()
        .redis_lazy(&unreachable)
        .await
        .unwrap();
    let app = |layer: LockLayer| {
        Router::new()
            .route("/transfers/{from}/{to}", post(|| async { "ran" }))
            .route_layer(layer.manager(down.clone()))
    };
    let closed = app(LockLayer::by_path_params("account:", ["from", "to"]));
    let (status, body) = oneshot(&closed, "POST", "/transfers/1/2").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let open = app(LockLayer::by_path_params("account:", ["from", "to"]).fail_open());
    assert_eq!(
        oneshot(&open, "POST", "/transfers/1/2").await,
        (StatusCode::OK, "ran".to_owned())
    );
}

/// Names from a function are escaped as the single-key layer's: braces in request input
/// make no Redis Cluster hash tag.
#[tokio::test]
async fn names_from_a_function_are_escaped() {
    let locks = LockManager::memory();
    let layer = LockLayer::by_names_fn(|parts| {
        let tag = parts.uri.query()?.to_owned();
        Some(vec![format!("order:{tag}"), "order:plain".to_owned()])
    });
    let app = Router::new()
        .route(
            "/merge",
            post(|Extension(held): Extension<HeldMultiLock>| async move {
                let keys: Vec<&str> = held.keys().map(|k| k.as_str()).collect();
                keys.join(",")
            }),
        )
        .route_layer(layer.manager(locks.clone()));
    let (status, body) = oneshot(&app, "POST", "/merge?{7}").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let expected = [locks.key("order:%7B7%7D"), locks.key("order:plain")]
        .map(|key| key.unwrap().as_str().to_owned())
        .join(",");
    assert_eq!(body, expected);
}

/// A layer of several keys takes the kind it is set to, for every part: readers of the
/// same two accounts run together, a writer waits for them.
#[tokio::test]
async fn several_keys_take_the_layers_kind() {
    let locks = LockManager::memory();
    let (entered_tx, mut entered) = tokio::sync::mpsc::unbounded_channel();
    let read = move |Extension(held): Extension<HeldMultiLock>| {
        let entered_tx = entered_tx.clone();
        async move {
            let kinds: Vec<String> = held
                .parts()
                .iter()
                .map(|p| format!("{:?}", p.kind()))
                .collect();
            let _ = entered_tx.send(kinds.join(","));
            std::future::pending::<&'static str>().await
        }
    };
    let app = Router::new()
        .route(
            "/accounts/{from}/{to}",
            axum::routing::get(read).post(|| async { "wrote" }),
        )
        .route_layer(
            LockLayer::by_path_params("account:", ["from", "to"])
                .read_write_by_method()
                .wait(Duration::ZERO)
                .manager(locks.clone()),
        );

    // Two readers of accounts 1 and 2 inside at once; a writer of account 2 is busy.
    let mut readers = Vec::new();
    for _ in 0..2 {
        let app = app.clone();
        readers.push(tokio::spawn(async move {
            oneshot(&app, "GET", "/accounts/1/2").await
        }));
        assert_eq!(entered.recv().await.unwrap(), "Read,Read");
    }
    let (status, body) = oneshot(&app, "POST", "/accounts/2/3").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    for reader in &readers {
        reader.abort();
    }
    for reader in readers {
        assert!(reader.await.unwrap_err().is_cancelled());
    }
    support::background_releases_done(&locks).await;
    assert_eq!(
        oneshot(&app, "POST", "/accounts/2/3").await,
        (StatusCode::OK, "wrote".to_owned())
    );
    support::nothing_left_behind(&locks).await;
}
