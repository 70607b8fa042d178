//! Through Sentinel: both sides find the master by asking the sentinel, then exclude and wake
//! each other there.

use std::time::Duration;
use tower_lock::Released;

use tower_lock::LockManager;

use crate::support::redisson_java::Deployment;
use crate::support::{self, RedisServer};
use crate::wake_ups::{redisson_release_wakes_tower_lock, tower_lock_release_wakes_redisson};
use crate::{Sides, LONG_LEASE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_sentinel() {
    let master = RedisServer::start();
    let sentinel = RedisServer::start_sentinel(master.port());
    let sides = Sides::connect(
        &format!(
            "redis-sentinel://127.0.0.1:{}?sentinelServiceName=mymaster",
            sentinel.port()
        ),
        Deployment::Sentinel(vec![sentinel.url()]),
        None,
        LockManager::builder(),
    )
    .await;
    let name = support::unique("interop-sentinel");
    let guard = sides
        .locks
        .lock(&name)
        .fixed_lease(LONG_LEASE)
        .acquire()
        .await
        .unwrap();
    let java = sides
        .java
        .lock("j", "lock", &name, Some(Duration::ZERO), None)
        .await;
    assert!(!java.acquired);
    assert_ne!(guard.release().await.unwrap(), Released::NotHeld);
    tower_lock_release_wakes_redisson(&sides, &name).await;
    redisson_release_wakes_tower_lock(&sides, &name).await;
}
