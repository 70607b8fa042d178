//! One hold seen from both sides: reentry counts, and Redisson's `forceUnlock` on a hold of
//! tower-lock's.

use std::time::Duration;

use fred::prelude::*;
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

use crate::{support, Target};

/// The reentry count stored for `owner` in the lock hash `key` (0: no such field).
async fn stored_count(admin: &Client, key: &str, owner: &str) -> i64 {
    let count: Option<i64> = admin.hget(key, owner).await.unwrap();
    count.unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentry_counts_are_seen_alike() {
    let sides = Target::Single.sides().await;
    let name = support::unique("interop-reentry");

    // tower-lock enters three times: one hash field counting 3, which Redisson respects
    // until the last release.
    let first = sides.locks.lock(&name).acquire().await.unwrap();
    let second = first.reenter().await.unwrap();
    let third = second.reenter().await.unwrap();
    let owner = first.owner().as_str().to_owned();
    assert_eq!(stored_count(&sides.admin, &name, &owner).await, 3);
    assert!(sides.java.is_locked("lock", &name).await);
    let not_held = sides.java.unlock("other", "lock", &name).await;
    assert!(
        not_held.is_err_and(|e| e.starts_with("IllegalMonitorStateException")),
        "Redisson cannot unlock a hold of tower-lock's"
    );
    for (guard, left) in [(third, 2), (second, 1)] {
        assert_eq!(guard.release().await.unwrap(), Released::StillHeld);
        assert_eq!(stored_count(&sides.admin, &name, &owner).await, left);
        assert!(!sides.java_gets_now("j", &name).await, "{left} holds left");
    }
    assert_eq!(first.release().await.unwrap(), Released::Unlocked);
    assert!(sides.java_gets_now("j", &name).await);

    // Redisson enters twice more (three in all): tower-lock waits until its last unlock.
    assert!(sides.java_gets_now("j", &name).await);
    assert!(sides.java_gets_now("j", &name).await);
    assert_eq!(sides.java.hold_count("j", "lock", &name).await, 3);
    let java_owner = sides.java.owner("j").await;
    assert!(java_owner.starts_with(&sides.java.client_id));
    assert_eq!(stored_count(&sides.admin, &name, &java_owner).await, 3);
    for left in [2, 1] {
        sides.java.unlock("j", "lock", &name).await.unwrap();
        assert_eq!(sides.java.hold_count("j", "lock", &name).await, left);
        assert_eq!(
            stored_count(&sides.admin, &name, &java_owner).await,
            left as i64
        );
        assert!(matches!(
            sides.locks.lock(&name).try_acquire().await,
            Err(LockError::TimedOut { .. })
        ));
    }
    sides.java.unlock("j", "lock", &name).await.unwrap();
    let guard = sides.locks.lock(&name).try_acquire().await.unwrap();
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    assert!(!sides.java.is_locked("lock", &name).await);
}

/// `forceUnlock` deletes the lock whoever holds it. tower-lock's holder learns it at its
/// next renewal: the loss signal fires, and its release then reports `NotHeld` and leaves
/// the new holder's lock alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_from_redisson_fires_the_loss_signal() {
    // A short lease: renewals every few hundred milliseconds.
    let sides = Target::Single
        .sides_with(LockManager::builder().lease(Duration::from_secs(2)))
        .await;
    let name = support::unique("interop-force");
    let guard = sides.locks.lock(&name).acquire().await.unwrap();
    assert!(guard.is_renewed());
    assert!(
        sides.java.force_unlock("lock", &name).await,
        "there was a lock"
    );
    assert!(
        sides.java_gets_now("j", &name).await,
        "force-unlock freed it"
    );
    tokio::time::timeout(Duration::from_secs(30), guard.lost())
        .await
        .expect("the loss signal fires at the next renewal");
    assert!(guard.is_lost());
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
    assert!(
        sides.java.held("j", "lock", &name).await,
        "Redisson's hold is intact"
    );
    sides.java.unlock("j", "lock", &name).await.unwrap();

    // Force-unlocked while nobody takes it over: lost all the same.
    let guard = sides.locks.lock(&name).acquire().await.unwrap();
    assert!(sides.java.force_unlock("lock", &name).await);
    tokio::time::timeout(Duration::from_secs(30), guard.lost())
        .await
        .expect("the loss signal fires at the next renewal");
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
    assert!(!sides.java.is_locked("lock", &name).await);
}
