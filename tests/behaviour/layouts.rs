//! What only Redis shows, on one server and the Cluster: Redisson's layouts for a reentry, a
//! fenced lock's token counter, a semaphore's permits and a hand-over of them; records and
//! their locks deleted; subscriptions given up when the last waiter leaves; operations of
//! concurrent tasks batched. (The behaviour itself is the conformance suite's.)

use std::time::Duration;

use fred::prelude::*;
use tower_lock::backend::{AcquireArgs, Attempt, Backend, RedisBackend, ReleaseArgs, Successor};
use tower_lock::lock::{LockKind, OwnerId, Permits, Released};
use tower_lock::LockManager;

use crate::support;
use crate::support::suite::{backend_suite, BackendUnderTest};

async fn manager_and_client(backend: BackendUnderTest) -> (LockManager, Client) {
    let url = backend.url().expect("a Redis backend");
    (
        backend.manager(LockManager::builder()).await,
        support::client(&url).await,
    )
}

/// Two holds of one owner: the count 2 in the Redisson hash, under the owner id.
async fn a_reentry_counts_in_redissons_hash(backend: BackendUnderTest) {
    let (locks, redis) = manager_and_client(backend).await;
    let name = support::unique("layout-reentry");
    let outer = locks.lock(&name).acquire().await.unwrap();
    let inner = outer.reenter().await.unwrap();
    let count: i64 = redis.hget(&name, outer.owner().as_str()).await.unwrap();
    assert_eq!(count, 2);
    assert_eq!(inner.release().await.unwrap(), Released::StillHeld);
    assert_eq!(outer.release().await.unwrap(), Released::Unlocked);
}

/// The fenced lock's counter: the last token given, and no expiry.
async fn the_token_counter_keeps_the_last_token_forever(backend: BackendUnderTest) {
    let (locks, redis) = manager_and_client(backend).await;
    let name = support::unique("layout-fenced");
    let guard = locks.fenced_lock(&name).acquire().await.unwrap();
    let token = guard.fencing_token().unwrap();
    let tokens = support::fencing_tokens_key(&name);
    let stored: u64 = redis.get(&tokens).await.unwrap();
    assert_eq!(stored, token);
    let ttl: i64 = redis.pttl(&tokens).await.unwrap();
    assert_eq!(ttl, -1, "the token counter never expires");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

/// A semaphore's permits: the count of available permits, and the holders' 16-byte ids in
/// `{name}:timeout`; a hand-over moves the permit without touching the count.
async fn permits_are_redissons_and_a_hand_over_keeps_the_count(backend: BackendUnderTest) {
    let (locks, redis) = manager_and_client(backend).await;
    let name = support::unique("layout-permits");
    let held = vec![
        locks.semaphore(&name, 2).acquire().await.unwrap(),
        locks.semaphore(&name, 2).acquire().await.unwrap(),
    ];
    let available: i64 = redis.get(&name).await.unwrap();
    assert_eq!(available, 0);
    let members: Vec<(fred::bytes::Bytes, f64)> = redis
        .zrange(
            format!("{{{name}}}:timeout"),
            0,
            -1,
            None,
            false,
            None,
            true,
        )
        .await
        .unwrap();
    let mut stored: Vec<String> = members
        .iter()
        .map(|(id, _)| id.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    stored.sort();
    let mut ids: Vec<String> = held.iter().flat_map(|g| g.permit_ids()).collect();
    ids.sort();
    assert_eq!(
        stored, ids,
        "the members are the guards' ids, as 16 raw bytes"
    );
    for guard in held {
        let _ = guard.release().await.unwrap();
    }
    // A hand-over, driven at the backend: the successor's permit replaces the holder's.
    let store = RedisBackend::connect(&backend.url().unwrap())
        .await
        .unwrap();
    let key = locks.key(&name).unwrap();
    let kind = LockKind::Semaphore(Permits::new(2, 1).unwrap());
    let (holder, successor) = (OwnerId::from_raw("holder:1"), OwnerId::from_raw("next:1"));
    let lease = Duration::from_secs(30);
    let taken = store
        .acquire(AcquireArgs::new(key.clone(), kind, holder.clone(), lease))
        .await
        .unwrap();
    assert_eq!(taken, Attempt::Acquired);
    let handed = store
        .release(
            ReleaseArgs::new(key.clone(), kind, holder, lease, 1)
                .successor(Successor::new(successor.clone(), lease)),
        )
        .await
        .unwrap();
    assert_eq!(handed.released, Released::HandedOver);
    let available: i64 = redis.get(&name).await.unwrap();
    assert_eq!(available, 1, "the count did not move");
    let scores: i64 = redis.zcard(format!("{{{name}}}:timeout")).await.unwrap();
    assert_eq!(scores, 1, "only the successor's permit");
    let last = ReleaseArgs::new(key, kind, successor, lease, 1);
    assert_eq!(
        store.release(last).await.unwrap().released,
        Released::Unlocked
    );
}

/// A lock with a record and the record itself are deleted once the retention ends.
async fn a_record_and_its_lock_are_deleted_with_the_retention(backend: BackendUnderTest) {
    let (locks, redis) = manager_and_client(backend).await;
    let name = support::unique("layout-record");
    let guard = locks.lock(&name).unless_recorded().acquire().await.unwrap();
    let released = guard
        .release_recording("done".into(), Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(released, Released::Unlocked);
    let key = locks.key(&name).unwrap();
    let record = format!("tower_lock_record:{{{key}}}");
    support::eventually("the record expires", || async {
        let left: i64 = redis
            .exists(vec![key.as_str().to_owned(), record.clone()])
            .await
            .unwrap();
        (left == 0).then_some(())
    })
    .await;
}

/// The last waiter of a name leaving gives up its subscription, for each kind's channel.
async fn subscriptions_end_with_the_last_waiter(backend: BackendUnderTest) {
    let (locks, redis) = manager_and_client(backend).await;
    for (kind, channel) in [
        (LockKind::Plain, "redisson_lock__channel"),
        (LockKind::Write, "redisson_rwlock"),
        (
            LockKind::Semaphore(Permits::new(1, 1).unwrap()),
            "redisson_sc",
        ),
    ] {
        let name = support::unique("layout-subscription");
        let request = |name: &str| match kind {
            LockKind::Plain => locks.lock(name),
            LockKind::Write => locks.write_lock(name),
            _ => locks.semaphore(name, 1),
        };
        let holder = request(&name).acquire().await.unwrap();
        let waiter = {
            let waiting = request(&name).wait(Duration::from_secs(60)).acquire();
            tokio::spawn(waiting)
        };
        let channel = format!("{channel}:{{{}}}", locks.key(&name).unwrap());
        support::eventually("the waiter subscribes", || async {
            (support::numsub(&redis, &channel).await == 1).then_some(())
        })
        .await;
        waiter.abort();
        assert!(waiter.await.unwrap_err().is_cancelled());
        support::eventually("the subscription ends", || async {
            (support::numsub(&redis, &channel).await == 0).then_some(())
        })
        .await;
        let _ = holder.release().await.unwrap();
    }
    support::nothing_left_behind(&locks).await;
}

/// 24 tasks on 12 names at once: their operations go to Redis in batches.
async fn concurrent_operations_are_batched(backend: BackendUnderTest) {
    let store = RedisBackend::connect(&backend.url().unwrap())
        .await
        .unwrap();
    let locks = LockManager::builder().backend(store.clone());
    let prefix = support::unique("layout-batches");
    let tasks: Vec<_> = (0..24usize)
        .map(|worker| {
            let (locks, prefix) = (locks.clone(), prefix.clone());
            tokio::spawn(async move {
                for round in 0..25usize {
                    let name = format!("{prefix}:{}", (worker * 7 + round * 5) % 12);
                    let guard = locks
                        .lock(name)
                        .wait(Duration::from_secs(20))
                        .acquire()
                        .await
                        .unwrap();
                    let _ = guard.release().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert!(
        store.batched_operations() > 0,
        "24 concurrent tasks never had their operations batched"
    );
}

backend_suite!(
    [Redis, Cluster]
    a_reentry_counts_in_redissons_hash,
    the_token_counter_keeps_the_last_token_forever,
    permits_are_redissons_and_a_hand_over_keeps_the_count,
    a_record_and_its_lock_are_deleted_with_the_retention,
    subscriptions_end_with_the_last_waiter,
    concurrent_operations_are_batched,
);
