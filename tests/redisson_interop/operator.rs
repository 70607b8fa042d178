//! What operators see of Redisson's holds, and what a force-unlock does to both sides: a
//! Java holder's owner (`<client id>:<thread id>`), count and lease read back; a
//! tower-lock force-unlock wakes a Redisson waiter and fires the tower-lock holder's loss
//! signal; a Redisson read lock and semaphore permit are inspected as such.

use std::time::Duration;

use tower_lock::admin::{HolderSide, InspectedKind};
use tower_lock::lock::Released;
use tower_lock::LockManager;

use crate::{support, Target, LONG_LEASE};

async fn a_redisson_holder_is_read_back(target: Target) {
    let sides = target.sides().await;
    let name = support::unique("interop-inspect");
    for _ in 0..2 {
        assert!(sides.java_gets_now("j", &name).await);
    }
    let java_owner = sides.java.owner("j").await;
    let info = sides.locks.inspect(&name).await.unwrap();
    assert_eq!(info.kind, Some(InspectedKind::Lock));
    let holder = &info.holders[0];
    assert_eq!(holder.owner, java_owner);
    assert_eq!(holder.process(), Some(sides.java.client_id.as_str()));
    assert!(
        holder.thread().is_some(),
        "a Java thread id: {}",
        holder.owner
    );
    assert_eq!(holder.holds, 2);
    let lease = holder.lease.expect("Redisson's lease");
    assert!(lease <= LONG_LEASE && lease > LONG_LEASE / 2, "{lease:?}");
    for _ in 0..2 {
        sides.java.unlock("j", "lock", &name).await.unwrap();
    }

    // A Redisson reader, and a Redisson permit.
    let rw = support::unique("interop-inspect-rw");
    assert!(sides.java_gets("j", "read", &rw).await);
    let info = sides.locks.inspect(&rw).await.unwrap();
    assert_eq!(info.kind, Some(InspectedKind::ReadWrite));
    assert_eq!(
        (info.holders[0].owner.as_str(), info.holders[0].side),
        (java_owner.as_str(), HolderSide::Read)
    );
    assert!(info.holders[0].lease.is_some());
    sides.java.unlock("j", "read", &rw).await.unwrap();
    let sem = support::unique("interop-inspect-sem");
    assert_eq!(
        sides.java.call(&format!("sem_set {sem} 4")).await.unwrap(),
        "true"
    );
    let answer = sides
        .java
        .call(&format!("sem_acquire {sem} 1 0 {}", LONG_LEASE.as_millis()))
        .await
        .unwrap();
    let id = answer
        .strip_prefix("acquired ids=")
        .expect("a permit")
        .to_owned();
    let info = sides.locks.inspect(&sem).await.unwrap();
    assert_eq!(info.kind, Some(InspectedKind::Semaphore));
    let usage = info.permits.unwrap();
    assert_eq!((usage.limit, usage.in_use), (Some(4), 1));
    assert_eq!(
        info.holders[0].owner, id,
        "Redisson's permit id, as it shows it"
    );
    sides
        .java
        .call(&format!("sem_release {sem} {id}"))
        .await
        .unwrap();
}

async fn a_force_unlock_wakes_redisson_and_tells_our_holder(target: Target) {
    let url = target.url();
    let sides = target
        .sides_with(LockManager::builder().lease(Duration::from_secs(3)))
        .await;
    let name = support::unique("interop-force");
    let holder = sides.locks.lock(&name).acquire().await.unwrap();
    let channel = crate::unlock_channel(&name);
    let before = crate::no_subscriber(&sides.admin, &channel).await;
    let java = sides.java.clone();
    let java_name = name.clone();
    // Redisson waits less than our holder's lease (renewed every second): only the
    // force-unlock's message can let it in.
    let waiter = tokio::spawn(async move {
        java.lock(
            "j",
            "lock",
            &java_name,
            Some(Duration::from_millis(1500)),
            Some(LONG_LEASE),
        )
        .await
    });
    crate::subscribed(&sides.admin, &channel, before).await;
    let operator = LockManager::redis(&url).await.unwrap();
    let freed = operator
        .force_unlock(&name, "the interop test")
        .await
        .unwrap();
    assert_eq!((freed.kind, freed.freed), (Some(InspectedKind::Lock), 1));
    assert!(
        waiter.await.unwrap().acquired,
        "Redisson's waiter woken by the force-unlock"
    );
    holder.lost().await;
    assert_eq!(holder.release().await.unwrap(), Released::NotHeld);
    assert!(
        sides.java.is_locked("lock", &name).await,
        "Redisson's hold was left alone"
    );
    sides.java.unlock("j", "lock", &name).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_holders_inspected_single_server() {
    a_redisson_holder_is_read_back(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_holders_inspected_cluster() {
    a_redisson_holder_is_read_back(Target::Cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_wakes_redisson_single_server() {
    a_force_unlock_wakes_redisson_and_tells_our_holder(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_wakes_redisson_cluster() {
    a_force_unlock_wakes_redisson_and_tells_our_holder(Target::Cluster).await;
}
