//! Redis hand-over: a last release gives the lock straight to the next waiter of the same
//! process, in its own script run (one round trip per hand-over, nothing published), and
//! a lock handed to a waiter that left is released for it.

mod support;

use std::future::Future;
use std::time::Duration;

use fred::prelude::*;
use support::redisson::Redisson;
use support::RedisServer;
use tokio::task::JoinHandle;
use tower_lock::{LockError, LockGuard, LockManager, Released};

type Waiter = JoinHandle<Result<LockGuard, LockError>>;

/// A waiter of `locks` on `name`, spawned and queued as the `position`th waiter.
async fn queued_waiter(locks: &LockManager, name: &str, position: usize) -> Waiter {
    let waiter = support::spawn_waiter(locks, name, Duration::from_secs(20));
    support::eventually("the waiter queued", || async {
        (locks.waiting(name) == position).then_some(())
    })
    .await;
    waiter
}

/// A manager on `url` with at most `limit` hand-overs in a row.
async fn with_limit(url: &str, limit: u32) -> LockManager {
    LockManager::builder()
        .hand_over_limit(limit)
        .redis(url)
        .await
        .unwrap()
}

/// Two waiters of `locks` queued behind Redisson; Redisson's unlock then lets the first
/// take the lock by its own attempt, which leaves the second at the head, waiting without
/// an attempt of its own (nothing else tells it to try).
async fn first_holds_second_waits(
    locks: &LockManager,
    redisson: &Redisson,
    name: &str,
) -> (LockGuard, Waiter) {
    assert_eq!(redisson.try_lock(name, 30_000).await, None);
    let first = queued_waiter(locks, name, 1).await;
    let second = queued_waiter(locks, name, 2).await;
    assert_eq!(redisson.unlock(name, "req-1").await, Some(1));
    let first = first.await.unwrap().expect("the first waiter acquires");
    (first, second)
}

async fn holders(client: &Client, name: &str) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = client
        .hgetall::<std::collections::HashMap<String, String>, _>(name)
        .await
        .unwrap()
        .into_iter()
        .collect();
    fields.sort();
    fields
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_release_hands_the_lock_to_the_next_local_waiter() {
    // A server of its own: its command counts are this test's alone.
    let server = RedisServer::start();
    let url = server.url();
    let locks = LockManager::redis(&url).await.unwrap();
    let client = support::client(&url).await;
    let redisson = Redisson::new(support::client(&url).await);
    let name = support::unique("hand-over");
    let (first, second) = first_holds_second_waits(&locks, &redisson, &name).await;

    let (scripts, publishes) = (
        support::command_calls(&client, "evalsha").await,
        support::command_calls(&client, "publish").await,
    );
    assert_eq!(first.release().await.unwrap(), Released::HandedOver);
    let second = second.await.unwrap().expect("handed the lock");
    assert_eq!(
        holders(&client, &name).await,
        vec![(second.owner().as_str().to_owned(), "1".to_owned())],
        "the lock is the second waiter's, with one hold"
    );
    let pttl: i64 = client.pttl(&name).await.unwrap();
    assert!(pttl > 20_000, "with its lease ({pttl} ms)");
    assert_eq!(
        support::command_calls(&client, "evalsha").await - scripts,
        1,
        "one script run for release and acquisition"
    );
    assert_eq!(
        support::command_calls(&client, "publish").await - publishes,
        0,
        "the lock was never free: nothing to announce"
    );

    // Redisson sees it held throughout, and gets it once it is freed.
    assert!(redisson.try_lock(&name, 30_000).await.is_some());
    assert_eq!(second.release().await.unwrap(), Released::Unlocked);
    assert_eq!(redisson.try_lock(&name, 30_000).await, None);
    assert_eq!(redisson.unlock(&name, "req-2").await, Some(1));
    assert_eq!(locks.stats(), Default::default());
}

/// With a limit of 0, releases always free the lock (and announce it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_limit_of_zero_always_frees_the_lock() {
    let url = support::shared_redis_url();
    let locks = with_limit(&url, 0).await;
    let redisson = Redisson::new(support::client(&url).await);
    let name = support::unique("no-hand-over");
    let (first, second) = first_holds_second_waits(&locks, &redisson, &name).await;
    assert_eq!(first.release().await.unwrap(), Released::Unlocked);
    let second = second.await.unwrap().expect("woken by the release");
    assert_eq!(second.release().await.unwrap(), Released::Unlocked);
}

/// After `hand_over_limit` hand-overs in a row, a release frees the lock and announces it;
/// the next local waiter is woken by that announcement (as other processes' waiters are),
/// not left to the holder's lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_limit_a_release_frees_the_lock_and_wakes_the_next_waiter() {
    let url = support::shared_redis_url();
    let locks = with_limit(&url, 1).await;
    let redisson = Redisson::new(support::client(&url).await);
    let name = support::unique("limit");
    let (first, second) = first_holds_second_waits(&locks, &redisson, &name).await;
    let third = queued_waiter(&locks, &name, 2).await;
    assert_eq!(first.release().await.unwrap(), Released::HandedOver);
    let second = second.await.unwrap().expect("handed the lock");
    assert_eq!(
        second.release().await.unwrap(),
        Released::Unlocked,
        "the limit"
    );
    let third = third
        .await
        .unwrap()
        .expect("woken by the unlock message, long before the lease ends");
    assert_eq!(third.release().await.unwrap(), Released::Unlocked);
}

/// Polls `future` once (it runs up to its first wait).
async fn poll_once<F: Future + Unpin>(future: &mut F) {
    tokio::select! {
        biased;
        _ = future => panic!("finished without Redis"),
        _ = std::future::ready(()) => {}
    }
}

/// The waiter offered the lock is dropped before the hand-over's answer: the release
/// still reports it, and the lock, now in the departed waiter's name, is released for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_handed_to_a_departed_waiter_is_released_for_it() {
    let server = RedisServer::start();
    let locks = LockManager::redis(&server.url()).await.unwrap();
    let client = support::client(&server.url()).await;
    let redisson = Redisson::new(support::client(&server.url()).await);
    let name = support::unique("departed");
    let (first, second) = first_holds_second_waits(&locks, &redisson, &name).await;

    // The release offers the lock to the second waiter and sends the hand-over, which
    // Redis (paused) does not answer; meanwhile the waiter goes away.
    server.pause();
    let mut release = Box::pin(first.release());
    poll_once(&mut release).await;
    second.abort();
    assert!(second.await.unwrap_err().is_cancelled());
    server.unpause();
    assert_eq!(release.await.unwrap(), Released::HandedOver);

    support::eventually("the departed waiter's lock is released", || async {
        holders(&client, &name).await.is_empty().then_some(())
    })
    .await;
    let guard = locks.lock(&name).try_acquire().await.expect("free again");
    guard.release().await.unwrap();
    support::eventually("nothing left behind", || async {
        (locks.stats() == Default::default()).then_some(())
    })
    .await;
}

/// The waiter is dropped after the hand-over reached it but before it ran again (one
/// thread: the release's caller goes on first): its place in the queue releases the lock.
#[tokio::test(flavor = "current_thread")]
async fn a_waiter_dropped_just_after_the_hand_over_releases_the_lock() {
    let url = support::shared_redis_url();
    let locks = LockManager::redis(&url).await.unwrap();
    let client = support::client(&url).await;
    let redisson = Redisson::new(support::client(&url).await);
    let name = support::unique("dropped-after");
    let (first, second) = first_holds_second_waits(&locks, &redisson, &name).await;

    assert_eq!(first.release().await.unwrap(), Released::HandedOver);
    second.abort();
    assert!(second.await.unwrap_err().is_cancelled());
    support::eventually("the dropped waiter's lock is released", || async {
        holders(&client, &name).await.is_empty().then_some(())
    })
    .await;
    support::eventually("nothing left behind", || async {
        (locks.stats() == Default::default()).then_some(())
    })
    .await;
}
