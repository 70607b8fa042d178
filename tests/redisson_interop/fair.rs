//! `RFairLock` against tower-lock's fair lock: Java and Rust waiters in one queue get the
//! lock in the order they arrived, each side's release wakes the other side's head by its
//! own channel (`redisson_lock__channel:{name}:<owner>`, long before any lease or queue
//! deadline), and the queue and deadline set are empty afterwards.

use std::sync::{Arc, Mutex};

use fred::prelude::{ListInterface, SortedSetsInterface};
use tower_lock::lock::Released;
use tower_lock::LockManager;

use crate::{support, Target, LONG_LEASE, WAKE_WAIT};

async fn java_and_rust_waiters_share_one_queue(target: Target) {
    // Both sides' places move up by the same timeout: Redisson's is its tryLock wait.
    let sides = target
        .sides_with(LockManager::builder().fair_queue_timeout(WAKE_WAIT))
        .await;
    let name = support::unique("interop-fair");
    let (queue, deadlines) = support::fair_keys(&name);
    assert!(sides.java_gets("j0", "fair", &name).await);
    let order = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut waiters = Vec::new();
    // R1, J1, R2, J2, R3, J3: each starts once the one before has its place.
    for n in 1..=6 {
        let mark = if n % 2 == 1 {
            format!("rust{n}")
        } else {
            format!("java{n}")
        };
        let task = if n % 2 == 1 {
            let (locks, name, order, mark) = (
                sides.locks.clone(),
                name.clone(),
                order.clone(),
                mark.clone(),
            );
            tokio::spawn(async move {
                let guard = locks
                    .fair_lock(&name)
                    .fixed_lease(LONG_LEASE)
                    .wait(WAKE_WAIT)
                    .acquire()
                    .await
                    .unwrap_or_else(|e| panic!("{mark}: {e}"));
                order.lock().unwrap().push(mark);
                assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
            })
        } else {
            let (java, name, order, mark) = (
                sides.java.clone(),
                name.clone(),
                order.clone(),
                mark.clone(),
            );
            tokio::spawn(async move {
                let taken = java
                    .lock(&mark, "fair", &name, Some(WAKE_WAIT), Some(LONG_LEASE))
                    .await;
                assert!(taken.acquired, "{mark} got the lock within its wait");
                order.lock().unwrap().push(mark.clone());
                java.unlock(&mark, "fair", &name).await.unwrap();
            })
        };
        waiters.push(task);
        support::fair_queued(&sides.admin, &name, n).await;
    }
    sides.java.unlock("j0", "fair", &name).await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(
        *order.lock().unwrap(),
        ["rust1", "java2", "rust3", "java4", "rust5", "java6"]
    );
    let places: usize = sides.admin.llen(&queue).await.unwrap();
    let left: usize = sides.admin.zcard(&deadlines).await.unwrap();
    assert_eq!((places, left), (0, 0));
}

/// A Redisson waiter behind our holder is woken by our release (on its own channel), and
/// ours behind Redisson's holder by Redisson's, both well within the wait.
async fn each_side_wakes_the_others_head(target: Target) {
    let sides = target.sides().await;
    let name = support::unique("interop-fair-wake");
    let ours = sides
        .locks
        .fair_lock(&name)
        .fixed_lease(LONG_LEASE)
        .acquire()
        .await
        .unwrap();
    let java = {
        let (java, name) = (sides.java.clone(), name.clone());
        tokio::spawn(async move {
            java.lock("jw", "fair", &name, Some(WAKE_WAIT), Some(LONG_LEASE))
                .await
        })
    };
    support::fair_queued(&sides.admin, &name, 1).await; // Redisson's waiter
    assert_eq!(ours.release().await.unwrap(), Released::Unlocked);
    assert!(java.await.unwrap().acquired, "woken by our release");
    let waiter = {
        let (locks, name) = (sides.locks.clone(), name.clone());
        tokio::spawn(async move { locks.fair_lock(&name).wait(WAKE_WAIT).acquire().await })
    };
    let queued = support::fair_queued(&sides.admin, &name, 1).await; // ours
                                                                     // Our waiter listens on its own channel (the signal that it waits by pub/sub).
    let channel = format!("{}:{}", crate::unlock_channel(&name), queued[0]);
    crate::subscribed(&sides.admin, &channel, 0).await;
    sides.java.unlock("jw", "fair", &name).await.unwrap();
    let guard = waiter.await.unwrap().expect("woken by Redisson's release");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_queue_single_server() {
    java_and_rust_waiters_share_one_queue(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_queue_cluster() {
    java_and_rust_waiters_share_one_queue(Target::Cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wake_ups_single_server() {
    each_side_wakes_the_others_head(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wake_ups_cluster() {
    each_side_wakes_the_others_head(Target::Cluster).await;
}
