//! The admin router over real HTTP: JSON shapes of a listing, an inspection and a
//! force-unlock; 404 for a name with nothing stored, 405 for a GET force-unlock, 400 for a
//! bad pattern, 409 for data that is no lock (left alone).

use axum::{Extension, Router};
use fred::prelude::ListInterface;
use serde_json::Value;
use tower_lock::admin::{self, Operator};

use crate::helpers::manager;
use crate::support;
use crate::support::http::{request, serve};
use crate::support::suite::{backend_suite, BackendUnderTest};

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

async fn the_router_lists_inspects_and_frees(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let app = Router::new()
        .nest("/admin", admin::router(locks.clone()))
        .layer(Extension(Operator("alice".into())));
    let addr = serve(app).await;
    let tag = support::unique("admin").replace(':', "-");
    let name = format!("{tag}/order:42");
    let guard = locks.lock(&name).acquire().await.unwrap();
    let _other = locks
        .lock(format!("{tag}/order:43"))
        .acquire()
        .await
        .unwrap();

    let reply = request(addr, "GET", &format!("/admin/locks/{name}"), &[]).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let info = json(&reply.body);
    assert_eq!(info["kind"], "lock");
    assert_eq!(info["holders"][0]["owner"], guard.owner().as_str());
    assert_eq!(info["holders"][0]["process"], locks.id());
    assert_eq!(info["holders"][0]["holds"], 1);
    assert_eq!(info["holders"][0]["side"], "exclusive");
    assert!(info["holders"][0]["lease_ms"].as_u64().unwrap() > 0);

    let reply = request(
        addr,
        "GET",
        &format!("/admin/locks?pattern={tag}/order:*&limit=10"),
        &[],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let listed = json(&reply.body);
    assert_eq!(listed["names"].as_array().unwrap().len(), 2, "{listed}");
    assert_eq!(listed["truncated"], false);
    let reply = request(
        addr,
        "GET",
        &format!("/admin/locks?pattern={tag}/order:*&limit=1"),
        &[],
    )
    .await;
    assert_eq!(json(&reply.body)["truncated"], true);

    let reply = request(addr, "GET", "/admin/locks?pattern=a%5Bb", &[]).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(json(&reply.body)["error"]
        .as_str()
        .unwrap()
        .contains("without its"));
    let reply = request(addr, "GET", "/admin/locks?limit=lots", &[]).await;
    assert_eq!(reply.status, 400, "{}", reply.body);

    let reply = request(addr, "GET", &format!("/admin/force-unlock/{name}"), &[]).await;
    assert_eq!(reply.status, 405, "a GET never frees a lock");
    assert!(!guard.is_lost());
    let reply = request(addr, "POST", &format!("/admin/force-unlock/{name}"), &[]).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let freed = json(&reply.body);
    assert_eq!(
        (freed["kind"].as_str(), freed["freed"].as_u64()),
        (Some("lock"), Some(1))
    );
    let reply = request(addr, "GET", &format!("/admin/locks/{name}"), &[]).await;
    assert_eq!(reply.status, 404, "{}", reply.body);
    assert!(json(&reply.body)["error"]
        .as_str()
        .unwrap()
        .contains("nothing is stored"));
    let reply = request(addr, "POST", &format!("/admin/force-unlock/{name}"), &[]).await;
    assert_eq!(reply.status, 404, "{}", reply.body);

    if let Some(url) = backend.url() {
        // Somebody else's data under a Redis key: left alone, and said so.
        let foreign = format!("{tag}/a-list");
        let client = support::client(&url).await;
        let key = locks.key(&foreign).unwrap();
        let _: i64 = client.rpush(key.as_str(), "x").await.unwrap();
        let reply = request(addr, "POST", &format!("/admin/force-unlock/{foreign}"), &[]).await;
        assert_eq!(reply.status, 409, "{}", reply.body);
        assert!(json(&reply.body)["error"]
            .as_str()
            .unwrap()
            .contains("list"));
        let kept: i64 = client.llen(key.as_str()).await.unwrap();
        assert_eq!(kept, 1, "the list is still there");
    }
}

/// The process's view: a request that holds its lock is listed with its method and path,
/// one that waits behind it as a waiter of the name; both gone once they are done.
async fn the_router_shows_what_this_process_holds(backend: BackendUnderTest) {
    let locks = manager(backend).await;
    let (route, mut entered) = support::http::stalled();
    let app = Router::new()
        .route("/orders/{orderId}/pay", route)
        .route_layer(tower_lock::layer::LockLayer::by_path_param("orderId"))
        .nest("/admin", admin::router(locks.clone()))
        .layer(Extension(locks.clone()));
    let addr = serve(app).await;
    let first = support::http::send(addr, "POST", "/orders/7/pay", &[]).await;
    entered.recv().await.unwrap();
    let second = support::http::send(addr, "POST", "/orders/7/pay", &[]).await;
    let view = support::eventually("the second request waits", || async {
        let view = json(&request(addr, "GET", "/admin/process", &[]).await.body);
        (view["waiting"].as_array().is_some_and(|w| !w.is_empty())).then_some(view)
    })
    .await;
    assert_eq!(view["manager"], locks.id());
    let holds = view["holds"].as_array().unwrap();
    assert_eq!(holds.len(), 1, "{view}");
    assert_eq!(holds[0]["key"], locks.key("orderId:7").unwrap().as_str());
    assert_eq!(holds[0]["kind"], "plain");
    assert_eq!(holds[0]["request"]["method"], "POST");
    assert_eq!(holds[0]["request"]["path"], "/orders/7/pay");
    assert!(holds[0]["request"]["started_unix_ms"].as_u64().unwrap() > 0);
    assert_eq!(view["waiting"][0]["waiters"], 1);
    drop(first);
    entered.recv().await.unwrap();
    drop(second);
    support::eventually("nothing held any more", || async {
        let view = json(&request(addr, "GET", "/admin/process", &[]).await.body);
        (view["holds"].as_array().is_some_and(Vec::is_empty)).then_some(())
    })
    .await;
}

backend_suite!(
    [Memory, Redis, Postgres]
    the_router_lists_inspects_and_frees,
    the_router_shows_what_this_process_holds,
);
