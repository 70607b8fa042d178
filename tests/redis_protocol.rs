//! Redis-only behaviour: Redisson interop, the unlock channel, NOSCRIPT recovery, renewal
//! traffic and at-most-once effects of re-sent commands.

mod support;

use std::time::Duration;

use fred::prelude::*;
use support::redisson_scripts::RedissonScripts;
use support::RedisServer;
use tower_lock::backend::unlock_channel;
use tower_lock::backend::RedisBackend;
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

async fn manager() -> LockManager {
    let redis = support::suite::BackendUnderTest::Redis;
    redis.manager(LockManager::builder()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_and_tower_lock_exclude_each_other() {
    let url = support::shared_redis_url();
    let locks = manager().await;
    let redisson = RedissonScripts::new(support::client(&url).await);
    let name = support::unique("interop");

    // Redisson holds: tower-lock sees it busy, with Redisson's lease.
    assert_eq!(redisson.try_lock(&name, 30_000).await, None);
    match locks.lock(&name).try_acquire().await {
        Err(LockError::TimedOut { holder_lease, .. }) => {
            assert!(holder_lease.is_some_and(|l| l > Duration::from_secs(20)))
        }
        other => panic!("tower-lock took a lock Redisson holds: {other:?}"),
    }

    // A tower-lock waiter is woken by Redisson's unlock message, long before the lease ends.
    let waiter = support::spawn_waiter(&locks, &name, Duration::from_secs(20));
    while locks.waiting(&name) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Give the subscription time to be confirmed is not needed: the head retries after it
    // subscribes, so whichever comes first, the waiter gets the lock.
    assert_eq!(redisson.unlock(&name, "req-1").await, Some(1));
    let guard = waiter.await.unwrap().expect("woken by Redisson's unlock");

    // tower-lock holds: Redisson sees it busy.
    let pttl = redisson
        .try_lock(&name, 30_000)
        .await
        .expect("busy for Redisson");
    assert!(pttl > 20_000);
    // Redisson releasing with its own owner id leaves tower-lock's lock untouched.
    assert_eq!(redisson.unlock(&name, "req-2").await, None);
    assert!(locks.lock(&name).try_acquire().await.is_err());
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    assert_eq!(
        redisson.try_lock(&name, 30_000).await,
        None,
        "free for Redisson after release"
    );
    assert_eq!(redisson.unlock(&name, "req-3").await, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_message_is_published_only_at_zero() {
    let url = support::shared_redis_url();
    let locks = manager().await;
    let name = support::unique("channel");
    let key = locks.key(&name).unwrap();
    assert_eq!(
        unlock_channel(&key),
        format!("redisson_lock__channel:{{{name}}}")
    );

    let subscriber = support::subscriber(&url).await;
    let mut messages = subscriber.message_rx();
    let admin = support::client(&url).await;
    support::subscribe_confirmed(&admin, &subscriber, &unlock_channel(&key)).await;

    let outer = locks.lock(&name).acquire().await.unwrap();
    let inner = outer.reenter().await.unwrap();
    assert_eq!(inner.release().await.unwrap(), Released::StillHeld);
    assert_eq!(outer.release().await.unwrap(), Released::Unlocked);
    let message = tokio::time::timeout(Duration::from_secs(10), messages.recv())
        .await
        .expect("an unlock message")
        .unwrap();
    assert_eq!(&*message.channel, unlock_channel(&key).as_str());
    assert_eq!(message.value.as_str().as_deref(), Some("0"));
    // Exactly one message: the partial release published nothing. Publish a marker and
    // check that it is the next message.
    let publisher = support::client(&url).await;
    let _: i64 = publisher
        .publish(unlock_channel(&key), "marker")
        .await
        .unwrap();
    let next = messages.recv().await.unwrap();
    assert_eq!(next.value.as_str().as_deref(), Some("marker"));
    let _ = subscriber.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_is_recovered_transparently() {
    let url = support::shared_redis_url();
    let locks = manager().await;
    let admin = support::client(&url).await;
    let name = support::unique("noscript");
    let guard = locks.lock(&name).acquire().await.unwrap();
    let _: () = admin.script_flush(false).await.unwrap();
    let again = guard.reenter().await.expect("reentry after SCRIPT FLUSH");
    let _: () = admin.script_flush(false).await.unwrap();
    assert_eq!(again.release().await.unwrap(), Released::StillHeld);
    let _: () = admin.script_flush(false).await.unwrap();
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    let _: () = admin.script_flush(false).await.unwrap();
    assert!(locks.lock(&name).try_acquire().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_renewal_after_release_and_none_with_an_explicit_lease() {
    // An own server: its command counts are ours alone.
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let lease = Duration::from_millis(300);
    let locks = LockManager::builder()
        .lease(lease)
        .redis(&server.url())
        .await
        .unwrap();

    let guard = locks.lock("renewed").acquire().await.unwrap();
    let before = support::command_calls(&admin, "evalsha").await;
    tokio::time::sleep(lease * 3).await;
    let renewals = support::command_calls(&admin, "evalsha").await - before;
    assert!(
        renewals >= 3,
        "the watchdog renews every lease/3 ({renewals} renewals)"
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    let after_release = support::command_calls(&admin, "evalsha").await;
    tokio::time::sleep(lease * 2).await;
    assert_eq!(
        support::command_calls(&admin, "evalsha").await,
        after_release,
        "a renewal was sent after the release"
    );

    // An explicit lease: nothing is sent while it runs.
    let guard = locks
        .lock("explicit")
        .fixed_lease(lease)
        .acquire()
        .await
        .unwrap();
    let before = support::command_calls(&admin, "evalsha").await;
    guard.lost().await;
    assert_eq!(support::command_calls(&admin, "evalsha").await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_retries_when_its_subscriber_reconnects() {
    // Own server, so that killing pub/sub connections touches only this test.
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let holder_side = LockManager::redis(&server.url()).await.unwrap();
    let waiter_side = LockManager::redis(&server.url()).await.unwrap();
    let holder = holder_side.lock("order:1").acquire().await.unwrap();
    let waiter = support::spawn_waiter(&waiter_side, "order:1", Duration::from_secs(20));
    // Wait until the waiter's subscription is in place.
    let channel = unlock_channel(holder.key());
    while support::numsub(&admin, &channel).await == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let killed: i64 = admin
        .custom(fred::cmd!("CLIENT"), vec!["KILL", "TYPE", "pubsub"])
        .await
        .unwrap();
    assert!(killed >= 1);
    // Released while the waiter's subscriber is away: its unlock message is lost. The
    // waiter still gets the lock well before the 30 s lease, because it retries when its
    // subscriber reconnects.
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    let guard = waiter
        .await
        .unwrap()
        .expect("the waiter acquires after the reconnect");
    let _ = guard.release().await.unwrap();
}

/// Operations that arrive while two sends are on their way go together in one script
/// call; an operation Redis rejects (its key holds other data) fails alone, with a message
/// that says why, and the others in its batch succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_operations_go_together_and_fail_alone() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let locks = LockManager::builder().backend(backend.clone());
    let _: () = admin
        .set("not-a-lock", "some data", None, None, false)
        .await
        .unwrap();

    // Redis is paused: two of three good operations are sent (a send slot each), the
    // third queues; then the bad one queues behind it.
    server.pause();
    let try_lock = |name: &'static str| {
        let locks = locks.clone();
        tokio::spawn(async move { locks.lock(name).try_acquire().await })
    };
    let mut tasks: Vec<_> = ["first", "second", "third"].map(try_lock).into();
    support::eventually("both send slots taken, one operation queued", || async {
        (backend.queued_operations() == 1).then_some(())
    })
    .await;
    tasks.push(try_lock("not-a-lock"));
    support::eventually("the bad operation queued too", || async {
        (backend.queued_operations() == 2).then_some(())
    })
    .await;
    let batched_before = backend.batched_operations();
    server.unpause();

    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    assert_eq!(backend.batched_operations() - batched_before, 2);
    assert!(results[..3].iter().all(Result::is_ok), "{results:?}");
    match &results[3] {
        Err(LockError::Unavailable(error)) => {
            let message = format!("{error:#}");
            assert!(
                message.contains("not-a-lock") && message.contains("other data"),
                "{message}"
            );
        }
        other => panic!("expected Unavailable for a key holding a string, got {other:?}"),
    }
    let data: String = admin.get("not-a-lock").await.unwrap();
    assert_eq!(data, "some data", "the other data is untouched");
    for guard in results.into_iter().flatten() {
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
}

/// Every kind of lock whose key holds other data fails with a message that names the key
/// and says why, and leaves the data as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_reports_a_key_that_holds_other_data() {
    let url = support::shared_redis_url();
    let admin = support::client(&url).await;
    let locks = manager().await;
    for kind in ["fair", "read", "write", "semaphore"] {
        let name = support::unique(&format!("other-data-{kind}"));
        let _: () = admin
            .set(name.as_str(), "some data", None, None, false)
            .await
            .unwrap();
        let request = match kind {
            "fair" => locks.fair_lock(&name),
            "read" => locks.read_lock(&name),
            "write" => locks.write_lock(&name),
            _ => locks.semaphore(&name, 2),
        };
        match request.try_acquire().await {
            Err(LockError::Unavailable(error)) => {
                let message = format!("{error:#}");
                assert!(
                    message.contains(name.as_str()) && message.contains("other data"),
                    "{kind}: {message}"
                );
            }
            other => {
                panic!("{kind}: expected Unavailable for a key holding a string, got {other:?}")
            }
        }
        let data: String = admin.get(name.as_str()).await.unwrap();
        assert_eq!(data, "some data", "{kind}: the other data is untouched");
    }
}

/// A batch that mixes releases (a plain key and one with a hash tag, whose channels differ
/// in form) with acquisitions writes each operation's own key, channel, lease and owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_carries_each_operations_own_arguments() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let locks = LockManager::builder().backend(backend.clone());
    let plain = locks.lock("plain").acquire().await.unwrap();
    let tagged = locks.lock("tag{t}x").acquire().await.unwrap();
    let subscriber = support::subscriber(&server.url()).await;
    let mut messages = subscriber.message_rx();
    let channels = [unlock_channel(plain.key()), unlock_channel(tagged.key())];
    assert_eq!(channels[1], "redisson_lock__channel:tag{t}x");
    for channel in &channels {
        support::subscribe_confirmed(&admin, &subscriber, channel).await;
    }

    // Two acquisitions take both send slots and a third queues; the next four operations
    // queue behind it, and all five go together.
    server.pause();
    let try_lock = |name: &'static str, lease: Option<Duration>| {
        let locks = locks.clone();
        tokio::spawn(async move {
            let lock = locks.lock(name);
            match lease {
                Some(lease) => lock.fixed_lease(lease).try_acquire().await,
                None => lock.try_acquire().await,
            }
        })
    };
    let others = ["first", "second", "third"].map(|name| try_lock(name, None));
    support::eventually("both send slots taken, one operation queued", || async {
        (backend.queued_operations() == 1).then_some(())
    })
    .await;
    let releases = [plain, tagged].map(|guard| tokio::spawn(guard.release()));
    let leased = try_lock("leased", Some(Duration::from_millis(123_456)));
    let default = try_lock("default{d}", None);
    support::eventually("five operations queued", || async {
        (backend.queued_operations() == 5).then_some(())
    })
    .await;
    let batched_before = backend.batched_operations();
    server.unpause();

    for release in releases {
        assert_eq!(release.await.unwrap().unwrap(), Released::Unlocked);
    }
    let leased = leased.await.unwrap().unwrap();
    let default = default.await.unwrap().unwrap();
    assert_eq!(backend.batched_operations() - batched_before, 5);
    for (name, guard, lease_ms) in [
        ("leased", &leased, 123_456),
        ("default{d}", &default, 30_000),
    ] {
        let count: Option<String> = admin.hget(name, guard.owner().as_str()).await.unwrap();
        assert_eq!(count.as_deref(), Some("1"), "{name}");
        let pttl: i64 = admin.pttl(name).await.unwrap();
        assert!(pttl > 0 && pttl <= lease_ms, "{name}: PTTL {pttl}");
    }
    for name in ["plain", "tag{t}x"] {
        let exists: i64 = admin.exists(name).await.unwrap();
        assert_eq!(exists, 0, "{name} released");
    }
    let mut heard = Vec::new();
    for _ in 0..2 {
        let message = tokio::time::timeout(Duration::from_secs(10), messages.recv())
            .await
            .expect("an unlock message")
            .unwrap();
        assert_eq!(message.value.as_str().as_deref(), Some("0"));
        heard.push(message.channel.to_string());
    }
    heard.sort();
    let mut expected = channels.to_vec();
    expected.sort();
    assert_eq!(heard, expected);
    for task in others {
        let guard = task.await.unwrap().unwrap();
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
    let _ = subscriber.quit().await;
}

/// An operation's future that is dropped before it is ever polled gives its send slot
/// back: later operations are still sent (two leaked slots would leave every later
/// operation queued forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_dropped_unpolled_free_their_send_slots() {
    use tower_lock::backend::{AcquireArgs, Attempt, Backend};
    use tower_lock::lock::{LockKind, OwnerId};

    let backend = RedisBackend::connect(&support::shared_redis_url())
        .await
        .unwrap();
    let locks = LockManager::memory();
    let args = |name: &str| {
        AcquireArgs::new(
            locks.key(&support::unique(name)).unwrap(),
            LockKind::Plain,
            OwnerId::from_raw("dropped-unpolled:1"),
            Duration::from_secs(30),
        )
    };
    for _ in 0..3 {
        drop(backend.acquire(args("never-sent")));
    }
    let attempt = tokio::time::timeout(Duration::from_secs(10), backend.acquire(args("sent")))
        .await
        .expect("a later operation is sent (no send slot leaked)");
    assert!(matches!(attempt, Ok(Attempt::Acquired)), "{attempt:?}");
    assert_eq!(backend.queued_operations(), 0);
}

/// A user's own fred clients: lock commands over their `Pool`, waiting on their subscriber.
/// Locks exclude and wake a manager on its own connections, and the user's clients stay
/// connected after the backend is dropped (they are theirs to close).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_own_pool_and_subscriber_work_and_stay_theirs() {
    let url = support::shared_redis_url();
    let config = Config::from_url(&url).unwrap();
    let pool = Builder::from_config(config.clone()).build_pool(3).unwrap();
    pool.init().await.unwrap();
    let subscriber = Builder::from_config(config)
        .build_subscriber_client()
        .unwrap();
    subscriber.init().await.unwrap();

    let theirs =
        LockManager::builder().backend(RedisBackend::from_pool(pool.clone(), subscriber.clone()));
    let ours = manager().await;
    let name = support::unique("own-pool");

    // Their release (through the pool) wakes our waiter.
    let held = theirs.lock(&name).acquire().await.unwrap();
    assert!(
        ours.lock(&name).try_acquire().await.is_err(),
        "excluded across managers"
    );
    let waiter = support::spawn_waiter(&ours, &name, Duration::from_secs(20));
    while ours.waiting(&name) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(held.release().await.unwrap(), Released::Unlocked);
    let other = waiter
        .await
        .unwrap()
        .expect("woken by the release through the pool");

    // Our release wakes their waiter (on their subscriber).
    let waiter = support::spawn_waiter(&theirs, &name, Duration::from_secs(20));
    while theirs.waiting(&name) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(other.release().await.unwrap(), Released::Unlocked);
    let woken = waiter
        .await
        .unwrap()
        .expect("woken on the user's subscriber");
    assert!(
        ours.lock(&name).try_acquire().await.is_err(),
        "excluded across managers"
    );
    assert_eq!(woken.release().await.unwrap(), Released::Unlocked);

    drop(theirs);
    let pong: String = pool.ping(None).await.unwrap();
    assert_eq!(pong, "PONG", "the user's pool is still connected");
    assert!(
        subscriber.is_connected(),
        "the user's subscriber is still connected"
    );
}
