//! Nothing grows with the number of distinct names: once their waiters are gone, every
//! per-name structure (wait queues, claims, pending subscription changes, renewals, the
//! memory backend's table, Redis subscriptions and keys) is back to where it started.

mod support;

use std::time::Duration;

use fred::prelude::*;
use support::RedisServer;
use tower_lock::backend::MemoryBackend;
use tower_lock::LockManager;

/// Takes each of `names` with a holder, queues a waiter behind it, releases, and lets the
/// waiter take and release it; `batch` names at a time.
async fn through_waiting(locks: &LockManager, names: Vec<String>, batch: usize) {
    for chunk in names.chunks(batch) {
        let rounds: Vec<_> = chunk
            .iter()
            .cloned()
            .map(|name| {
                let locks = locks.clone();
                tokio::spawn(async move {
                    let holder = locks.lock(&name).acquire().await.unwrap();
                    let waiter = support::spawn_waiter(&locks, &name, Duration::from_secs(30));
                    while locks.waiting(&name) == 0 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    let _ = holder.release().await.unwrap();
                    let guard = waiter.await.unwrap().unwrap();
                    let _ = guard.release().await.unwrap();
                })
            })
            .collect();
        for round in rounds {
            round.await.unwrap();
        }
    }
}

/// On the memory backend, every name that ever had a waiter used to stay in the set of
/// names whose subscription should change (about 96 B per name, for ever: nobody empties
/// it without Redis).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_names_leave_nothing_behind_in_memory() {
    let memory = MemoryBackend::new();
    let locks = LockManager::builder().backend(memory.clone());
    let names: Vec<String> = (0..100_000).map(|i| format!("order:{i}")).collect();
    through_waiting(&locks, names, 1_000).await;
    assert_eq!(
        locks.stats(),
        Default::default(),
        "waiters, claims, subscription changes or renewals left behind"
    );
    assert!(
        memory.is_empty(),
        "{} entries left in the lock table",
        memory.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_return_to_zero_after_ten_thousand_names() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let locks = LockManager::redis(&server.url()).await.unwrap();
    let metrics = tokio::runtime::Handle::current().metrics();
    // One acquisition first: the manager's renewal task starts with its first lock.
    let _ = locks
        .lock("warm-up")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let tasks_before = metrics.num_alive_tasks();
    let names: Vec<String> = (0..10_000).map(|i| format!("resource:{i}")).collect();
    through_waiting(&locks, names, 200).await;
    // The subscriber task finishes the last unsubscribes after the last waiter left (each
    // subscribe batch now waits for Redis's PING answer): wait for those, then check all.
    support::eventually("the last subscription changes done", || async {
        (locks.stats().subscription_changes == 0).then_some(())
    })
    .await;
    assert_eq!(
        locks.stats(),
        Default::default(),
        "waiters, claims or renewals left behind"
    );
    support::eventually("every unlock channel unsubscribed", || async {
        let channels: Vec<String> = admin
            .custom(
                fred::cmd!("PUBSUB"),
                vec!["CHANNELS", "redisson_lock__channel:*"],
            )
            .await
            .unwrap();
        channels.is_empty().then_some(())
    })
    .await;
    let tasks_after = support::eventually("background tasks back to where they were", || async {
        let alive = metrics.num_alive_tasks();
        (alive <= tasks_before).then_some(alive)
    })
    .await;
    assert!(tasks_after <= tasks_before);
    let keys: i64 = admin
        .custom(fred::cmd!("DBSIZE"), Vec::<String>::new())
        .await
        .unwrap();
    assert_eq!(keys, 0, "no lock or other key left behind");
}
