//! Through Sentinel: both sides find the master by asking the sentinel, then exclude and wake
//! each other there (a lock, and a semaphore's permits).

use tower_lock::LockManager;

use crate::semaphore::{one_limit_on, wakes_both_ways_on};
use crate::support::redisson_java::Deployment;
use crate::support::{self, RedisServer};
use crate::wake_ups::{redisson_release_wakes_tower_lock, tower_lock_release_wakes_redisson};
use crate::Sides;

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
    sides.exclude_each_other(&name).await;
    tower_lock_release_wakes_redisson(&sides, &name).await;
    redisson_release_wakes_tower_lock(&sides, &name).await;
    // A semaphore: one limit, and each side's release wakes the other's waiter.
    one_limit_on(&sides).await;
    wakes_both_ways_on(&sides).await;
}
