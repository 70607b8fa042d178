//! Backends whose store queues waiters itself ([`Capabilities::waits_in_store`]:
//! PostgreSQL's lock queue): a waiting acquisition waits there and is answered when the
//! lock is its own or its time is up; one whose acquirer leaves is taken out at once; a
//! writer waiting there holds new readers back (the store's queue is first come, first
//! served), while a reader's reentry goes on.
//!
//! [`Capabilities::waits_in_store`]: crate::backend::Capabilities::waits_in_store

use std::time::Duration;

use super::backend_lock::BackendLock;
use super::read_write_rules::lock_on;
use super::Subject;
use crate::backend::{Attempt, Backend, LockRecord};
use crate::lock::{LockKind, Released};
use crate::LockManager;

use LockKind::{Plain, Read, Write};

const WAIT: Duration = Duration::from_secs(20);

/// Whether the backend's store queues waiters; if not, the check says so and passes.
fn waits_in_store(check: &str, backend: &dyn Backend) -> bool {
    let waits = backend.capabilities().waits_in_store;
    if !waits {
        super::not_applicable(check, backend.name(), "queue of waiters in its store");
    }
    waits
}

/// A fresh plain lock name on the subject's backend, if its store queues waiters.
async fn plain_lock(check: &str, subject: &dyn Subject, name: &str) -> Option<BackendLock> {
    let backend = subject.backend().await;
    if !waits_in_store(check, &*backend) {
        return None;
    }
    Some(BackendLock {
        backend,
        key: LockManager::memory().key(&super::unique(name)).unwrap(),
        lease: Duration::from_secs(30),
    })
}

/// Waits until a new reader's try finds the lock busy: the writer waits in the store's
/// queue (a try that got in first gives its hold back).
async fn readers_held_back(lock: &BackendLock) {
    super::eventually("the writer waits in the store's queue", || async {
        match lock.acquire(Read, "newcomer", 0).await {
            Attempt::Busy(_) => Some(()),
            _ => {
                assert_eq!(lock.release(Read, "newcomer", 1).await, Released::Unlocked);
                None
            }
        }
    })
    .await;
}

/// A waiting acquisition waits in the store and gets the lock when its holder frees it;
/// one whose time is up is answered busy, having taken nothing.
pub async fn a_waiter_in_the_store_gets_the_lock_when_freed(subject: &dyn Subject) {
    let check = "a_waiter_in_the_store_gets_the_lock_when_freed";
    let Some(lock) = plain_lock(check, subject, "store-wait").await else {
        return;
    };
    assert_eq!(lock.acquire(Plain, "holder", 0).await, Attempt::Acquired);
    let brief = lock.spawn_waiting(Plain, "brief", Duration::from_millis(200));
    assert!(matches!(brief.await.unwrap(), Attempt::Busy(_)));
    assert_eq!(lock.release(Plain, "brief", 1).await, Released::NotHeld);
    let waiter = lock.spawn_waiting(Plain, "waiter", WAIT);
    super::eventually("the waiter waits in the store", || async {
        let info = lock.backend.inspect(lock.key.clone()).await.ok()?;
        (info.queued == 1 || !lock.backend.capabilities().inspects).then_some(())
    })
    .await;
    assert_eq!(lock.release(Plain, "holder", 1).await, Released::Unlocked);
    assert_eq!(waiter.await.unwrap(), Attempt::Acquired);
    assert!(matches!(
        lock.acquire(Plain, "holder", 0).await,
        Attempt::Busy(_)
    ));
    assert_eq!(lock.release(Plain, "waiter", 1).await, Released::Unlocked);
}

/// A writer waiting in the store's queue holds new readers back (they would overtake it
/// otherwise); a reader's reentry goes on, and the writer gets in once the readers leave.
pub async fn a_writer_waiting_in_the_store_holds_new_readers_back(subject: &dyn Subject) {
    let check = "a_writer_waiting_in_the_store_holds_new_readers_back";
    let Some(lock) = lock_on(check, subject, "store-writer").await else {
        return;
    };
    if !waits_in_store(check, &*lock.backend) {
        return;
    }
    assert_eq!(lock.acquire(Read, "reader:1", 0).await, Attempt::Acquired);
    let writer = lock.spawn_waiting(Write, "writer", WAIT);
    readers_held_back(&lock).await;
    assert_eq!(
        lock.acquire(Read, "reader:1", 1).await,
        Attempt::Acquired,
        "a reentry is not held back"
    );
    assert_eq!(lock.release(Read, "reader:1", 2).await, Released::StillHeld);
    assert_eq!(lock.release(Read, "reader:1", 1).await, Released::Unlocked);
    assert_eq!(writer.await.unwrap(), Attempt::Acquired);
    assert!(matches!(
        lock.acquire(Read, "reader:2", 0).await,
        Attempt::Busy(_)
    ));
    assert_eq!(lock.release(Write, "writer", 1).await, Released::Unlocked);
    assert_eq!(lock.acquire(Read, "reader:2", 0).await, Attempt::Acquired);
    assert_eq!(lock.release(Read, "reader:2", 1).await, Released::Unlocked);
}

/// A waiter whose acquirer leaves ([`Backend::leave_queue`]) is taken out of the store's
/// queue at once, long before its wait would end: the readers it held back go on, and it
/// took nothing.
pub async fn a_waiter_that_leaves_is_taken_out_at_once(subject: &dyn Subject) {
    let check = "a_waiter_that_leaves_is_taken_out_at_once";
    let Some(lock) = lock_on(check, subject, "store-leave").await else {
        return;
    };
    if !waits_in_store(check, &*lock.backend) {
        return;
    }
    assert_eq!(lock.acquire(Read, "reader:1", 0).await, Attempt::Acquired);
    let writer = lock.spawn_waiting(Write, "writer", Duration::from_secs(600));
    readers_held_back(&lock).await;
    lock.stop_waiting(Write, "writer").await;
    let answer = tokio::time::timeout(Duration::from_secs(60), writer)
        .await
        .expect("the wait ends when its acquirer leaves, not after its 600 s")
        .unwrap();
    assert!(matches!(answer, Attempt::Busy(_)), "{answer:?}");
    assert_eq!(lock.acquire(Read, "reader:2", 0).await, Attempt::Acquired);
    assert_eq!(lock.release(Write, "writer", 1).await, Released::NotHeld);
    assert_eq!(lock.release(Read, "reader:2", 1).await, Released::Unlocked);
    assert_eq!(lock.release(Read, "reader:1", 1).await, Released::Unlocked);
}

/// A waiter in the store's queue that was granted the lock of a holder who left a record
/// gets the record, and the lock goes on to the next.
pub async fn a_waiter_in_the_store_finds_the_record(subject: &dyn Subject) {
    let check = "a_waiter_in_the_store_finds_the_record";
    let Some(lock) = plain_lock(check, subject, "store-record").await else {
        return;
    };
    if !lock.backend.capabilities().records {
        super::not_applicable(check, lock.backend.name(), "locks with a record");
        return;
    }
    let recorded = |owner: &str, wait: Duration| {
        let args = crate::backend::AcquireArgs::new(
            lock.key.clone(),
            Plain,
            crate::lock::OwnerId::from_raw(owner),
            lock.lease,
        )
        .wait_left(wait)
        .unless_recorded(None);
        let backend = lock.backend.clone();
        tokio::spawn(async move { backend.acquire(args).await.unwrap() })
    };
    assert_eq!(
        recorded("holder", Duration::ZERO).await.unwrap(),
        Attempt::Acquired
    );
    let waiter = recorded("waiter", WAIT);
    super::eventually("the waiter waits in the store", || async {
        let info = lock.backend.inspect(lock.key.clone()).await.ok()?;
        (info.queued == 1 || !lock.backend.capabilities().inspects).then_some(())
    })
    .await;
    let release = crate::backend::ReleaseArgs::new(
        lock.key.clone(),
        Plain,
        crate::lock::OwnerId::from_raw("holder"),
        lock.lease,
        1,
    )
    .record(LockRecord::new("done".into(), Duration::from_secs(60)));
    assert_eq!(
        lock.backend.release(release).await.unwrap().released,
        Released::Unlocked
    );
    assert_eq!(
        waiter.await.unwrap(),
        Attempt::Recorded("done".into()),
        "the waiter gets the record, not the lock"
    );
    assert_eq!(lock.acquire(Plain, "after", 0).await, Attempt::Acquired);
    assert_eq!(lock.release(Plain, "after", 1).await, Released::Unlocked);
}
