//! Redis hand-over: a last release gives the lock straight to the next waiter of the same
//! process, and a lock handed to a waiter that left is released for it. The waiter takes
//! the releaser's hold over as it stands, with nothing sent to Redis, when both renew
//! their leases (no explicit lease) and at least half the lease is left; otherwise the
//! release rewrites the lock's owner in its own script run (one round trip per hand-over,
//! nothing published).

mod support;

use std::future::Future;
use std::time::Duration;

use fred::prelude::*;
use support::redisson::Redisson;
use support::RedisServer;
use tokio::task::JoinHandle;
use tower_lock::backend::{AcquireArgs, Attempt, Backend, BoxFuture, RedisBackend, ReleaseArgs};
use tower_lock::{
    BackendError, LockError, LockGuard, LockKey, LockManager, OwnerId, Released, WaitQueues,
};

type Waiter = JoinHandle<Result<LockGuard, LockError>>;

/// How the next waiter is handed the lock.
#[derive(Debug, Clone, Copy, PartialEq)]
enum HandOver {
    /// It takes the releaser's hold over, nothing sent (both renew their leases).
    AsItStands,
    /// The release's script makes it the owner (it asked for an explicit lease).
    InTheScript,
}

/// A waiter of `locks` on `name`, spawned and queued as the `position`th waiter; with an
/// explicit lease for [`HandOver::InTheScript`].
async fn queued_waiter(locks: &LockManager, name: &str, position: usize, how: HandOver) -> Waiter {
    let lock = locks.lock(name).wait(Duration::from_secs(20));
    let waiter = tokio::spawn(match how {
        HandOver::AsItStands => lock.acquire(),
        HandOver::InTheScript => lock.lease(Duration::from_secs(30)).acquire(),
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
    redisson: &Redisson,
    name: &str,
    how: HandOver,
) -> (LockGuard, Waiter) {
    assert_eq!(redisson.try_lock(name, 30_000).await, None);
    let first = queued_waiter(locks, name, 1, how).await;
    let second = queued_waiter(locks, name, 2, how).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_release_hands_its_hold_as_it_stands_to_the_next_local_waiter() {
    // A server of its own: its command counts are this test's alone.
    let server = RedisServer::start();
    let url = server.url();
    let locks = LockManager::redis(&url).await.unwrap();
    let client = support::client(&url).await;
    let redisson = Redisson::new(support::client(&url).await);
    let name = support::unique("hand-over");
    let (first, second) =
        first_holds_second_waits(&locks, &redisson, &name, HandOver::AsItStands).await;

    let Handed {
        second,
        first_owner,
        commands,
        holders,
        pttl,
    } = hand_over(&client, &name, first, second).await;
    assert_eq!(
        commands,
        (0, 0),
        "nothing sent: no script run, nothing to announce"
    );
    assert_eq!(second.owner(), &first_owner, "held under the same owner id");
    assert_eq!(
        holders,
        vec![(first_owner.as_str().to_owned(), "1".to_owned())],
        "the lock is as it was, with one hold"
    );
    assert!(pttl > 20_000, "with its lease ({pttl} ms)");

    // Redisson sees it held throughout, and gets it once it is freed.
    assert!(redisson.try_lock(&name, 30_000).await.is_some());
    assert_eq!(second.release().await.unwrap(), Released::Unlocked);
    assert_eq!(redisson.try_lock(&name, 30_000).await, None);
    assert_eq!(redisson.unlock(&name, "req-2").await, Some(1));
    assert_eq!(locks.stats(), Default::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_with_an_explicit_lease_is_made_the_owner_in_the_release_s_script() {
    let server = RedisServer::start();
    let url = server.url();
    let locks = LockManager::redis(&url).await.unwrap();
    let client = support::client(&url).await;
    let redisson = Redisson::new(support::client(&url).await);
    let name = support::unique("hand-over-script");
    let (first, second) =
        first_holds_second_waits(&locks, &redisson, &name, HandOver::InTheScript).await;

    let Handed {
        second,
        commands,
        holders,
        pttl,
        ..
    } = hand_over(&client, &name, first, second).await;
    assert_eq!(
        commands,
        (1, 0),
        "one script run for release and acquisition; the lock was never free: nothing to announce"
    );
    assert_eq!(
        holders,
        vec![(second.owner().as_str().to_owned(), "1".to_owned())],
        "the lock is the second waiter's, with one hold"
    );
    assert!(pttl > 20_000, "with its lease ({pttl} ms)");
    assert!(redisson.try_lock(&name, 30_000).await.is_some());
    assert_eq!(second.release().await.unwrap(), Released::Unlocked);
    assert_eq!(locks.stats(), Default::default());
}

/// Redis, with every renewal failing: a lease is not renewed.
struct RenewalsFail(RedisBackend);

impl Backend for RenewalsFail {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        self.0.acquire(args)
    }

    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<Released, BackendError>> {
        self.0.release(args)
    }

    fn hands_over(&self) -> bool {
        self.0.hands_over()
    }

    fn acquire_time_limit(&self) -> Option<Duration> {
        self.0.acquire_time_limit()
    }

    fn renew(&self, _: LockKey, _: OwnerId, _: Duration) -> BoxFuture<Result<bool, BackendError>> {
        Box::pin(async { Err(BackendError::new("renewals fail in this test")) })
    }

    fn attach(&self, queues: WaitQueues) {
        self.0.attach(queues)
    }

    fn needs_subscription(&self) -> bool {
        self.0.needs_subscription()
    }

    fn kind(&self) -> &'static str {
        "redis, renewals failing"
    }
}

/// A hold whose lease has less than half of it left (its renewals failed) is not taken
/// over as it stands: the release's script gives the next holder a lease of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_with_less_than_half_its_lease_left_is_handed_over_in_the_script() {
    const LEASE: Duration = Duration::from_secs(2);
    let server = RedisServer::start();
    let url = server.url();
    let backend = RenewalsFail(RedisBackend::connect(&url).await.unwrap());
    let locks = LockManager::builder().lease(LEASE).backend(backend);
    let client = support::client(&url).await;
    let redisson = Redisson::new(support::client(&url).await);
    let name = support::unique("hand-over-late");
    let (first, second) =
        first_holds_second_waits(&locks, &redisson, &name, HandOver::AsItStands).await;
    // The time itself is what this test is about: more than half the lease goes by, with
    // every renewal failing (the loss comes only once the whole lease could have run).
    tokio::time::sleep(LEASE / 2 + Duration::from_millis(100)).await;
    assert!(
        !first.is_lost(),
        "not lost before its lease could have ended"
    );
    let Handed {
        second,
        first_owner,
        commands,
        holders,
        pttl,
    } = hand_over(&client, &name, first, second).await;
    assert_eq!(commands, (1, 0), "one script run");
    assert_ne!(second.owner(), &first_owner, "an owner id of its own");
    assert_eq!(
        holders,
        vec![(second.owner().as_str().to_owned(), "1".to_owned())],
        "the lock is the second waiter's"
    );
    assert!(pttl > 1_000, "with a lease of its own ({pttl} ms)");
    assert_eq!(second.release().await.unwrap(), Released::Unlocked);
}

/// With a limit of 0, releases always free the lock (and announce it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_limit_of_zero_always_frees_the_lock() {
    let url = support::shared_redis_url();
    let locks = with_limit(&url, 0).await;
    let redisson = Redisson::new(support::client(&url).await);
    let name = support::unique("no-hand-over");
    let (first, second) =
        first_holds_second_waits(&locks, &redisson, &name, HandOver::AsItStands).await;
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
    let (first, second) =
        first_holds_second_waits(&locks, &redisson, &name, HandOver::AsItStands).await;
    let third = queued_waiter(&locks, &name, 2, HandOver::AsItStands).await;
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
/// (A hold taken over as it stands sends nothing: there is no answer to wait for.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_handed_to_a_departed_waiter_is_released_for_it() {
    let server = RedisServer::start();
    let locks = LockManager::redis(&server.url()).await.unwrap();
    let client = support::client(&server.url()).await;
    let redisson = Redisson::new(support::client(&server.url()).await);
    let name = support::unique("departed");
    let (first, second) =
        first_holds_second_waits(&locks, &redisson, &name, HandOver::InTheScript).await;

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
/// thread: the release's caller goes on first): its place in the queue releases the lock,
/// under the owner id it is held under, either way it was handed over.
#[tokio::test(flavor = "current_thread")]
async fn a_waiter_dropped_just_after_the_hand_over_releases_the_lock() {
    let url = support::shared_redis_url();
    let locks = LockManager::redis(&url).await.unwrap();
    let client = support::client(&url).await;
    let redisson = Redisson::new(support::client(&url).await);
    for how in [HandOver::AsItStands, HandOver::InTheScript] {
        let name = support::unique("dropped-after");
        let (first, second) = first_holds_second_waits(&locks, &redisson, &name, how).await;

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
