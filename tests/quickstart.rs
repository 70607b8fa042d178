//! The README's quick start is `examples/quickstart.rs`, word for word, and its two routes
//! lock one name: a payment and a refund of one order never run at once (the quick start
//! used to lock them as `orderId:42` and `order:42`).

mod support;

#[path = "../examples/quickstart.rs"]
#[allow(dead_code)]
mod quickstart;

use axum::body::Body;
use http::{Request, StatusCode};
use tower::ServiceExt;
use tower_lock::LockManager;

#[test]
fn the_readme_shows_the_quick_start_example() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/quickstart.rs"
    ))
    .unwrap();
    assert!(
        readme.contains(&format!("```rust,no_run\n{example}```")),
        "README.md's quick start differs from examples/quickstart.rs: keep them the same"
    );
}

async fn pay_and_refund_wait_for_one_lock(locks: LockManager) {
    let app = quickstart::app(locks.clone());
    let held = locks.lock("order:42").acquire().await.unwrap();
    let calls: Vec<_> = ["/orders/42/pay", "/orders/42/refund"]
        .into_iter()
        .map(|uri| {
            let app = app.clone();
            tokio::spawn(async move {
                let request = Request::post(uri).body(Body::empty()).unwrap();
                app.oneshot(request).await.unwrap().status()
            })
        })
        .collect();
    support::eventually("both wait for `order:42`", || async {
        (locks.waiting("order:42") == 2).then_some(())
    })
    .await;
    assert!(calls.iter().all(|call| !call.is_finished()));
    let _ = held.release().await.unwrap();
    for call in calls {
        assert_eq!(call.await.unwrap(), StatusCode::OK);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pay_and_refund_share_the_order_s_lock_in_memory() {
    pay_and_refund_wait_for_one_lock(LockManager::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pay_and_refund_share_the_order_s_lock_on_redis() {
    let url = support::shared_redis_url();
    pay_and_refund_wait_for_one_lock(LockManager::redis(&url).await.unwrap()).await;
}
