//! `RReadWriteLock` against tower-lock's read and write kinds (driven at the backend level):
//! Redisson's readers and ours share, writers exclude both ways, and a release on one side
//! wakes a waiting Redisson client on the other by Redisson's own messages (`0` for a read
//! release, `1` for a write release, on `redisson_rwlock:{name}`).

use std::sync::Arc;

use tower_lock::backend::{Attempt, RedisBackend};
use tower_lock::lock::{LockKind, Released};

use crate::{subscribed, support, Target, LONG_LEASE, WAKE_WAIT};
use tower_lock::conformance::BackendLock;

fn busy(attempt: Attempt) -> bool {
    matches!(attempt, Attempt::Busy(_))
}

async fn read_write_locks_interoperate(target: Target) {
    let sides = target.sides().await;
    let name = support::unique("interop-rw");
    let ours = BackendLock {
        backend: Arc::new(RedisBackend::connect(&target.url()).await.unwrap()),
        key: sides.locks.key(&name).unwrap(),
        lease: LONG_LEASE,
    };
    use LockKind::{Read, Write};

    // Readers of both sides share; writers of both sides wait.
    assert!(sides.java_gets("jr1", "read", &name).await);
    assert_eq!(ours.acquire(Read, "r1", 0).await, Attempt::Acquired);
    assert!(sides.java_gets("jr2", "read", &name).await);
    assert_eq!(ours.acquire(Read, "r2", 0).await, Attempt::Acquired);
    assert!(!sides.java_gets("jw", "write", &name).await);
    assert!(busy(ours.acquire(Write, "w", 0).await));
    for holder in ["jr1", "jr2"] {
        sides.java.unlock(holder, "read", &name).await.unwrap();
    }
    assert!(
        !sides.java_gets("jw", "write", &name).await,
        "our readers still read"
    );
    assert_eq!(ours.release(Read, "r1", 1).await, Released::Unlocked);
    assert_eq!(ours.release(Read, "r2", 1).await, Released::Unlocked);

    // A Redisson writer excludes our readers and writers, and may read itself.
    assert!(sides.java_gets("jw", "write", &name).await);
    assert!(
        sides.java_gets("jw", "read", &name).await,
        "Redisson's downgrade"
    );
    assert!(busy(ours.acquire(Read, "r1", 0).await));
    assert!(busy(ours.acquire(Write, "w", 0).await));
    sides.java.unlock("jw", "write", &name).await.unwrap();
    // Its read hold remains, in read mode now: our readers share it, writers wait.
    assert_eq!(ours.acquire(Read, "r1", 0).await, Attempt::Acquired);
    assert!(busy(ours.acquire(Write, "w", 0).await));
    sides.java.unlock("jw", "read", &name).await.unwrap();
    assert_eq!(ours.release(Read, "r1", 1).await, Released::Unlocked);

    // Our writer excludes Redisson's readers and writers, and may read itself.
    assert_eq!(ours.acquire(Write, "w", 0).await, Attempt::Acquired);
    assert_eq!(
        ours.acquire(Read, "w", 0).await,
        Attempt::Acquired,
        "our downgrade"
    );
    assert!(!sides.java_gets("jr1", "read", &name).await);
    assert!(!sides.java_gets("jw", "write", &name).await);
    assert_eq!(ours.release(Write, "w", 1).await, Released::Unlocked);
    assert!(
        sides.java_gets("jr1", "read", &name).await,
        "read mode: shared"
    );
    assert!(!sides.java_gets("jw", "write", &name).await);
    sides.java.unlock("jr1", "read", &name).await.unwrap();
    assert_eq!(ours.release(Read, "w", 1).await, Released::Unlocked);
    assert!(!sides.java.is_locked("write", &name).await);

    // Wake-ups: our write release wakes a waiting Redisson reader, our read release a
    // waiting Redisson writer (well before the lease: LONG_LEASE > WAKE_WAIT).
    let channel = format!("redisson_rwlock:{{{name}}}");
    for (ours_kind, java_kind) in [(Write, "read"), (Read, "write")] {
        assert_eq!(ours.acquire(ours_kind, "o", 0).await, Attempt::Acquired);
        let before = crate::no_subscriber(&sides.admin, &channel).await;
        let (java, ()) = tokio::join!(
            sides.java.lock(
                "waiter",
                java_kind,
                &name,
                Some(WAKE_WAIT),
                Some(LONG_LEASE)
            ),
            async {
                subscribed(&sides.admin, &channel, before).await;
                assert_eq!(ours.release(ours_kind, "o", 1).await, Released::Unlocked);
            }
        );
        assert!(java.acquired, "Redisson's {java_kind} waiter was not woken");
        sides.java.unlock("waiter", java_kind, &name).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server() {
    read_write_locks_interoperate(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster() {
    read_write_locks_interoperate(Target::Cluster).await;
}

/// Through the manager: a Redisson write release wakes every waiting tower-lock reader at
/// once (its message `1`), and a Redisson read release wakes a waiting tower-lock writer
/// (`0`).
async fn redisson_releases_wake_tower_lock_waiters(target: Target) {
    let sides = target.sides().await;
    let name = support::unique("interop-rw-wake");
    let channel = format!("redisson_rwlock:{{{name}}}");

    assert!(sides.java_gets("jw", "write", &name).await);
    let before = crate::no_subscriber(&sides.admin, &channel).await;
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let locks = sides.locks.clone();
            let name = name.clone();
            tokio::spawn(async move { locks.read_lock(&name).wait(WAKE_WAIT).acquire().await })
        })
        .collect();
    support::eventually("the readers queue", || async {
        (sides.locks.waiting(&name) == 4).then_some(())
    })
    .await;
    subscribed(&sides.admin, &channel, before).await;
    sides.java.unlock("jw", "write", &name).await.unwrap();
    let mut guards = Vec::new();
    for reader in readers {
        guards.push(
            reader
                .await
                .unwrap()
                .expect("woken by Redisson's write release"),
        );
    }
    assert!(
        !sides.java_gets("jw", "write", &name).await,
        "four readers hold"
    );
    for guard in guards {
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }

    assert!(sides.java_gets("jr", "read", &name).await);
    let before = crate::no_subscriber(&sides.admin, &channel).await;
    let (writer, ()) = tokio::join!(
        sides.locks.write_lock(&name).wait(WAKE_WAIT).acquire(),
        async {
            subscribed(&sides.admin, &channel, before).await;
            sides.java.unlock("jr", "read", &name).await.unwrap();
        }
    );
    let writer = writer.expect("woken by Redisson's read release");
    assert!(!sides.java_gets("jr", "read", &name).await);
    assert_eq!(writer.release().await.unwrap(), Released::Unlocked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_wakes_tower_lock_single_server() {
    redisson_releases_wake_tower_lock_waiters(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_wakes_tower_lock_cluster() {
    redisson_releases_wake_tower_lock_waiters(Target::Cluster).await;
}

/// One name waited on first as a plain lock, then as a read-write lock, in one process: the
/// waiters listen on each kind's channel in turn, and Redisson's releases wake both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_waited_on_as_both_kinds_in_turn() {
    let sides = Target::Single.sides().await;
    let name = support::unique("interop-kinds");
    for (java_kind, ours) in [("lock", LockKind::Plain), ("write", LockKind::Read)] {
        assert!(sides.java_gets("j", java_kind, &name).await);
        let waiter = {
            let (locks, name) = (sides.locks.clone(), name.clone());
            tokio::spawn(async move {
                let request = match ours {
                    LockKind::Read => locks.read_lock(&name),
                    _ => locks.lock(&name),
                };
                request.wait(WAKE_WAIT).acquire().await
            })
        };
        let channel = match ours {
            LockKind::Read => format!("redisson_rwlock:{{{name}}}"),
            _ => crate::unlock_channel(&name),
        };
        subscribed(&sides.admin, &channel, 0).await;
        sides.java.unlock("j", java_kind, &name).await.unwrap();
        let guard = waiter.await.unwrap().expect("woken by Redisson's release");
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
        support::eventually("the waiter's subscription ends", || async {
            (support::numsub(&sides.admin, &channel).await == 0).then_some(())
        })
        .await;
    }
}
