//! Redis hand-over: a last release gives the lock straight to the next waiter of the same
//! process inside its own script run, which checks that the releaser still holds it (one
//! round trip per hand-over, nothing published); a release that finds the lock gone hands
//! nothing over; a lock handed to a waiter that left is released for it.

mod support;

use std::future::Future;
use std::time::Duration;

use fred::prelude::*;
use support::redisson_scripts::RedissonScripts;
use support::RedisServer;
use tokio::task::JoinHandle;
use tower_lock::lock::{LockGuard, OwnerId, Released};
use tower_lock::{LockError, LockManager};

type Waiter = JoinHandle<Result<LockGuard, LockError>>;

/// The lease a waiter asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Lease {
    /// The manager's, renewed by a watchdog.
    Renewed,
    /// An explicit lease of 30 s.
    Explicit,
}

/// A waiter of `locks` on `name`, spawned and queued as the `position`th waiter.
async fn queued_waiter(locks: &LockManager, name: &str, position: usize, lease: Lease) -> Waiter {
    let lock = locks.lock(name).wait(Duration::from_secs(20));
    let waiter = tokio::spawn(match lease {
        Lease::Renewed => lock.acquire(),
        Lease::Explicit => lock.fixed_lease(Duration::from_secs(30)).acquire(),
    });
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
    redisson: &RedissonScripts,
    name: &str,
    lease: Lease,
) -> (LockGuard, Waiter) {
    assert_eq!(redisson.try_lock(name, 30_000).await, None);
    let first = queued_waiter(locks, name, 1, lease).await;
    let second = queued_waiter(locks, name, 2, lease).await;
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

/// A hand-over from `first` to the queued `second`, as Redis saw it.
struct Handed {
    second: LockGuard,
    first_owner: OwnerId,
    /// Scripts run and messages published for it (the server must be the test's own).
    commands: (u64, u64),
    /// The lock's fields and its PTTL (ms) just after.
    holders: Vec<(String, String)>,
    pttl: i64,
}

/// Releases `first`, which hands the lock to `second`.
async fn hand_over(client: &Client, name: &str, first: LockGuard, second: Waiter) -> Handed {
    async fn commands(client: &Client) -> (u64, u64) {
        (
            support::command_calls(client, "evalsha").await,
            support::command_calls(client, "publish").await,
        )
    }
    let first_owner = first.owner().clone();
    let before = commands(client).await;
    assert_eq!(first.release().await.unwrap(), Released::HandedOver);
    let second = second.await.unwrap().expect("handed the lock");
    let after = commands(client).await;
    Handed {
        second,
        first_owner,
        commands: (after.0 - before.0, after.1 - before.1),
        holders: holders(client, name).await,
        pttl: client.pttl(name).await.unwrap(),
    }
}

/// Both kinds of lease are handed over the same way: the release's script makes the next
/// waiter the owner, after checking that the releaser holds the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_release_makes_the_next_local_waiter_the_owner_in_its_script() {
    // A server of its own: its command counts are this test's alone.
    let server = RedisServer::start();
    let url = server.url();
    let locks = LockManager::redis(&url).await.unwrap();
    let client = support::client(&url).await;
    let redisson = RedissonScripts::new(support::client(&url).await);
    for lease in [Lease::Renewed, Lease::Explicit] {
        let name = support::unique("hand-over");
        let (first, second) = first_holds_second_waits(&locks, &redisson, &name, lease).await;
        let Handed {
            second,
            first_owner,
            commands,
            holders,
            pttl,
        } = hand_over(&client, &name, first, second).await;
        assert_eq!(
            commands,
            (1, 0),
            "{lease:?}: one script run for release and acquisition; the lock was never free: \
             nothing to announce"
        );
        assert_ne!(second.owner(), &first_owner, "an owner id of its own");
        assert_eq!(
            holders,
            vec![(second.owner().as_str().to_owned(), "1".to_owned())],
            "{lease:?}: the lock is the second waiter's, with one hold"
        );
        assert!(pttl > 20_000, "{lease:?}: with its lease ({pttl} ms)");
        // Redisson sees it held throughout, and gets it once it is freed.
        assert!(redisson.try_lock(&name, 30_000).await.is_some());
        assert_eq!(second.release().await.unwrap(), Released::Unlocked);
        assert_eq!(redisson.try_lock(&name, 30_000).await, None);
        assert_eq!(redisson.unlock(&name, "req-2").await, Some(1));
        // The waiter's subscription is dropped by the subscriber task, in the background.
        support::eventually("nothing left behind", || async {
            (locks.stats() == Default::default()).then_some(())
        })
        .await;
    }
}

/// `count` waiters of `locks` queued on `name` behind a holder of `locks`.
async fn holder_and_queue(
    locks: &LockManager,
    name: &str,
    count: usize,
) -> (LockGuard, Vec<Waiter>) {
    let holder = locks.lock(name).acquire().await.unwrap();
    let mut waiters = Vec::new();
    for position in 1..=count {
        waiters.push(queued_waiter(locks, name, position, Lease::Renewed).await);
    }
    (holder, waiters)
}

/// Each waiter, once granted, checks in Redis that the lock is its own alone, then
/// releases it (to the next, in the release's script); all of them get it in the end.
async fn each_holds_it_alone(client: &Client, name: &str, waiters: Vec<Waiter>) {
    let last = waiters.len() - 1;
    for (position, waiter) in waiters.into_iter().enumerate() {
        let guard = waiter.await.unwrap().expect("granted in the end");
        assert_eq!(
            holders(client, name).await,
            vec![(guard.owner().as_str().to_owned(), "1".to_owned())],
            "a waiter granted the lock is its only holder in Redis"
        );
        let released = guard.release().await.unwrap();
        if position == last {
            assert_eq!(released, Released::Unlocked);
        } else {
            assert!(
                matches!(released, Released::HandedOver | Released::Unlocked),
                "{released:?}"
            );
        }
    }
}

/// The lock is lost behind its holder's back (deleted) and another process takes it: the
/// holder's release hands nothing to the local waiters, who stay queued while the other
/// process holds it (the hand-over used to happen with nothing sent: all five were granted
/// while the other held it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_finds_the_lock_gone_and_taken_hands_nothing_over() {
    let server = RedisServer::start();
    let url = server.url();
    let locks = LockManager::redis(&url).await.unwrap();
    let other = LockManager::redis(&url).await.unwrap();
    let client = support::client(&url).await;
    let name = support::unique("lost-then-taken");
    let start = support::command_calls(&client, "evalsha").await;
    let (holder, waiters) = holder_and_queue(&locks, &name, 5).await;
    // The holder's acquisition, then the head's look once its subscription is in place
    // (made before the lock is deleted: after, it would find the lock free and take it).
    support::eventually("the head looked once subscribed", || async {
        (support::command_calls(&client, "evalsha").await >= start + 2).then_some(())
    })
    .await;

    let _: i64 = client.del(&name).await.unwrap();
    let taken = other
        .lock(&name)
        .try_acquire()
        .await
        .expect("free after DEL");
    let scripts = support::command_calls(&client, "evalsha").await;
    assert_eq!(holder.release().await.unwrap(), Released::NotHeld);
    // The release and the head's own attempt, which the release made it send at once.
    support::eventually("the head asked Redis itself", || async {
        (support::command_calls(&client, "evalsha").await >= scripts + 2).then_some(())
    })
    .await;
    assert_eq!(
        locks.waiting(&name),
        5,
        "nobody granted while the other holds it"
    );
    assert!(waiters.iter().all(|waiter| !waiter.is_finished()));
    assert_eq!(
        holders(&client, &name).await,
        vec![(taken.owner().as_str().to_owned(), "1".to_owned())]
    );

    assert_eq!(taken.release().await.unwrap(), Released::Unlocked);
    each_holds_it_alone(&client, &name, waiters).await;
    support::nothing_left_behind(&locks).await;
}

/// Redis stops while a holder has waiters queued: its release cannot reach Redis and
/// hands nothing over; after an empty restart another manager takes the lock, and the
/// waiters stay queued until it lets go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_while_redis_is_down_hands_nothing_over() {
    let mut server = RedisServer::start();
    let url = server.url();
    let locks = LockManager::redis(&url).await.unwrap();
    let name = support::unique("down");
    let (holder, waiters) = holder_and_queue(&locks, &name, 5).await;

    server.stop();
    let released = holder.release().await;
    assert!(
        released.is_err(),
        "a release that cannot reach Redis reports the error, never a hand-over: {released:?}"
    );
    assert_eq!(locks.waiting(&name), 5, "nobody granted without Redis");

    server.resume();
    let client = support::client(&url).await;
    let other = LockManager::redis(&url).await.unwrap();
    let taken = other
        .lock(&name)
        .try_acquire()
        .await
        .expect("the restart emptied it");
    // The reconnect makes the head try again: it finds the other holder.
    let scripts = support::command_calls(&client, "evalsha").await;
    support::eventually("the head asked Redis again", || async {
        (support::command_calls(&client, "evalsha").await > scripts).then_some(())
    })
    .await;
    assert_eq!(
        locks.waiting(&name),
        5,
        "nobody granted while the other holds it"
    );
    assert!(waiters.iter().all(|waiter| !waiter.is_finished()));

    assert_eq!(taken.release().await.unwrap(), Released::Unlocked);
    each_holds_it_alone(&client, &name, waiters).await;
}

/// With a limit of 0, releases always free the lock (and announce it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_limit_of_zero_always_frees_the_lock() {
    let url = support::shared_redis_url();
    let locks = with_limit(&url, 0).await;
    let redisson = RedissonScripts::new(support::client(&url).await);
    let name = support::unique("no-hand-over");
    let (first, second) = first_holds_second_waits(&locks, &redisson, &name, Lease::Renewed).await;
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
    let redisson = RedissonScripts::new(support::client(&url).await);
    let name = support::unique("limit");
    let (first, second) = first_holds_second_waits(&locks, &redisson, &name, Lease::Renewed).await;
    let third = queued_waiter(&locks, &name, 2, Lease::Renewed).await;
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
    let redisson = RedissonScripts::new(support::client(&server.url()).await);
    let name = support::unique("departed");
    let (first, second) = first_holds_second_waits(&locks, &redisson, &name, Lease::Explicit).await;

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
    let _ = guard.release().await.unwrap();
    support::eventually("nothing left behind", || async {
        (locks.stats() == Default::default()).then_some(())
    })
    .await;
}

/// The waiter is dropped after the hand-over reached it but before it ran again (one
/// thread: the release's caller goes on first): its place in the queue releases the lock
/// in its name, whatever lease it asked for.
#[tokio::test(flavor = "current_thread")]
async fn a_waiter_dropped_just_after_the_hand_over_releases_the_lock() {
    let url = support::shared_redis_url();
    let locks = LockManager::redis(&url).await.unwrap();
    let client = support::client(&url).await;
    let redisson = RedissonScripts::new(support::client(&url).await);
    for lease in [Lease::Renewed, Lease::Explicit] {
        let name = support::unique("dropped-after");
        let (first, second) = first_holds_second_waits(&locks, &redisson, &name, lease).await;

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
}
