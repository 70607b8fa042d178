//! Wake-ups both ways: a release on one side wakes a waiter on the other by its unlock
//! message. Holds use [`LONG_LEASE`] and waiters wait at most [`WAKE_WAIT`], shorter, so a
//! waiter that gets the lock was woken by the release, never by the lease running out.
//! Latency is from the call of the release to the waiter holding the lock, both read off the
//! wall clock of this machine (Redisson stamps its side in microseconds).

use std::time::SystemTime;
use tower_lock::lock::Released;

use crate::support::redisson_java::micros_between;
use crate::{subscribed, summary, support, unlock_channel, Sides, Target, LONG_LEASE, WAKE_WAIT};

const ROUNDS: usize = 10;

/// tower-lock holds, Redisson waits (subscribed), tower-lock releases: Redisson must wake.
/// Returns the latency in microseconds.
pub async fn tower_lock_release_wakes_redisson(sides: &Sides, name: &str) -> i64 {
    let channel = unlock_channel(sides.locks.key(name).unwrap().as_str());
    let guard = sides
        .locks
        .lock(name)
        .fixed_lease(LONG_LEASE)
        .acquire()
        .await
        .unwrap();
    let before = crate::no_subscriber(&sides.admin, &channel).await;
    let key = guard.key().as_str().to_owned();
    let (java, released) = tokio::join!(
        sides
            .java
            .lock("waiter", "lock", &key, Some(WAKE_WAIT), Some(LONG_LEASE)),
        async {
            subscribed(&sides.admin, &channel, before).await;
            let started = SystemTime::now();
            assert_ne!(guard.release().await.expect("release"), Released::NotHeld);
            started
        }
    );
    assert!(
        java.acquired,
        "{key}: Redisson was not woken by tower-lock's release"
    );
    sides.java.unlock("waiter", "lock", &key).await.unwrap();
    micros_between(released, java.at)
}

/// Redisson holds, tower-lock waits (subscribed), Redisson releases: tower-lock must wake.
pub async fn redisson_release_wakes_tower_lock(sides: &Sides, name: &str) -> i64 {
    let key = sides.locks.key(name).unwrap().as_str().to_owned();
    let channel = unlock_channel(&key);
    let java = sides
        .java
        .lock("holder", "lock", &key, Some(WAKE_WAIT), Some(LONG_LEASE))
        .await;
    assert!(java.acquired, "{key}: Redisson gets the free lock");
    let before = crate::no_subscriber(&sides.admin, &channel).await;
    let (acquired, released) = tokio::join!(
        async {
            let guard = sides.locks.lock(name).wait(WAKE_WAIT).acquire().await;
            (guard, SystemTime::now())
        },
        async {
            subscribed(&sides.admin, &channel, before).await;
            sides.java.unlock("holder", "lock", &key).await.unwrap()
        }
    );
    let (guard, at) = acquired;
    let guard = guard.unwrap_or_else(|e| panic!("{key}: not woken by Redisson's unlock: {e}"));
    assert_ne!(guard.release().await.unwrap(), Released::NotHeld);
    micros_between(released.started, at)
}

/// For comparison, in the same run: Redisson waking Redisson (two threads of one client).
async fn redisson_release_wakes_redisson(sides: &Sides, name: &str) -> i64 {
    let channel = unlock_channel(name);
    let held = sides
        .java
        .lock("holder", "lock", name, None, Some(LONG_LEASE))
        .await;
    assert!(held.acquired);
    let before = crate::no_subscriber(&sides.admin, &channel).await;
    let (woken, released) = tokio::join!(
        sides
            .java
            .lock("waiter", "lock", name, Some(WAKE_WAIT), Some(LONG_LEASE)),
        async {
            subscribed(&sides.admin, &channel, before).await;
            sides.java.unlock("holder", "lock", name).await.unwrap()
        }
    );
    assert!(woken.acquired, "{name}: Redisson did not wake Redisson");
    sides.java.unlock("waiter", "lock", name).await.unwrap();
    micros_between(released.started, woken.at)
}

async fn wake_ups_both_ways(target: Target) {
    let sides = target.sides().await;
    let (mut to_java, mut to_rust, mut java_to_java) = (Vec::new(), Vec::new(), Vec::new());
    // A name of its own per step: a subscription of the step before, which either client
    // drops in its own time, must not hide (or stand for) the waiter's new one.
    let fresh = || support::unique("interop-wake");
    for _ in 0..ROUNDS {
        to_java.push(tower_lock_release_wakes_redisson(&sides, &fresh()).await);
        to_rust.push(redisson_release_wakes_tower_lock(&sides, &fresh()).await);
        java_to_java.push(redisson_release_wakes_redisson(&sides, &fresh()).await);
    }
    println!(
        "{target:?} wake-up, tower-lock release → Redisson holds: {}",
        summary(&mut to_java)
    );
    println!(
        "{target:?} wake-up, Redisson unlock → tower-lock holds: {}",
        summary(&mut to_rust)
    );
    println!(
        "{target:?} wake-up, Redisson unlock → Redisson holds (for comparison): {}",
        summary(&mut java_to_java)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server() {
    wake_ups_both_ways(Target::Single).await;
}

/// On a Redis 7 cluster Redisson waits with SSUBSCRIBE (its default sharded mode): the
/// subscription counted is `PUBSUB SHARDNUMSUB` at the channel's node, and tower-lock's
/// SPUBLISH reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_with_sharded_pub_sub() {
    wake_ups_both_ways(Target::Cluster).await;
}
