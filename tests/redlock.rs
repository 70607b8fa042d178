//! RedLock over 3 and 5 local redis-server processes (independent masters): exclusion under
//! load across two managers; one node killed, it still works; a majority killed, a clear
//! `Unavailable`; nodes restarted empty mid-hold, the holder keeps the lock while a
//! majority still holds it and is told when not; waiters are woken by pub/sub.

#[path = "support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::*;
use support::RedisServer;
use tower_lock::backend::RedLockBackend;
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

struct Nodes {
    servers: Vec<RedisServer>,
    admins: Vec<Client>,
}

impl Nodes {
    async fn start(count: usize) -> Nodes {
        let servers: Vec<RedisServer> = (0..count).map(|_| RedisServer::start()).collect();
        let mut admins = Vec::new();
        for server in &servers {
            admins.push(support::client(&server.url()).await);
        }
        Nodes { servers, admins }
    }

    async fn manager(&self, lease: Duration) -> LockManager {
        let urls: Vec<String> = self.servers.iter().map(RedisServer::url).collect();
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        let backend = RedLockBackend::connect(&urls).await.unwrap();
        let manager = LockManager::builder().lease(lease).backend(backend.clone());
        // Connected in the background: wait until every node answers.
        support::eventually("every node connected", || async {
            backend
                .nodes()
                .iter()
                .all(tower_lock::backend::Backend::is_available)
                .then_some(())
        })
        .await;
        manager
    }

    /// The running nodes on which `name` is held now.
    async fn holding(&self, name: &str) -> usize {
        let mut count = 0;
        for (server, admin) in self.servers.iter().zip(&self.admins) {
            if server.is_running() && admin.exists::<i64, _>(name).await.unwrap() == 1 {
                count += 1;
            }
        }
        count
    }
}

async fn exclusion_under_load(count: usize) {
    let nodes = Nodes::start(count).await;
    let managers = [
        nodes.manager(Duration::from_secs(30)).await,
        nodes.manager(Duration::from_secs(30)).await,
    ];
    let name = support::unique("redlock-load");
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let (manager, name) = (managers[worker % 2].clone(), name.clone());
        let (inside, done) = (inside.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let guard = manager
                    .lock(&name)
                    .wait(Duration::from_secs(60))
                    .acquire()
                    .await
                    .unwrap();
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 200);
    assert_eq!(nodes.holding(&name).await, 0, "released on every node");
    for manager in &managers {
        support::nothing_left_behind(manager).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_under_load_on_3_nodes() {
    exclusion_under_load(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_under_load_on_5_nodes() {
    exclusion_under_load(5).await;
}

/// A waiter behind a holder with a long lease is woken by the release's message, and
/// listens on every node while it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_woken_by_pub_sub_on_every_node() {
    let nodes = Nodes::start(3).await;
    let locks = nodes.manager(Duration::from_secs(30)).await;
    let name = support::unique("redlock-wake");
    let holder = locks
        .lock(&name)
        .fixed_lease(Duration::from_secs(300))
        .acquire()
        .await
        .unwrap();
    assert_eq!(nodes.holding(&name).await, 3);
    let waiter = {
        let (locks, name) = (locks.clone(), name.clone());
        tokio::spawn(async move {
            locks
                .lock(&name)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    let channel = format!("redisson_lock__channel:{{{name}}}");
    for admin in &nodes.admins {
        support::eventually("the waiter subscribed on every node", || async {
            (support::numsub(admin, &channel).await == 1).then_some(())
        })
        .await;
    }
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    let guard = waiter
        .await
        .unwrap()
        .expect("woken long before the 300 s lease");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

/// One node of three down: acquisitions still hold on the other two; two down: a clear
/// `Unavailable`, and nothing is left held on the one that answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_down_works_a_majority_down_is_unavailable() {
    let mut nodes = Nodes::start(3).await;
    let locks = nodes.manager(Duration::from_secs(30)).await;
    let name = support::unique("redlock-down");
    nodes.servers[0].stop();
    let guard = locks
        .lock(&name)
        .acquire()
        .await
        .expect("two of three suffice");
    assert_eq!(nodes.holding(&name).await, 2);
    let busy = locks.lock(&name).try_acquire().await.unwrap_err();
    assert!(matches!(busy, LockError::TimedOut { .. }), "{busy}");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    nodes.servers[1].stop();
    let error = locks.lock(&name).acquire().await.unwrap_err();
    match &error {
        LockError::Unavailable(error) => {
            let message = format!("{error:#}");
            // The nodes that answer and the quorum, not a generic "unreachable".
            assert!(
                message.contains("only 1 of 3 nodes") && message.contains("2 are needed"),
                "{message}"
            );
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    // (An attempt abandoned as a node's connection dropped is undone in the background.)
    support::eventually("nothing left on the node that answered", || async {
        (nodes.holding(&name).await == 0).then_some(())
    })
    .await;
    nodes.servers[0].resume();
    nodes.servers[1].resume();
    support::eventually("a majority back", || async {
        let guard = locks.lock(&name).try_acquire().await.ok()?;
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
        Some(())
    })
    .await;
}

/// Nodes restarted empty while a lock is held: the holder keeps it while a majority still
/// holds it (a rival gets a minority and fails), and its loss signal fires once fewer do.
async fn restarted_nodes_mid_hold(count: usize) {
    let mut nodes = Nodes::start(count).await;
    let lease = Duration::from_millis(900);
    let locks = nodes.manager(lease).await;
    let rival = nodes.manager(lease).await;
    let name = support::unique("redlock-restart");
    let guard = locks.lock(&name).acquire().await.unwrap();
    let tolerated = count - (count / 2 + 1);
    for at in 0..tolerated {
        nodes.servers[at].stop();
        nodes.servers[at].resume();
    }
    // The rival gets the restarted (empty) nodes only: a minority.
    let busy = rival.lock(&name).try_acquire().await.unwrap_err();
    assert!(matches!(busy, LockError::TimedOut { .. }), "{busy}");
    // A renewal after the restarts: the lease on a surviving node is set again.
    let survivor = &nodes.admins[count - 1];
    let before: i64 = survivor.pttl(&name).await.unwrap();
    support::eventually("a renewal after the restarts", || async {
        let now: i64 = survivor.pttl(&name).await.unwrap();
        (now > before).then_some(())
    })
    .await;
    assert!(!guard.is_lost(), "a majority still holds it");
    // One more restarted: fewer than a majority hold it now.
    nodes.servers[tolerated].stop();
    nodes.servers[tolerated].resume();
    guard.lost().await;
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
    let taken = rival
        .lock(&name)
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    assert_eq!(taken.release().await.unwrap(), Released::Unlocked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_nodes_mid_hold_on_3_nodes() {
    restarted_nodes_mid_hold(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_nodes_mid_hold_on_5_nodes() {
    restarted_nodes_mid_hold(5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fewer_than_three_nodes_and_other_kinds_are_refused() {
    let nodes = Nodes::start(3).await;
    let urls: Vec<String> = nodes.servers.iter().map(RedisServer::url).collect();
    let error = RedLockBackend::connect(&[urls[0].as_str(), urls[1].as_str()])
        .await
        .unwrap_err();
    assert!(error.to_string().contains("at least 3"), "{error}");
    // What RedLock lacks is refused at once, before any node is asked.
    let locks = nodes.manager(Duration::from_secs(30)).await;
    for (request, what) in [
        (locks.fair_lock("redlock-fair"), "fair locks"),
        (locks.fenced_lock("redlock-fenced"), "fenced locks"),
        (locks.read_lock("redlock-read"), "read locks"),
        (locks.semaphore("redlock-permits", 2), "semaphore locks"),
        (
            locks.lock("redlock-recorded").unless_recorded(),
            "locks with a record",
        ),
    ] {
        match request.acquire().await {
            Err(LockError::Unsupported {
                backend,
                what: missing,
            }) => {
                assert_eq!((backend, missing.as_str()), ("redlock", what))
            }
            other => panic!("{what}: expected Unsupported, got {other:?}"),
        }
    }
    assert!(!locks.capabilities().records && !locks.capabilities().inspects);
    support::nothing_left_behind(&locks).await;
}

/// Layers given a manager on RedLock that need what it lacks answer every request 500,
/// saying what is missing (and log it when the app is built): a fair `LockLayer`, and the
/// `IdempotencyLayer` (responses are stored with locks that have a record).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layers_needing_what_redlock_lacks_answer_500_naming_it() {
    use axum::routing::post;
    use tower_lock::idempotency::IdempotencyLayer;
    use tower_lock::layer::LockLayer;

    let nodes = Nodes::start(3).await;
    let locks = nodes.manager(Duration::from_secs(30)).await;
    let route = |path: &str| axum::Router::new().route(path, post(|| async { "ran" }));
    let app = axum::Router::new()
        .merge(
            route("/fair/{id}")
                .route_layer(LockLayer::by_path_param("id").fair().manager(locks.clone())),
        )
        .merge(route("/once").route_layer(IdempotencyLayer::new().manager(locks.clone())))
        .merge(
            route("/plain/{id}").route_layer(LockLayer::by_path_param("id").manager(locks.clone())),
        );
    let addr = support::http::serve(app).await;
    let fair = support::http::request(addr, "POST", "/fair/1", &[]).await;
    assert_eq!(fair.status, 500, "{}", fair.body);
    assert!(fair.body.contains("fair locks"), "{}", fair.body);
    let once = support::http::request(addr, "POST", "/once", &[("idempotency-key", "k")]).await;
    assert_eq!(once.status, 500, "{}", once.body);
    assert!(once.body.contains("no_records"), "{}", once.body);
    let plain = support::http::request(addr, "POST", "/plain/1", &[]).await;
    assert_eq!((plain.status, plain.body.as_str()), (200, "ran"));
    support::nothing_left_behind(&locks).await;
}
