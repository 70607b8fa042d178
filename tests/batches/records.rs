//! Locks with a record in shared calls: claims and stores go with plain operations; claims
//! of keys that no other operation touches share one look when all are free; a store for
//! waiters keeps its record only if a claim found its lock held.

use std::time::Duration;

use fred::prelude::*;
use tower_lock::backend::RedisBackend;
use tower_lock::lock::{LockGuard, LockRecord, Released};
use tower_lock::{LockError, LockManager};

use super::support::{self, RedisServer};
use super::{paused_with_both_slots_taken, release_fillers, try_lock, wait_queued};

/// `name` taken unless it has a record (it has none and is free).
async fn claimed(locks: &LockManager, name: &str) -> LockGuard {
    locks.lock(name).unless_recorded().acquire().await.unwrap()
}

/// A single try of `name` unless it has a record, for `work` if not empty, in a task.
fn try_claim(
    locks: &LockManager,
    name: &'static str,
    work: &'static [u8],
) -> tokio::task::JoinHandle<Result<LockGuard, LockError>> {
    let locks = locks.clone();
    tokio::spawn(async move {
        let request = locks.lock(name);
        let request = if work.is_empty() {
            request.unless_recorded()
        } else {
            request.unless_recorded_for(bytes::Bytes::from_static(work))
        };
        request.try_acquire().await
    })
}

/// Clears the server's counts of commands run.
async fn reset_stats(admin: &Client) {
    let _: () = admin
        .custom(fred::cmd!("CONFIG"), vec!["RESETSTAT"])
        .await
        .unwrap();
}

/// Locks with a record go in the same calls as plain operations: a claim that finds a
/// record gets it, a free one acquires, one for other work is refused, one on a key that
/// holds other data fails alone, and a last release stores its record, all in one call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_stores_share_calls_with_plain_operations() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let locks = LockManager::builder().backend(backend.clone());
    let done = claimed(&locks, "done").await;
    let released = done
        .release_recording(
            bytes::Bytes::from_static(b"the answer"),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    assert_eq!(released, Released::Unlocked);
    let storing = claimed(&locks, "storing").await;
    let storing_too = claimed(&locks, "storing-too").await;
    let running = locks
        .lock("running")
        .unless_recorded_for(bytes::Bytes::from_static(b"first"))
        .acquire()
        .await
        .unwrap();
    let _: () = admin
        .set("not-a-lock", "text", None, None, false)
        .await
        .unwrap();

    let fillers = paused_with_both_slots_taken(&server, &backend, &locks).await;
    let recorded = try_claim(&locks, "done", b"");
    let free = try_claim(&locks, "fresh", b"");
    let other_work = try_claim(&locks, "running", b"second");
    let wrong_type = try_claim(&locks, "not-a-lock", b"");
    let plain = try_lock(&locks, "plain");
    let store = tokio::spawn(storing.release_recording(
        bytes::Bytes::from_static(b"stored"),
        Duration::from_secs(60),
    ));
    let store_too = tokio::spawn(
        storing_too.release_recording(bytes::Bytes::from_static(b"too"), Duration::from_secs(60)),
    );
    wait_queued(&backend, 8).await;
    let batched_before = backend.batched_operations();
    server.unpause();

    match recorded.await.unwrap() {
        Err(LockError::Recorded { record, .. }) => assert_eq!(&record[..], b"the answer"),
        other => panic!("expected the record, got {other:?}"),
    }
    let fresh = free
        .await
        .unwrap()
        .expect("a free lock with no record is taken");
    assert!(matches!(
        other_work.await.unwrap(),
        Err(LockError::HeldForOtherWork { .. })
    ));
    assert!(matches!(
        wrong_type.await.unwrap(),
        Err(LockError::Unavailable(_))
    ));
    let plain = plain.await.unwrap().expect("the plain lock is taken");
    assert_eq!(store.await.unwrap().unwrap(), Released::Unlocked);
    assert_eq!(store_too.await.unwrap().unwrap(), Released::Unlocked);
    assert!(backend.batched_operations() - batched_before >= 7);
    // Two stores of keys touched once: their locks deleted together at the end of the call.
    for (name, record) in [("storing", "stored"), ("storing-too", "too")] {
        let stored: Option<String> = admin
            .get(format!("tower_lock_record:{{{name}}}"))
            .await
            .unwrap();
        assert_eq!(stored.as_deref(), Some(record), "{name}");
        let exists: i64 = admin.exists(name).await.unwrap();
        assert_eq!(exists, 0, "{name}: the stored lock is free");
    }
    for guard in [fresh, plain, running] {
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
    release_fillers(fillers).await;
}

/// Claims of keys touched once, all free, share one multi-key `EXISTS` (the script's
/// calls are counted by the server); in the same call, a store for waiters of a lock that
/// a claim found held keeps its record, and one that nobody waited for frees its lock only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_claims_share_one_look_and_stores_for_waiters_keep_only_awaited_records() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let locks = LockManager::builder().backend(backend.clone());
    let other = LockManager::builder().redis(&server.url()).await.unwrap();
    let awaited = claimed(&locks, "awaited").await;
    let alone = claimed(&locks, "alone").await;
    // Another process's claim finds `awaited` held: it waits for its record.
    assert!(matches!(
        other.lock("awaited").unless_recorded().try_acquire().await,
        Err(LockError::TimedOut { .. })
    ));
    reset_stats(&admin).await;

    let fillers = paused_with_both_slots_taken(&server, &backend, &locks).await;
    let claims = ["free-1", "free-2", "free-3"].map(|name| try_claim(&locks, name, b""));
    let stores = [
        tokio::spawn(
            awaited.release_with_record(for_waiters(bytes::Bytes::from_static(b"for the waiter"))),
        ),
        tokio::spawn(
            alone.release_with_record(for_waiters(bytes::Bytes::from_static(b"for nobody"))),
        ),
    ];
    wait_queued(&backend, 6).await;
    server.unpause();

    let mut guards = Vec::new();
    for claim in claims {
        guards.push(
            claim
                .await
                .unwrap()
                .expect("a free lock with no record is taken"),
        );
    }
    for store in stores {
        assert_eq!(store.await.unwrap().unwrap(), Released::Unlocked);
    }
    for filler in fillers {
        guards.push(filler.await.unwrap().unwrap());
    }
    // Two single tries and the queued one look each; the three claims look once.
    assert_eq!(support::command_calls(&admin, "exists").await, 4);
    let record = |name: &str| {
        let admin = admin.clone();
        let key = format!("tower_lock_record:{{{name}}}");
        async move { admin.get::<Option<String>, _>(key).await.unwrap() }
    };
    assert_eq!(record("awaited").await.as_deref(), Some("for the waiter"));
    assert_eq!(record("alone").await, None, "nobody waited: nothing stored");
    for name in ["awaited", "alone"] {
        let exists: i64 = admin.exists(name).await.unwrap();
        assert_eq!(exists, 0, "{name} is free");
    }
    match other.lock("awaited").unless_recorded().try_acquire().await {
        Err(LockError::Recorded { record, .. }) => assert_eq!(&record[..], b"for the waiter"),
        other => panic!("expected the record, got {other:?}"),
    }
    for guard in guards {
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
}

/// A waiter of `other` on `name` unless recorded, in a task, once it listens on both
/// channels and has made its look once subscribed (the server's script calls reach `calls`).
async fn waiting_claim(
    admin: &Client,
    other: &LockManager,
    name: &'static str,
    calls: u64,
) -> tokio::task::JoinHandle<Result<LockGuard, LockError>> {
    let waiter = {
        let other = other.clone();
        tokio::spawn(async move {
            other
                .lock(name)
                .unless_recorded()
                .wait(Duration::from_secs(20))
                .acquire()
                .await
        })
    };
    let channels = [
        format!("redisson_lock__channel:{{{name}}}"),
        format!("tower_lock_record_channel:{{{name}}}"),
    ];
    support::eventually("the waiter listens and has looked again", || async {
        for channel in &channels {
            if support::numsub(admin, channel).await != 1 {
                return None;
            }
        }
        (support::command_calls(admin, "evalsha").await == calls).then_some(())
    })
    .await;
    waiter
}

/// A record for waiters, kept a minute.
fn for_waiters(value: bytes::Bytes) -> LockRecord {
    LockRecord::new(value, Duration::from_secs(60)).only_if_awaited()
}

/// A store for waiters sends its record on tower-lock's record channel (never on
/// Redisson's lock channel, whose messages Redisson reads as numbers), before the unlock
/// message: a waiter of another process answers with it without asking again. Counted by
/// the server: the holder's acquisition, the waiter's first claim and its look once
/// subscribed, then the store — and nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_for_waiters_sends_the_record_and_the_waiter_asks_no_more() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let holder = LockManager::builder().redis(&server.url()).await.unwrap();
    let other = LockManager::builder().redis(&server.url()).await.unwrap();
    reset_stats(&admin).await;
    let guard = claimed(&holder, "report").await;
    let waiter = waiting_claim(&admin, &other, "report", 3).await;
    let record = for_waiters(bytes::Bytes::from_static(b"for the waiter"));
    assert_eq!(
        guard.release_with_record(record).await.unwrap(),
        Released::Unlocked
    );
    match waiter.await.unwrap() {
        Err(LockError::Recorded { record, .. }) => assert_eq!(&record[..], b"for the waiter"),
        other => panic!("expected the record, got {other:?}"),
    }
    assert_eq!(
        support::command_calls(&admin, "evalsha").await,
        4,
        "the waiter asked again"
    );
}

/// A record for waiters longer than what a release carries is not sent to Redis when
/// nobody waits (the server's input grows by far less than the record); when someone
/// waits, the release that finds it keeps the lock and a second call stores and sends
/// the record: the waiter answers with all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_record_for_waiters_goes_to_redis_only_when_someone_waits() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let holder = LockManager::builder().redis(&server.url()).await.unwrap();
    let other = LockManager::builder().redis(&server.url()).await.unwrap();
    let large = bytes::Bytes::from(vec![b'r'; 64 * 1024]);
    let input_bytes = || async {
        let info: String = admin
            .custom(fred::cmd!("INFO"), vec!["stats"])
            .await
            .unwrap();
        info.lines()
            .find_map(|line| line.strip_prefix("total_net_input_bytes:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .expect("INFO stats has total_net_input_bytes")
    };

    let alone = claimed(&holder, "alone").await;
    let before = input_bytes().await;
    let released = alone.release_with_record(for_waiters(large.clone()));
    assert_eq!(released.await.unwrap(), Released::Unlocked);
    let sent = input_bytes().await - before;
    assert!(
        sent < 8 * 1024,
        "{sent} bytes reached Redis for a release nobody waited for"
    );
    let stored: i64 = admin.exists("tower_lock_record:{alone}").await.unwrap();
    assert_eq!(stored, 0, "nobody waited: nothing stored");
    let held: i64 = admin.exists("alone").await.unwrap();
    assert_eq!(held, 0, "the lock is free");

    reset_stats(&admin).await;
    let guard = claimed(&holder, "report").await;
    let waiter = waiting_claim(&admin, &other, "report", 3).await;
    let released = guard.release_with_record(for_waiters(large.clone()));
    assert_eq!(released.await.unwrap(), Released::Unlocked);
    match waiter.await.unwrap() {
        Err(LockError::Recorded { record, .. }) => assert_eq!(record, large),
        other => panic!("expected the record, got {other:?}"),
    }
    assert_eq!(
        support::command_calls(&admin, "evalsha").await,
        5,
        "the store that found the waiter, then the store with the record, nothing more"
    );
    let held: i64 = admin.exists("report").await.unwrap();
    assert_eq!(held, 0, "the lock is free");
}

/// A store with a withheld record that finds the lock gone answers as one that carried its
/// record: released when its record is there (a store re-sent after its reply was lost),
/// not held when it is not (the lock ended before the store).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withheld_store_that_finds_the_lock_gone_tells_by_its_record() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let holder = LockManager::builder().redis(&server.url()).await.unwrap();
    let large = bytes::Bytes::from(vec![b'r'; 4 * 1024]);
    for (name, stored, released) in [
        ("took-effect", true, Released::Unlocked),
        ("ended-before", false, Released::NotHeld),
    ] {
        let guard = claimed(&holder, name).await;
        let _: i64 = admin.del(name).await.unwrap();
        if stored {
            let record = format!("tower_lock_record:{{{name}}}");
            let _: () = admin
                .set(record, large.clone(), None, None, false)
                .await
                .unwrap();
        }
        let answer = guard.release_with_record(for_waiters(large.clone())).await;
        assert_eq!(answer.unwrap(), released, "{name}");
    }
}
