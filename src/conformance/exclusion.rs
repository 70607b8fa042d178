//! Mutual exclusion: one holder at a time, whoever asks and however the operations arrive.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::backend::{AcquireArgs, Attempt, ReleaseArgs};
use crate::lock::{LockKind, Released};
use crate::LockError;

use super as support;
use super::ctx::Ctx;
use super::Subject;

/// 100 tasks of one manager take one lock in turn: never two inside at once.
pub async fn mutual_exclusion(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let name = support::unique("exclusion");
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let (manager, name) = (ctx.manager.clone(), name.clone());
            let (inside, max_inside, done) = (inside.clone(), max_inside.clone(), done.clone());
            tokio::spawn(async move {
                let guard = manager
                    .lock(&name)
                    .wait(Duration::from_secs(60))
                    .acquire()
                    .await
                    .expect("every task acquires");
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                let released = guard.release().await.unwrap();
                assert!(
                    matches!(released, Released::Unlocked | Released::HandedOver),
                    "{released:?}"
                );
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 100);
    assert_eq!(
        max_inside.load(Ordering::SeqCst),
        1,
        "two holders were inside at once"
    );
    assert_eq!(ctx.manager.waiting_names(), 0);
}

/// 1,000 single tries of a free lock at once: exactly one wins; while it holds, every other
/// owner's try fails at once and reports the holder's lease.
pub async fn one_of_many_tries_wins(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let name = support::unique("tries");
    let tries: Vec<_> = (0..1000)
        .map(|_| {
            let (manager, name) = (ctx.manager.clone(), name.clone());
            tokio::spawn(async move { manager.lock(&name).try_acquire().await })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tries {
        match task.await.unwrap() {
            Ok(guard) => winners.push(guard),
            Err(LockError::TimedOut { waited, .. }) => assert!(waited < Duration::from_secs(10)),
            Err(other) => panic!("unexpected error {other}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one try wins a free lock");

    // While it is held, every try of another owner fails and reports the holder's lease
    // (where the backend can tell it).
    let reports_lease = ctx.capabilities().reports_holder_lease;
    for _ in 0..100 {
        match ctx.manager.lock(&name).try_acquire().await {
            Err(LockError::TimedOut { holder_lease, .. }) => match holder_lease {
                Some(lease) => assert!(lease <= crate::manager::DEFAULT_LEASE),
                None => assert!(!reports_lease, "the holder has a lease"),
            },
            other => panic!("a held lock was taken: {other:?}"),
        }
    }
}

/// Owner ids cannot be guessed (a random UUID and a number), and a release by any other
/// owner changes nothing.
pub async fn other_owners_cannot_release(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let name = support::unique("owners");
    let guard = ctx.manager.lock(&name).acquire().await.unwrap();
    // The owner id is `<UUID v4>:<n>`: 122 random bits that another process cannot guess.
    let (uuid, holder) = guard.owner().as_str().rsplit_once(':').unwrap();
    assert_eq!(uuid.len(), 36);
    assert_eq!(&uuid[14..15], "4", "a version 4 (random) UUID: {uuid}");
    assert!(holder.parse::<u64>().is_ok());
    assert_eq!(uuid, ctx.manager.id());
    // A release by any other owner (a guessed holder number included) changes nothing.
    let backend = ctx.backend().await;
    for other in [
        format!("{uuid}:999999"),
        "someone-else:1".to_owned(),
        String::new(),
    ] {
        let released = backend
            .release(ReleaseArgs::new(
                guard.key().clone(),
                LockKind::Plain,
                crate::lock::OwnerId::from_raw(&other),
                Duration::from_secs(30),
                1,
            ))
            .await
            .unwrap()
            .released;
        assert_eq!(released, Released::NotHeld);
    }
    assert!(
        ctx.manager.lock(&name).try_acquire().await.is_err(),
        "still held by its owner"
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

/// Many tasks on many names at once (a backend may send their operations together): every
/// name stays exclusive and every operation gets its own answer.
pub async fn concurrent_names_stay_exclusive(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let manager = ctx.manager.clone();
    let prefix = support::unique("many");
    const NAMES: usize = 12;
    let holders: Arc<Vec<AtomicUsize>> =
        Arc::new((0..NAMES).map(|_| AtomicUsize::new(0)).collect());
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for worker in 0..24usize {
        let (manager, holders, acquired, prefix) = (
            manager.clone(),
            holders.clone(),
            acquired.clone(),
            prefix.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for round in 0..25usize {
                let name = (worker * 7 + round * 5) % NAMES;
                let guard = manager
                    .lock(format!("{prefix}:{name}"))
                    .wait(Duration::from_secs(20))
                    .acquire()
                    .await
                    .unwrap();
                assert_eq!(
                    holders[name].fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders"
                );
                tokio::task::yield_now().await;
                holders[name].fetch_sub(1, Ordering::SeqCst);
                let released = guard.release().await.unwrap();
                assert!(
                    matches!(released, Released::Unlocked | Released::HandedOver),
                    "{released:?}"
                );
                acquired.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 24 * 25);
    support::nothing_left_behind(&manager).await;
}

/// A client may re-send a command that was in flight when its connection dropped (fred
/// does): every operation carries the count it expects, so a second delivery changes
/// nothing.
pub async fn resent_operations_take_effect_once(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let backend = ctx.backend().await;
    let name = support::unique("once");
    let key = ctx.manager.key(&name).unwrap();
    let owner = crate::lock::OwnerId::from_raw("00000000-0000-4000-8000-000000000000:1");
    let other = crate::lock::OwnerId::from_raw("someone-else:1");
    let lease = Duration::from_secs(30);
    let acquire = |owner: &crate::lock::OwnerId, expected| {
        AcquireArgs::new(key.clone(), LockKind::Plain, owner.clone(), lease).expected(expected)
    };
    let release = |owner: &crate::lock::OwnerId, expected| {
        ReleaseArgs::new(key.clone(), LockKind::Plain, owner.clone(), lease, expected)
    };
    // Whether a re-entry by `owner` with `expected` holds finds exactly that count.
    let holds = |expected: u32| {
        let backend = &backend;
        let (owner, acquire, release) = (&owner, &acquire, &release);
        async move {
            match backend.acquire(acquire(owner, expected)).await.unwrap() {
                Attempt::Acquired => {
                    let undo = backend
                        .release(release(owner, expected + 1))
                        .await
                        .unwrap()
                        .released;
                    assert_eq!(undo, Released::StillHeld);
                    true
                }
                _ => false,
            }
        }
    };
    // A first acquisition sent twice counts once.
    for _ in 0..2 {
        assert_eq!(
            backend.acquire(acquire(&owner, 0)).await.unwrap(),
            Attempt::Acquired
        );
    }
    assert!(
        holds(1).await,
        "one hold after a first acquisition sent twice"
    );
    // A reentry sent twice counts once.
    for _ in 0..2 {
        assert_eq!(
            backend.acquire(acquire(&owner, 1)).await.unwrap(),
            Attempt::Acquired
        );
    }
    assert!(holds(2).await, "two holds after a reentry sent twice");
    // Another owner is still shut out.
    assert!(matches!(
        backend.acquire(acquire(&other, 0)).await.unwrap(),
        Attempt::Busy(_)
    ));
    // A release sent twice decrements once and reports the same outcome while a hold
    // remains.
    for _ in 0..2 {
        assert_eq!(
            backend.release(release(&owner, 2)).await.unwrap().released,
            Released::StillHeld
        );
    }
    assert!(holds(1).await, "one hold after a release sent twice");
    assert_eq!(
        backend.release(release(&owner, 1)).await.unwrap().released,
        Released::Unlocked
    );
    // The last release sent again finds the lock gone: it changes nothing (another
    // owner's lock is never touched) and reports it not held.
    assert_eq!(
        backend.acquire(acquire(&other, 0)).await.unwrap(),
        Attempt::Acquired
    );
    assert_eq!(
        backend.release(release(&owner, 1)).await.unwrap().released,
        Released::NotHeld
    );
    assert!(
        ctx.manager.lock(&name).try_acquire().await.is_err(),
        "the other owner still holds it"
    );
    assert_eq!(
        backend.release(release(&other, 1)).await.unwrap().released,
        Released::Unlocked
    );
    // A reentry of a lock that is gone reports it lost instead of taking it afresh.
    assert_eq!(
        backend.acquire(acquire(&owner, 1)).await.unwrap(),
        Attempt::Lost
    );
    assert!(ctx.manager.lock(&name).try_acquire().await.is_ok());
}
