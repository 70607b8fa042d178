//! Read-write locks over HTTP: GETs of one order run together while a POST waits and then
//! runs alone (real TCP), and the read/write extractors under the layer's hold.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Extension, Router};
use http::StatusCode;
use tokio::sync::watch;
use tower_lock::extract::{HeldLock, Locked, ReadLocked, WriteLocked};
use tower_lock::layer::LockLayer;
use tower_lock::lock::LockKind;

use crate::helpers::{manager, oneshot, Inside};
use crate::support;
use crate::support::http::{read, send, serve};
use crate::support::order::OrderId;
use crate::support::suite::{backend_suite, BackendUnderTest};

#[derive(Clone)]
struct Orders {
    reads: Inside,
    writes: Inside,
    /// GETs hold until this turns true.
    go: watch::Receiver<bool>,
    /// Readers seen inside while a write ran, and writers while a read ran.
    overlaps: Arc<AtomicUsize>,
}

async fn show(State(orders): State<Orders>) -> &'static str {
    let _inside = orders.reads.enter();
    if orders.writes.now.load(Ordering::SeqCst) > 0 {
        orders.overlaps.fetch_add(1, Ordering::SeqCst);
    }
    let mut go = orders.go.clone();
    go.wait_for(|go| *go).await.unwrap();
    "order"
}

async fn update(State(orders): State<Orders>) -> &'static str {
    let _inside = orders.writes.enter();
    orders
        .overlaps
        .fetch_add(orders.reads.now.load(Ordering::SeqCst), Ordering::SeqCst);
    "updated"
}

async fn gets_share_and_a_post_runs_alone(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (open, go) = watch::channel(false);
    let orders = Orders {
        reads: Inside::default(),
        writes: Inside::default(),
        go,
        overlaps: Arc::default(),
    };
    let app = Router::new()
        .route("/orders/{orderId}", get(show).post(update))
        .route_layer(
            LockLayer::by_path_param("orderId")
                .read_write_by_method()
                .manager(locks.clone()),
        )
        .with_state(orders.clone());
    let addr = serve(app).await;

    let mut gets = Vec::new();
    for _ in 0..4 {
        gets.push(send(addr, "GET", "/orders/42", &[]).await);
    }
    support::eventually("four GETs inside at once", || async {
        (orders.reads.now.load(Ordering::SeqCst) == 4).then_some(())
    })
    .await;
    let post = send(addr, "POST", "/orders/42", &[]).await;
    support::eventually("the POST waits", || async {
        (locks.waiting("orderId:42") == 1).then_some(())
    })
    .await;
    // A GET after the waiting POST lets it go first.
    let late_get = send(addr, "GET", "/orders/42", &[]).await;
    support::eventually("the late GET waits", || async {
        (locks.waiting("orderId:42") == 2).then_some(())
    })
    .await;
    assert_eq!(orders.writes.max.load(Ordering::SeqCst), 0);
    assert_eq!(orders.reads.now.load(Ordering::SeqCst), 4);

    open.send(true).unwrap();
    for get in gets {
        assert_eq!(read(get).await.status, 200);
    }
    let post = read(post).await;
    assert_eq!((post.status, post.body.as_str()), (200, "updated"));
    assert_eq!(read(late_get).await.status, 200);
    assert_eq!(
        orders.overlaps.load(Ordering::SeqCst),
        0,
        "a write ran beside a read"
    );
    assert_eq!(orders.reads.max.load(Ordering::SeqCst), 4);
    assert_eq!(locks.stats().claimed_names, 0);
}

/// The extractors take another hold of the layer's lock where the rules allow, and answer a
/// 500 naming the mistake where they do not.
async fn extractors_under_the_layer(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let kinds = |Extension(held): Extension<HeldLock>| async move { format!("{:?}", held.kind()) };
    let read = |ReadLocked(order): ReadLocked<OrderId>| async move {
        format!("{} {}", order.key(), order.0)
    };
    let write = |WriteLocked(_order): WriteLocked<OrderId>| async { "write" };
    let plain = |Locked(_order): Locked<OrderId>| async { "plain" };
    let by_method = Router::new()
        .route("/kind/{orderId}", get(kinds).post(kinds))
        .route("/read/{orderId}", get(read).post(read))
        .route("/write/{orderId}", get(write).post(write))
        .route("/plain/{orderId}", get(plain))
        .route_layer(LockLayer::for_key::<OrderId>().read_write_by_method())
        .layer(Extension(locks.clone()));
    let (_, kind) = oneshot(&by_method, "GET", "/kind/7").await;
    assert_eq!(kind, format!("{:?}", LockKind::Read));
    let (_, kind) = oneshot(&by_method, "POST", "/kind/7").await;
    assert_eq!(kind, format!("{:?}", LockKind::Write));
    // Read under read: a reentry; read under write: a downgrade.
    for method in ["GET", "POST"] {
        let (status, body) = oneshot(&by_method, method, "/read/7").await;
        assert_eq!(status, StatusCode::OK, "{method}: {body}");
        assert!(body.ends_with("order:7 7"), "{body}");
    }
    // Write under write: a reentry; write under read: no upgrade, a 500 that says so.
    assert_eq!(
        oneshot(&by_method, "POST", "/write/7").await.0,
        StatusCode::OK
    );
    let (status, body) = oneshot(&by_method, "GET", "/write/7").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        body.contains("write lock") && body.contains("read lock"),
        "{body}"
    );
    // A plain extractor under a read-write layer: a 500 too.
    let (status, body) = oneshot(&by_method, "GET", "/plain/7").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");

    // Read-only and write-only layers.
    let read_only = Router::new()
        .route("/kind/{orderId}", get(kinds).post(kinds))
        .route_layer(LockLayer::for_key::<OrderId>().read_lock())
        .layer(Extension(locks.clone()));
    assert_eq!(
        oneshot(&read_only, "POST", "/kind/7").await.1,
        format!("{:?}", LockKind::Read)
    );
    let write_only = Router::new()
        .route("/kind/{orderId}", get(kinds))
        .route_layer(LockLayer::for_key::<OrderId>().write_lock())
        .layer(Extension(locks.clone()));
    assert_eq!(
        oneshot(&write_only, "GET", "/kind/7").await.1,
        format!("{:?}", LockKind::Write)
    );
    assert_eq!(locks.stats().claimed_names, 0);
}

backend_suite!(
    [Memory, Redis, Postgres]
    gets_share_and_a_post_runs_alone,
    extractors_under_the_layer,
);
