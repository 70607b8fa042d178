//! The fair lock on Redis, beyond the behaviour suite: only the queue's head is told (on
//! its own channel, Redisson's message `0`); waiters behind a head that does not take the
//! free lock do not poll; one subscriber connection per manager subscribes and
//! unsubscribes the waiters' channels in batches; the places' deadlines are the server's
//! time.

mod support;

use std::time::Duration;

use fred::prelude::*;
use support::RedisServer;
use tower_lock::backend::{AcquireArgs, Attempt, Backend, RedisBackend};
use tower_lock::lock::{OwnerId, Released};
use tower_lock::LockManager;

/// A release publishes `0` to the head's channel and to no other: the plain lock's channel
/// and the second waiter's hear nothing. Deadlines are epoch ms of the server's clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_tells_the_head_alone() {
    let server = RedisServer::start();
    let url = server.url();
    let redis = support::client(&url).await;
    let locks = LockManager::redis(&url).await.unwrap();
    let name = "fair:head-alone";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    // One after the other: the first spawned is the head.
    let mut waiters = Vec::new();
    for places in 1..=2 {
        let locks = locks.clone();
        waiters.push(tokio::spawn(async move {
            locks
                .fair_lock(name)
                .wait(Duration::from_secs(20))
                .acquire()
                .await
        }));
        support::fair_queued(&redis, name, places).await;
    }
    let queued = support::fair_queued(&redis, name, 2).await;
    // The deadlines are the server's epoch ms (plus the timeout per place).
    let time: Vec<String> = redis
        .custom(fred::cmd!("TIME"), Vec::<String>::new())
        .await
        .unwrap();
    let server_ms: f64 = time[0].parse::<f64>().unwrap() * 1000.0;
    for owner in &queued {
        let deadline: f64 = redis
            .zscore(format!("redisson_lock_timeout:{{{name}}}"), owner.as_str())
            .await
            .unwrap();
        assert!(deadline > server_ms && deadline < server_ms + 3.0 * 20_000.0 + 5_000.0);
    }
    let listener = support::subscriber(&url).await;
    let mut messages = listener.message_rx();
    let channels = [
        format!("redisson_lock__channel:{{{name}}}"),
        format!("redisson_lock__channel:{{{name}}}:{}", queued[0]),
        format!("redisson_lock__channel:{{{name}}}:{}", queued[1]),
    ];
    for channel in &channels {
        support::subscribe_confirmed(&redis, &listener, channel).await;
    }
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    let first = tokio::time::timeout(Duration::from_secs(10), messages.recv())
        .await
        .expect("a message")
        .unwrap();
    assert_eq!(first.channel.to_string(), channels[1]);
    assert_eq!(first.value.as_str().as_deref(), Some("0"));
    let mut waiters = waiters.into_iter();
    let head = waiters.next().unwrap().await.unwrap().unwrap();
    // The head took the lock without a message; nobody else was told anything.
    assert!(messages.try_recv().is_err(), "nobody else was told");
    assert_eq!(head.release().await.unwrap(), Released::Unlocked);
    let second = tokio::time::timeout(Duration::from_secs(10), messages.recv())
        .await
        .expect("a message")
        .unwrap();
    assert_eq!(
        second.channel.to_string(),
        channels[2],
        "then the next head"
    );
    let next = waiters.next().unwrap().await.unwrap().unwrap();
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
    // The last release found nobody queued: no message at all.
    assert!(messages.try_recv().is_err());
}

/// The head of the queue never takes the free lock (its process hangs): the waiter behind
/// it does not poll; it looks again when the head's place runs out and then takes the
/// lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_polling_while_a_stuck_head_keeps_the_free_lock() {
    let server = RedisServer::start();
    let url = server.url();
    let redis = support::client(&url).await;
    let timeout = Duration::from_millis(1500);
    let locks = LockManager::builder()
        .fair_queue_timeout(timeout)
        .redis(&url)
        .await
        .unwrap();
    let name = "fair:stuck-head";
    let key = locks.key(name).unwrap();
    let stuck = RedisBackend::connect(&url).await.unwrap();
    // One attempt of a waiter whose process then hangs.
    let stuck_args = AcquireArgs::new(
        key.clone(),
        tower_lock::lock::LockKind::Fair,
        OwnerId::from_raw("stuck:1"),
        Duration::from_secs(30),
    )
    .fair_place(timeout, false);
    let queued = stuck.acquire(stuck_args.clone()).await.unwrap();
    // Nobody held the lock: the first comer takes it without queueing.
    assert_eq!(queued, Attempt::Acquired);
    assert_eq!(
        stuck
            .release(tower_lock::backend::ReleaseArgs::new(
                key.clone(),
                tower_lock::lock::LockKind::Fair,
                OwnerId::from_raw("stuck:1"),
                Duration::from_secs(30),
                1
            ))
            .await
            .unwrap()
            .released,
        Released::Unlocked
    );
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let queued = stuck.acquire(stuck_args.clone()).await.unwrap();
    assert!(matches!(queued, Attempt::Queued { .. }));
    let waiter = {
        let locks = locks.clone();
        tokio::spawn(async move {
            locks
                .fair_lock(name)
                .wait(Duration::from_secs(20))
                .acquire()
                .await
        })
    };
    support::fair_queued(&redis, name, 2).await;
    let before = support::command_calls(&redis, "evalsha").await;
    // The lock is free now, and the stuck head never takes it.
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    let guard = waiter
        .await
        .unwrap()
        .expect("the place of the stuck head runs out");
    let attempts = support::command_calls(&redis, "evalsha").await - before;
    // The release, the waiter's look after its subscription, its place renewed every
    // third of the timeout (500 ms) and its look when the head's place runs out: a handful
    // over 1.5 s. Polling even every 10 ms would make some 150.
    assert!(
        attempts <= 8,
        "{attempts} script calls while the head was stuck"
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    assert!(support::fair_places(&redis, name).await.is_empty());
}

/// 64 waiters of one manager: their channels are subscribed on the manager's one
/// subscriber connection in batches (far fewer SUBSCRIBE commands than waiters), and
/// unsubscribed the same way once they are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_channels_come_and_go_in_batches_on_one_connection() {
    let server = RedisServer::start();
    let url = server.url();
    let redis = support::client(&url).await;
    let locks = LockManager::redis(&url).await.unwrap();
    let name = "fair:batched";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let subscribes = support::command_calls(&redis, "subscribe").await;
    let waiters: Vec<_> = (0..64)
        .map(|_| {
            let locks = locks.clone();
            tokio::spawn(async move {
                let guard = locks
                    .fair_lock(name)
                    .wait(Duration::from_secs(30))
                    .acquire()
                    .await
                    .unwrap();
                let _ = guard.release().await.unwrap();
            })
        })
        .collect();
    let queued = support::fair_queued(&redis, name, 64).await;
    for owner in &queued {
        let channel = format!("redisson_lock__channel:{{{name}}}:{owner}");
        support::eventually("its channel is subscribed", || async {
            (support::numsub(&redis, &channel).await == 1).then_some(())
        })
        .await;
    }
    let subscribes = support::command_calls(&redis, "subscribe").await - subscribes;
    assert!(subscribes < 32, "{subscribes} SUBSCRIBEs for 64 waiters");
    let clients: String = redis
        .custom(fred::cmd!("CLIENT"), vec!["LIST"])
        .await
        .unwrap();
    let listening = clients
        .lines()
        .filter(|line| !line.contains(" sub=0 "))
        .count();
    assert_eq!(listening, 1, "one subscriber connection: {clients}");
    let unsubscribes = support::command_calls(&redis, "unsubscribe").await;
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    for waiter in waiters {
        waiter.await.unwrap();
    }
    support::eventually("the channels are gone", || async {
        let left: Vec<String> = redis
            .custom(
                fred::cmd!("PUBSUB"),
                vec!["CHANNELS", "redisson_lock__channel:*"],
            )
            .await
            .unwrap();
        left.is_empty().then_some(())
    })
    .await;
    let unsubscribes = support::command_calls(&redis, "unsubscribe").await - unsubscribes;
    assert!(
        unsubscribes < 64,
        "{unsubscribes} UNSUBSCRIBEs for 64 waiters"
    );
    support::nothing_left_behind(&locks).await;
}
