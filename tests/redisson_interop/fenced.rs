//! `RFencedLock` against tower-lock's fenced lock: one counter for both sides, so that the
//! tokens given by Redisson and by tower-lock, reentries included, only grow in the order
//! the holders took the lock; each side excludes the other and wakes the other's waiter.

use tower_lock::lock::Released;
use tower_lock::LockError;

use crate::{support, Target, LONG_LEASE, WAKE_WAIT};

async fn both_sides_share_one_counter(target: Target) {
    let sides = target.sides().await;
    let name = support::unique("interop-fenced");
    let mut tokens = Vec::new();
    for round in 0..3 {
        // Redisson's acquisition: its token.
        let java = sides
            .java
            .lock("j", "fenced", &name, Some(WAKE_WAIT), Some(LONG_LEASE))
            .await;
        assert!(java.acquired, "round {round}: Redisson takes the free lock");
        tokens.push(java.token.expect("Redisson answers a token"));
        // Ours waits, excluded, and is woken by Redisson's release.
        let busy = sides
            .locks
            .fenced_lock(&name)
            .try_acquire()
            .await
            .unwrap_err();
        assert!(matches!(busy, LockError::TimedOut { .. }), "{busy}");
        let channel = crate::unlock_channel(&name);
        let before = crate::no_subscriber(&sides.admin, &channel).await;
        let waiter = {
            let (locks, name) = (sides.locks.clone(), name.clone());
            tokio::spawn(async move { locks.fenced_lock(&name).wait(WAKE_WAIT).acquire().await })
        };
        crate::subscribed(&sides.admin, &channel, before).await;
        sides.java.unlock("j", "fenced", &name).await.unwrap();
        let ours = waiter.await.unwrap().expect("woken by Redisson's release");
        tokens.push(ours.fencing_token().unwrap());
        let again = ours.reenter().await.unwrap();
        tokens.push(again.fencing_token().unwrap());
        // Redisson's getToken() reads the same counter; its lock is ours until released.
        let current: u64 = sides
            .java
            .call(&format!("token {name}"))
            .await
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(current, *tokens.last().unwrap());
        assert!(
            !sides.java_gets("j", "fenced", &name).await,
            "excluded by ours"
        );
        assert_eq!(again.release().await.unwrap(), Released::StillHeld);
        assert_eq!(ours.release().await.unwrap(), Released::Unlocked);
    }
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "Redisson's and ours in holding order: {tokens:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_counter_single_server() {
    both_sides_share_one_counter(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_counter_cluster() {
    both_sides_share_one_counter(Target::Cluster).await;
}
