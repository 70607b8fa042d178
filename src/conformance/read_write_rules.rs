//! Read-write locks at the backend level (no manager): Redisson's `RReadWriteLock` rules
//! (readers share, a writer excludes, downgrade, no upgrade), counts that apply at most
//! once, per-reader leases, waiting writers' marks.

use std::time::Duration;

use super::backend_lock::BackendLock;
use super::Subject;
use crate::backend::{Attempt, WRITER_MARK_LEASE};
use crate::lock::{LockKind, Released};
use crate::LockManager;

const LEASE: Duration = Duration::from_secs(30);
const MARK_LEASE: Duration = WRITER_MARK_LEASE;

/// A fresh name on the subject's backend, driven by owner names; `None` when the backend
/// has no read-write locks (the check says so and passes).
pub(super) async fn lock_on(check: &str, subject: &dyn Subject, name: &str) -> Option<BackendLock> {
    let backend = subject.backend().await;
    if !backend.capabilities().kinds.contains(LockKind::Read) {
        super::not_applicable(check, backend.name(), "read-write locks");
        return None;
    }
    Some(BackendLock {
        backend,
        key: LockManager::memory().key(&super::unique(name)).unwrap(),
        lease: LEASE,
    })
}

fn busy(attempt: Attempt) -> bool {
    matches!(attempt, Attempt::Busy(_))
}

/// Whether the backend marks waiting writers (its store does not queue waiters itself: see
/// `store_queue` for those); if not, the check says so and passes.
fn marks_writers(check: &str, lock: &BackendLock) -> bool {
    let marks = !lock.backend.capabilities().waits_in_store;
    if !marks {
        super::not_applicable(
            check,
            lock.backend.name(),
            "writers' marks (its store queues waiters: see store_queue)",
        );
    }
    marks
}

/// A new reader held back by a waiting writer's mark.
fn held_back(attempt: Attempt) -> bool {
    matches!(attempt, Attempt::HeldBack(until) if until > Duration::ZERO)
}

use LockKind::{Plain, Read, Write};

/// At the backend: readers share, a writer excludes everyone, a plain lock on the name is
/// another lock.
pub async fn readers_share_and_a_writer_excludes(subject: &dyn Subject) {
    let Some(lock) = lock_on("readers_share_and_a_writer_excludes", subject, "rw-share").await
    else {
        return;
    };
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

/// At the backend: the writer may also read; a reader cannot also write.
pub async fn the_writer_may_read_a_reader_may_not_write(subject: &dyn Subject) {
    let Some(lock) = lock_on(
        "the_writer_may_read_a_reader_may_not_write",
        subject,
        "rw-downgrade",
    )
    .await
    else {
        return;
    };
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

/// At the backend: every read and write acquisition and release applies at most once.
pub async fn counts_apply_at_most_once(subject: &dyn Subject) {
    let Some(lock) = lock_on("counts_apply_at_most_once", subject, "rw-counts").await else {
        return;
    };
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
pub async fn a_silent_readers_holds_expire_alone(subject: &dyn Subject) {
    let Some(lock) = lock_on("a_silent_readers_holds_expire_alone", subject, "rw-expiry").await
    else {
        return;
    };
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
pub async fn a_waiting_writer_holds_new_readers_back(subject: &dyn Subject) {
    let Some(lock) = lock_on(
        "a_waiting_writer_holds_new_readers_back",
        subject,
        "rw-writer-waits",
    )
    .await
    else {
        return;
    };
    if !marks_writers("a_waiting_writer_holds_new_readers_back", &lock) {
        return;
    }
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
pub async fn a_dead_writers_mark_runs_out(subject: &dyn Subject) {
    let Some(lock) = lock_on("a_dead_writers_mark_runs_out", subject, "rw-dead-writer").await
    else {
        return;
    };
    if !marks_writers("a_dead_writers_mark_runs_out", &lock) {
        return;
    }
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
    super::eventually("the dead writer's mark runs out", || async {
        (lock.acquire(Read, "reader:2", 0).await == Attempt::Acquired).then_some(())
    })
    .await;
    assert_eq!(lock.release(Read, "reader:2", 1).await, Released::Unlocked);
    assert_eq!(lock.release(Read, "reader:1", 1).await, Released::Unlocked);
}
