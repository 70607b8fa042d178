//! `RPermitExpirableSemaphore` against tower-lock's semaphore: one limit for both sides
//! (each side's permits count against the other's acquisitions), each side's release wakes
//! the other's waiter, and the permit of a dead holder of either side (a lease that nobody
//! renews) is reclaimed by the other side's acquisition.

use std::time::{Duration, Instant};

use tower_lock::lock::Released;
use tower_lock::LockError;

use crate::{support, Target, LONG_LEASE, WAKE_WAIT};

/// Redisson's channel of the semaphore `name` (no braces in `name`).
fn channel(name: &str) -> String {
    format!("redisson_sc:{{{name}}}")
}

fn ids(answer: &str) -> String {
    answer
        .strip_prefix("acquired ids=")
        .unwrap_or_else(|| panic!("Redisson acquired: {answer}"))
        .to_owned()
}

async fn java_acquire(sides: &crate::Sides, name: &str, permits: u32, wait: Duration) -> String {
    let lease = LONG_LEASE.as_millis();
    sides
        .java
        .call(&format!(
            "sem_acquire {name} {permits} {} {lease}",
            wait.as_millis()
        ))
        .await
        .unwrap()
}

async fn both_sides_share_one_limit(target: Target) {
    one_limit_on(&target.sides().await).await;
}

/// [`both_sides_share_one_limit`] on `sides` (also through Sentinel).
pub(crate) async fn one_limit_on(sides: &crate::Sides) {
    let name = support::unique("interop-sem-limit");
    let set = sides.java.call(&format!("sem_set {name} 3")).await.unwrap();
    assert_eq!(set, "true");
    let java = ids(&java_acquire(sides, &name, 2, Duration::ZERO).await);
    // Redisson's two permits count against ours: one is left.
    let ours = sides.locks.semaphore(&name, 3).try_acquire().await.unwrap();
    let busy = sides
        .locks
        .semaphore(&name, 3)
        .try_acquire()
        .await
        .unwrap_err();
    assert!(matches!(busy, LockError::TimedOut { .. }), "{busy}");
    // Ours counts against Redisson's.
    assert_eq!(java_acquire(sides, &name, 1, Duration::ZERO).await, "busy");
    let acquired: u32 = sides
        .java
        .call(&format!("sem_acquired {name}"))
        .await
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        acquired, 3,
        "Redisson counts our permit among the acquired ones"
    );
    let usage = sides.locks.semaphore_usage(&name).await.unwrap();
    assert_eq!((usage.limit, usage.in_use), (Some(3), 3));
    // Redisson's ids are the 16-byte members ours are stored as, and ours read as its.
    assert_eq!(ours.permit_ids()[0].len(), 32);
    assert_eq!(ours.release().await.unwrap(), Released::Unlocked);
    let again = ids(&java_acquire(sides, &name, 1, Duration::ZERO).await);
    let released = sides
        .java
        .call(&format!("sem_release {name} {java},{again}"))
        .await
        .unwrap();
    assert_eq!(released, "3", "Redisson released its three permits");
    let available = sides
        .java
        .call(&format!("sem_available {name}"))
        .await
        .unwrap();
    assert_eq!(available, "3");
}

async fn each_sides_release_wakes_the_others_waiter(target: Target) {
    wakes_both_ways_on(&target.sides().await).await;
}

/// [`each_sides_release_wakes_the_others_waiter`] on `sides` (also through Sentinel).
pub(crate) async fn wakes_both_ways_on(sides: &crate::Sides) {
    let name = support::unique("interop-sem-wake");
    let channel = channel(&name);
    // Redisson holds the only permit; ours waits and is woken by its release.
    assert_eq!(
        sides.java.call(&format!("sem_set {name} 1")).await.unwrap(),
        "true"
    );
    let java = ids(&java_acquire(sides, &name, 1, Duration::ZERO).await);
    let before = crate::no_subscriber(&sides.admin, &channel).await;
    let waiter = {
        let (locks, name) = (sides.locks.clone(), name.clone());
        tokio::spawn(async move { locks.semaphore(&name, 1).wait(WAKE_WAIT).acquire().await })
    };
    crate::subscribed(&sides.admin, &channel, before).await;
    let released = sides.java.call(&format!("sem_release {name} {java}")).await;
    assert_eq!(released.unwrap(), "1");
    let ours = waiter.await.unwrap().expect("woken by Redisson's release");
    // Ours holds it (a lease renewed by the watchdog); Redisson waits and is woken by ours.
    let before = crate::no_subscriber(&sides.admin, &channel).await;
    let java_waiter = {
        let (sides_java, name) = (sides.java.clone(), name.clone());
        tokio::spawn(async move {
            let lease = LONG_LEASE.as_millis();
            let wait = WAKE_WAIT.as_millis();
            sides_java
                .call(&format!("sem_acquire {name} 1 {wait} {lease}"))
                .await
                .unwrap()
        })
    };
    crate::subscribed(&sides.admin, &channel, before).await;
    assert_eq!(ours.release().await.unwrap(), Released::Unlocked);
    let java = ids(&java_waiter.await.unwrap());
    let released = sides.java.call(&format!("sem_release {name} {java}")).await;
    assert_eq!(
        released.unwrap(),
        "1",
        "Redisson released the permit it got"
    );
}

async fn a_dead_holders_permit_is_reclaimed_by_the_other_side(target: Target) {
    let sides = target.sides().await;
    let lease = Duration::from_millis(500);
    // A Redisson holder that died: its permit has a lease nobody renews (Redisson has no
    // watchdog for permits); our acquisition reclaims it once the lease ended.
    let name = support::unique("interop-sem-dead-java");
    assert_eq!(
        sides.java.call(&format!("sem_set {name} 1")).await.unwrap(),
        "true"
    );
    let answer = sides
        .java
        .call(&format!("sem_acquire {name} 1 0 {}", lease.as_millis()))
        .await
        .unwrap();
    ids(&answer);
    let asked = Instant::now();
    let ours = sides
        .locks
        .semaphore(&name, 1)
        .wait(WAKE_WAIT)
        .acquire()
        .await
        .expect("the dead Redisson holder's permit is reclaimed");
    eprintln!(
        "ours got the dead Redisson holder's permit after {:?}",
        asked.elapsed()
    );
    assert_eq!(ours.release().await.unwrap(), Released::Unlocked);
    // Ours, dead: a fixed lease and a guard that is never released (a crash).
    let name = support::unique("interop-sem-dead-ours");
    let dead = sides
        .locks
        .semaphore(&name, 1)
        .fixed_lease(lease)
        .acquire()
        .await
        .unwrap();
    std::mem::forget(dead);
    let answer = java_acquire(&sides, &name, 1, WAKE_WAIT).await;
    let java = ids(&answer);
    let released = sides.java.call(&format!("sem_release {name} {java}")).await;
    assert_eq!(
        released.unwrap(),
        "1",
        "Redisson released the permit it got"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_limit_single_server() {
    both_sides_share_one_limit(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_limit_cluster() {
    both_sides_share_one_limit(Target::Cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wakes_both_ways_single_server() {
    each_sides_release_wakes_the_others_waiter(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wakes_both_ways_cluster() {
    each_sides_release_wakes_the_others_waiter(Target::Cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_permits_reclaimed_single_server() {
    a_dead_holders_permit_is_reclaimed_by_the_other_side(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_permits_reclaimed_cluster() {
    a_dead_holders_permit_is_reclaimed_by_the_other_side(Target::Cluster).await;
}
