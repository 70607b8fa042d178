//! Read-write locks at the backend level, on memory, one Redis and the cluster: Redisson's
//! `RReadWriteLock` rules (readers share, a writer excludes, downgrade, no upgrade), counts
//! that apply at most once, per-reader leases, and on Redis Redisson's layout and messages.

mod support;

use std::time::Duration;

use fred::prelude::*;
use support::backend_lock::BackendLock;
use support::suite::{backend_suite, BackendUnderTest};
use tower_lock::backend::Attempt;
use tower_lock::lock::{LockKind, Released};
use tower_lock::LockManager;

const LEASE: Duration = Duration::from_secs(30);
/// How long a waiting writer's mark lives unless its writer renews it (documented on
/// `AcquireArgs::waits`).
const MARK_LEASE: Duration = Duration::from_millis(1500);

/// A fresh name on `backend`, driven by owner names.
async fn lock_on(backend: BackendUnderTest, name: &str) -> BackendLock {
    BackendLock {
        backend: backend.backend().await,
        key: LockManager::memory().key(&support::unique(name)).unwrap(),
        lease: LEASE,
    }
}

fn busy(attempt: Attempt) -> bool {
    matches!(attempt, Attempt::Busy(Some(_)))
}

/// A new reader held back by a waiting writer's mark.
fn held_back(attempt: Attempt) -> bool {
    matches!(attempt, Attempt::HeldBack(until) if until > Duration::ZERO)
}

use LockKind::{Plain, Read, Write};

async fn readers_share_and_a_writer_excludes(backend: BackendUnderTest) {
    let lock = lock_on(backend, "rw-share").await;
    let readers: Vec<String> = (0..32).map(|i| format!("reader:{i}")).collect();
    for reader in &readers {
        assert_eq!(lock.acquire(Read, reader, 0).await, Attempt::Acquired);
    }
    assert!(busy(lock.acquire(Write, "writer:1", 0).await));
    for (i, reader) in readers.iter().enumerate() {
        assert_eq!(
            lock.release(Read, reader, 1).await,
            Released::Unlocked,
            "{i}"
        );
        if i + 1 < readers.len() {
            assert!(busy(lock.acquire(Write, "writer:1", 0).await));
        }
    }
    assert_eq!(lock.acquire(Write, "writer:1", 0).await, Attempt::Acquired);
    assert!(busy(lock.acquire(Read, "reader:0", 0).await));
    assert!(busy(lock.acquire(Write, "writer:2", 0).await));
    assert!(
        busy(lock.acquire(Plain, "plain:1", 0).await),
        "another kind's lock"
    );
    assert_eq!(lock.release(Write, "writer:1", 1).await, Released::Unlocked);
    assert_eq!(lock.acquire(Read, "reader:0", 0).await, Attempt::Acquired);
    assert_eq!(lock.release(Read, "reader:0", 1).await, Released::Unlocked);
    // Free again: a plain lock on the name works, and excludes both kinds.
    assert_eq!(lock.acquire(Plain, "plain:1", 0).await, Attempt::Acquired);
    assert!(busy(lock.acquire(Read, "reader:0", 0).await));
    assert!(busy(lock.acquire(Write, "writer:1", 0).await));
    assert_eq!(lock.release(Plain, "plain:1", 1).await, Released::Unlocked);
}

async fn the_writer_may_read_a_reader_may_not_write(backend: BackendUnderTest) {
    let lock = lock_on(backend, "rw-downgrade").await;
    assert_eq!(lock.acquire(Write, "w", 0).await, Attempt::Acquired);
    assert_eq!(
        lock.acquire(Read, "w", 0).await,
        Attempt::Acquired,
        "a downgrade"
    );
    assert!(
        busy(lock.acquire(Read, "other", 0).await),
        "still in write mode"
    );
    assert_eq!(lock.release(Write, "w", 1).await, Released::Unlocked);
    // Now in read mode: readers share with the writer's read hold; writers wait.
    assert_eq!(lock.acquire(Read, "other", 0).await, Attempt::Acquired);
    assert!(
        busy(lock.acquire(Write, "w", 0).await),
        "no upgrade, not even for w"
    );
    assert!(busy(lock.acquire(Write, "other", 0).await), "no upgrade");
    assert_eq!(lock.release(Read, "w", 1).await, Released::Unlocked);
    assert_eq!(lock.release(Read, "other", 1).await, Released::Unlocked);
    assert_eq!(lock.acquire(Write, "other", 0).await, Attempt::Acquired);
    assert_eq!(lock.release(Write, "other", 1).await, Released::Unlocked);
}

async fn counts_apply_at_most_once(backend: BackendUnderTest) {
    let lock = lock_on(backend, "rw-counts").await;
    for kind in [Read, Write] {
        assert_eq!(lock.acquire(kind, "o", 0).await, Attempt::Acquired);
        assert_eq!(
            lock.acquire(kind, "o", 0).await,
            Attempt::Acquired,
            "re-sent"
        );
        assert_eq!(
            lock.acquire(kind, "o", 1).await,
            Attempt::Acquired,
            "reentry"
        );
        assert_eq!(
            lock.acquire(kind, "o", 1).await,
            Attempt::Acquired,
            "re-sent"
        );
        assert_eq!(lock.release(kind, "o", 2).await, Released::StillHeld);
        assert_eq!(
            lock.release(kind, "o", 2).await,
            Released::StillHeld,
            "re-sent"
        );
        assert_eq!(lock.release(kind, "o", 1).await, Released::Unlocked);
        assert_eq!(
            lock.release(kind, "o", 1).await,
            Released::NotHeld,
            "re-sent last"
        );
        assert_eq!(
            lock.acquire(kind, "o", 1).await,
            Attempt::Lost,
            "a reentry of nothing"
        );
        assert_eq!(lock.release(kind, "stranger", 1).await, Released::NotHeld);
        assert!(!lock.renew(kind, "o", LEASE).await);
    }
}

/// Each reader's holds have their own lease: one that stops renewing loses its holds, the
/// others read on, and the lock ends with the last of them.
async fn a_silent_readers_holds_expire_alone(backend: BackendUnderTest) {
    let lock = lock_on(backend, "rw-expiry").await;
    let short = Duration::from_millis(300);
    assert_eq!(
        lock.acquire_for(Read, "crashed", 0, short).await,
        Attempt::Acquired
    );
    assert_eq!(lock.acquire(Read, "alive", 0).await, Attempt::Acquired);
    assert!(lock.renew(Read, "alive", LEASE).await);
    // Time passing is what is tested: past the silent reader's lease (nothing signals it).
    tokio::time::sleep(short * 2).await;
    assert!(
        !lock.renew(Read, "crashed", short).await,
        "its hold expired"
    );
    assert!(
        lock.renew(Read, "alive", LEASE).await,
        "the other reader still holds"
    );
    assert!(busy(lock.acquire(Write, "w", 0).await));
    assert_eq!(lock.release(Read, "crashed", 1).await, Released::NotHeld);
    assert_eq!(lock.release(Read, "alive", 1).await, Released::Unlocked);
    assert_eq!(lock.acquire(Write, "w", 0).await, Attempt::Acquired);
    assert!(lock.renew(Write, "w", LEASE).await);
    assert!(!lock.renew(Read, "w", LEASE).await, "w holds no read");
    assert_eq!(lock.release(Write, "w", 1).await, Released::Unlocked);
}

/// A writer that waits behind readers marks its wait: new readers hold back (a reader's
/// reentry does not), the readers drain and the writer gets in, then readers go on. A
/// single try marks nothing; a writer that stops waiting lets readers in at once.
async fn a_waiting_writer_holds_new_readers_back(backend: BackendUnderTest) {
    let lock = lock_on(backend, "rw-writer-waits").await;
    assert_eq!(lock.acquire(Read, "reader:1", 0).await, Attempt::Acquired);
    // A single try leaves no mark.
    assert!(busy(lock.acquire(Write, "writer:1", 0).await));
    assert_eq!(lock.acquire(Read, "reader:2", 0).await, Attempt::Acquired);
    assert_eq!(lock.release(Read, "reader:2", 1).await, Released::Unlocked);
    // A waiting writer marks its wait; it retries (renewing its mark) within a third of
    // the mark's lease.
    match lock.acquire_waiting(Write, "writer:1", LEASE).await {
        Attempt::Busy(Some(retry)) => assert!(retry <= MARK_LEASE / 3, "{retry:?}"),
        other => panic!("the writer waits: {other:?}"),
    }
    assert!(
        held_back(lock.acquire(Read, "reader:2", 0).await),
        "a new reader holds back behind the waiting writer"
    );
    assert_eq!(
        lock.acquire(Read, "reader:1", 1).await,
        Attempt::Acquired,
        "a reentry does not hold back"
    );
    assert_eq!(lock.release(Read, "reader:1", 2).await, Released::StillHeld);
    assert_eq!(lock.release(Read, "reader:1", 1).await, Released::Unlocked);
    assert_eq!(
        lock.acquire_waiting(Write, "writer:1", LEASE).await,
        Attempt::Acquired
    );
    assert_eq!(lock.release(Write, "writer:1", 1).await, Released::Unlocked);
    // Its mark went with its acquisition: readers go on.
    assert_eq!(lock.acquire(Read, "reader:2", 0).await, Attempt::Acquired);
    // Another writer marks its wait behind reader 2; a third one gets in first once the
    // reader is gone (writers race, as in Redisson), and its downgrade is not held back by
    // the other writer's mark.
    assert!(busy(lock.acquire_waiting(Write, "writer:2", LEASE).await));
    assert_eq!(lock.release(Read, "reader:2", 1).await, Released::Unlocked);
    assert_eq!(lock.acquire(Write, "writer:3", 0).await, Attempt::Acquired);
    assert_eq!(lock.acquire(Read, "writer:3", 0).await, Attempt::Acquired);
    assert_eq!(lock.release(Read, "writer:3", 1).await, Released::Unlocked);
    assert_eq!(lock.release(Write, "writer:3", 1).await, Released::Unlocked);
    // Writer 2 still marks its wait: a new reader holds back, and writer 2 gets in.
    assert!(held_back(lock.acquire(Read, "reader:2", 0).await));
    assert_eq!(
        lock.acquire_waiting(Write, "writer:2", LEASE).await,
        Attempt::Acquired
    );
    assert_eq!(lock.release(Write, "writer:2", 1).await, Released::Unlocked);
    assert_eq!(lock.acquire(Read, "reader:2", 0).await, Attempt::Acquired);
    // A writer that stops waiting takes its mark back.
    assert!(busy(lock.acquire_waiting(Write, "writer:2", LEASE).await));
    assert!(held_back(lock.acquire(Read, "reader:3", 0).await));
    lock.stop_waiting(Write, "writer:2").await;
    assert_eq!(lock.acquire(Read, "reader:3", 0).await, Attempt::Acquired);
    assert_eq!(lock.release(Read, "reader:3", 1).await, Released::Unlocked);
    assert_eq!(lock.release(Read, "reader:2", 1).await, Released::Unlocked);
}

/// A dead writer's mark runs out within its own short lease (whatever the writer's lock
/// lease), and new readers go on.
async fn a_dead_writers_mark_runs_out(backend: BackendUnderTest) {
    let lock = lock_on(backend, "rw-dead-writer").await;
    assert_eq!(lock.acquire(Read, "reader:1", 0).await, Attempt::Acquired);
    assert!(busy(
        lock.acquire_waiting(Write, "writer:dead", LEASE).await
    ));
    let marks_end = match lock.acquire(Read, "reader:2", 0).await {
        Attempt::HeldBack(until) => until,
        other => panic!("held back behind the writer's mark: {other:?}"),
    };
    assert!(
        marks_end <= MARK_LEASE,
        "until the mark runs out: {marks_end:?}"
    );
    support::eventually("the dead writer's mark runs out", || async {
        (lock.acquire(Read, "reader:2", 0).await == Attempt::Acquired).then_some(())
    })
    .await;
    assert_eq!(lock.release(Read, "reader:2", 1).await, Released::Unlocked);
    assert_eq!(lock.release(Read, "reader:1", 1).await, Released::Unlocked);
}

backend_suite!(
    [Memory, Redis, Cluster]
    readers_share_and_a_writer_excludes,
    a_waiting_writer_holds_new_readers_back,
    a_dead_writers_mark_runs_out,
    the_writer_may_read_a_reader_may_not_write,
    counts_apply_at_most_once,
    a_silent_readers_holds_expire_alone,
);

/// Redisson's layout: the hash's `mode`, reader and `:write` fields, one timeout key per
/// read hold; a read release that frees the lock publishes `0`, a write release `1`, on
/// `redisson_rwlock:{name}`.
async fn redissons_layout_and_messages(backend: BackendUnderTest) {
    let lock = lock_on(backend, "rw-layout").await;
    let url = backend.url().unwrap();
    let admin = support::client(&url).await;
    let subscriber = support::subscriber(&url).await;
    let channel = format!("redisson_rwlock:{{{}}}", lock.key);
    let mut messages = subscriber.message_rx();
    support::subscribe_confirmed(&admin, &subscriber, &channel).await;
    let name = lock.key.as_str();

    assert_eq!(lock.acquire(Read, "u:1", 0).await, Attempt::Acquired);
    assert_eq!(lock.acquire(Read, "u:1", 1).await, Attempt::Acquired);
    let mode: String = admin.hget(name, "mode").await.unwrap();
    let count: i64 = admin.hget(name, "u:1").await.unwrap();
    assert_eq!((mode.as_str(), count), ("read", 2));
    for n in 1..=2 {
        let ttl: i64 = admin
            .pttl(format!("{{{name}}}:u:1:rwlock_timeout:{n}"))
            .await
            .unwrap();
        assert!(ttl > 0, "hold {n}'s timeout key");
    }
    assert_eq!(lock.release(Read, "u:1", 2).await, Released::StillHeld);
    let gone: i64 = admin
        .exists(format!("{{{name}}}:u:1:rwlock_timeout:2"))
        .await
        .unwrap();
    assert_eq!(gone, 0);
    assert_eq!(lock.release(Read, "u:1", 1).await, Released::Unlocked);
    let message = tokio::time::timeout(Duration::from_secs(20), messages.recv())
        .await
        .expect("the release's message")
        .unwrap();
    assert_eq!(
        (message.channel.to_string(), message.value.as_string()),
        (channel.clone(), Some("0".into()))
    );

    assert_eq!(lock.acquire(Write, "u:2", 0).await, Attempt::Acquired);
    let mode: String = admin.hget(name, "mode").await.unwrap();
    let count: i64 = admin.hget(name, "u:2:write").await.unwrap();
    assert_eq!((mode.as_str(), count), ("write", 1));
    assert_eq!(lock.release(Write, "u:2", 1).await, Released::Unlocked);
    let message = tokio::time::timeout(Duration::from_secs(20), messages.recv())
        .await
        .expect("the release's message")
        .unwrap();
    assert_eq!(message.value.as_string(), Some("1".into()));
    let exists: i64 = admin.exists(name).await.unwrap();
    assert_eq!(exists, 0);
}

mod layout {
    use super::*;
    backend_suite!([Redis, Cluster] redissons_layout_and_messages);
}
