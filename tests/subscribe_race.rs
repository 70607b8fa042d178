//! A waiter retries once its subscription is in place, so that an unlock published between
//! its busy attempt and the subscription is not missed. "In place" must mean Redis has
//! processed the SUBSCRIBE, not that it was written: fred answers SUBSCRIBE on writing it.
//! Here the subscriber's link is held back (a slow link) while the lock is released: the
//! waiter must still get the lock within its wait, long before the holder's lease ends.

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use fred::prelude::*;
use support::proxy::Proxy;
use tower_lock::backend::RedisBackend;
use tower_lock::lock::Released;
use tower_lock::LockManager;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_before_redis_reads_the_subscribe_is_not_missed() {
    let server = support::RedisServer::start();
    let admin = support::client(&server.url()).await;
    let proxy = Proxy::start(server.port()).await;
    // Commands go straight to Redis; the subscriber's connection through the proxy.
    let commands = support::client(&server.url()).await;
    let subscriber = Builder::from_config(Config::from_url(&proxy.url()).unwrap())
        .build_subscriber_client()
        .unwrap();
    subscriber.init().await.unwrap();
    let locks = LockManager::builder().backend(RedisBackend::from_clients(commands, subscriber));
    // The holder is another process: a second manager, straight to Redis.
    let other = LockManager::redis(&server.url()).await.unwrap();
    let holder = other
        .lock("slow-link")
        .fixed_lease(Duration::from_secs(300))
        .acquire()
        .await;
    let holder = holder.unwrap();
    let waiter_locks = locks.clone();
    let attempts = support::command_calls(&admin, "evalsha").await;
    proxy.hold_back();
    let waiter = tokio::spawn(async move {
        waiter_locks
            .lock("slow-link")
            .wait(Duration::from_secs(10))
            .acquire()
            .await
    });
    // The SUBSCRIBE is written (and held back), then either the waiter retries at once
    // (taking the write for the subscription) or the client confirms it with a PING.
    support::eventually(
        "the subscription written, then a retry or its confirmation",
        || async {
            let retried = support::command_calls(&admin, "evalsha").await >= attempts + 2;
            (proxy.holds("SUBSCRIBE") && (retried || proxy.holds("PING"))).then_some(())
        },
    )
    .await;
    // Released while Redis has not read the SUBSCRIBE: the notice reaches nobody.
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    proxy.let_through();
    let guard = waiter
        .await
        .unwrap()
        .expect("the waiter gets the freed lock within its wait");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}
