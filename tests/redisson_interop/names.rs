//! Names with braces (cluster hash tags) and a key prefix: both sides agree on the lock key
//! and its unlock channel, so they exclude and wake each other. On a cluster the key and
//! channel must also share a slot for the scripts that publish: names whose braces form no
//! hash tag (`x{}y`, `a}b`) break Redisson there (it locks them but its unlock fails with
//! CROSSSLOT, so the lock stays until its lease ends), and tower-lock refuses them up front.

use std::time::Duration;
use tower_lock::lock::Released;

use tower_lock::{LockError, LockManager};

use crate::wake_ups::{redisson_release_wakes_tower_lock, tower_lock_release_wakes_redisson};
use crate::{support, unlock_channel, Target, LONG_LEASE, WAKE_WAIT};

/// Names as an application would write them, with a run-unique part, and whether their
/// braces (if any) keep the key and Redisson's channel for it in one cluster slot.
fn names() -> Vec<(String, bool)> {
    let run = support::unique("n").replace(':', "-");
    vec![
        (format!("plain:{run}"), true),
        (format!("{{order-{run}}}:42"), true),
        (format!("tenant:{{{run}}}:order:9"), true),
        (format!("a{{{run}}}c{{d}}"), true),
        (format!("x{{}}y-{run}"), false),
        (format!("{run}}}z"), false),
    ]
}

async fn names_with_braces_and_a_prefix(target: Target) {
    let sides = target
        .sides_with(LockManager::builder().key_prefix("app:"))
        .await;
    for (name, one_slot) in names() {
        let key = format!("app:{name}");
        if matches!(target, Target::Cluster) && !one_slot {
            let refused = sides.locks.lock(&name).try_acquire().await;
            assert!(
                matches!(&refused, Err(LockError::InvalidName { reason }) if reason.contains("hash tag")),
                "{key}: {refused:?}"
            );
            let lease = Some(Duration::from_secs(1));
            let java = sides
                .java
                .lock("j", "lock", &key, Some(Duration::ZERO), lease)
                .await;
            assert!(java.acquired);
            let unlock = sides.java.unlock("j", "lock", &key).await;
            assert!(
                unlock.as_ref().is_err_and(|e| e.contains("CROSSSLOT")),
                "{key}: Redisson's unlock on a cluster: {unlock:?} (if it works now, update \
                 docs/redisson.md and tower-lock's name check)"
            );
            continue;
        }
        assert_eq!(sides.locks.key(&name).unwrap().as_str(), key);
        assert_eq!(key, format!("app:{name}"));

        sides.exclude_each_other(&name).await;
        // Wake-ups both ways.
        tower_lock_release_wakes_redisson(&sides, &name).await;
        redisson_release_wakes_tower_lock(&sides, &name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server() {
    names_with_braces_and_a_prefix(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster() {
    names_with_braces_and_a_prefix(Target::Cluster).await;
}

/// `k` and `{k}` share Redisson's channel `redisson_lock__channel:{k}`. tower-lock keeps it
/// subscribed while either has local waiters: when `k`'s waiter has its lock and leaves, an
/// unlock of `{k}` still wakes `{k}`'s waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_sharing_a_channel_keep_it_until_both_leave() {
    let sides = Target::Single.sides().await;
    let bare = support::unique("shared").replace(':', "-");
    let braced = format!("{{{bare}}}");
    let channel = unlock_channel(&bare);
    assert_eq!(channel, unlock_channel(&braced));
    for name in [&bare, &braced] {
        assert!(
            sides
                .java
                .lock("j", "lock", name, Some(Duration::ZERO), Some(LONG_LEASE))
                .await
                .acquired
        );
    }
    let waiters: Vec<_> = [&bare, &braced]
        .into_iter()
        .map(|name| support::spawn_waiter(&sides.locks, name, WAKE_WAIT))
        .collect();
    support::eventually("one subscription for both names", || async {
        (sides.locks.waiting_names() == 2 && support::numsub(&sides.admin, &channel).await == 1)
            .then_some(())
    })
    .await;
    let [bare_waiter, braced_waiter] = <[_; 2]>::try_from(waiters).ok().unwrap();

    sides.java.unlock("j", "lock", &bare).await.unwrap();
    let guard = bare_waiter
        .await
        .unwrap()
        .expect("woken by Redisson's unlock of k");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    // The subscriber task handles changes in order: once a later name's channel is
    // subscribed, `k`'s departure has been handled too.
    let later = support::unique("later");
    let holder = sides
        .locks
        .lock(&later)
        .fixed_lease(LONG_LEASE)
        .acquire()
        .await
        .unwrap();
    let later_waiter = support::spawn_waiter(&sides.locks, &later, WAKE_WAIT);
    crate::subscribed(&sides.admin, &unlock_channel(&later), 0).await;
    assert_eq!(
        support::numsub(&sides.admin, &channel).await,
        1,
        "{{k}} still waits on it"
    );

    sides.java.unlock("j", "lock", &braced).await.unwrap();
    let guard = braced_waiter
        .await
        .unwrap()
        .expect("woken by Redisson's unlock of {k}");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    assert_ne!(holder.release().await.unwrap(), Released::NotHeld);
    let guard = later_waiter.await.unwrap().unwrap();
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}
