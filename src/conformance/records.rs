//! Locks with a record (`LockRequest::unless_recorded`, `LockGuard::release_recording`): the
//! last holder leaves a record with the release, in the same step; acquisitions then get the
//! record instead of the lock, waiting ones as soon as it is there, until it expires; a holder
//! that lost its lock stores nothing; a holder that leaves no record lets the next waiter in.

use std::time::Duration;

use crate::backend::LockRecord;
use crate::lock::{LockKind, Released};
use crate::{LockError, LockManager};
use bytes::Bytes;

use super as support;
use super::ctx::Ctx;
use super::Subject;

const WAIT: Duration = Duration::from_secs(20);
const RETENTION: Duration = Duration::from_secs(60);

/// The record an acquisition unless recorded found, if it found one.
fn recorded(result: Result<crate::lock::LockGuard, LockError>) -> Option<Bytes> {
    match result {
        Err(LockError::Recorded { record, .. }) => Some(record),
        Ok(_) => None,
        Err(other) => panic!("expected the lock or its record, got {other}"),
    }
}

/// `name` taken unless recorded (it must be free and have no record).
async fn take(locks: &LockManager, name: &str) -> crate::lock::LockGuard {
    locks.lock(name).unless_recorded().acquire().await.unwrap()
}

/// The record a single try unless recorded finds for `name` (`None`: it took the lock,
/// and its guard is dropped).
async fn record_of(locks: &LockManager, name: &str) -> Option<Bytes> {
    recorded(locks.lock(name).unless_recorded().try_acquire().await)
}

/// A task that waits for `name` unless it is recorded; returned once `locks` has `queued`
/// waiters for it.
async fn waiter(
    locks: &LockManager,
    name: &str,
    queued: usize,
) -> tokio::task::JoinHandle<Result<crate::lock::LockGuard, LockError>> {
    let task = {
        let (locks, name) = (locks.clone(), name.to_owned());
        tokio::spawn(async move {
            locks
                .lock(&name)
                .unless_recorded()
                .wait(WAIT)
                .acquire()
                .await
        })
    };
    support::eventually("the waiter queues", || async {
        (locks.waiting(name) == queued).then_some(())
    })
    .await;
    task
}

/// Releases `guard`, leaving `result` for the waiters only if someone waits (the lock
/// was held: it is freed).
async fn release_for_waiters(guard: crate::lock::LockGuard, result: &Bytes) {
    let record = LockRecord::new(result.clone(), RETENTION).only_if_awaited();
    assert_eq!(
        guard.release_with_record(record).await.unwrap(),
        Released::Unlocked
    );
}

/// The first holder records its result; waiters (of two managers) get it, and so does a
/// later acquisition, without taking the lock.
pub async fn waiters_get_the_record_of_the_holder(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has_records("waiters_get_the_record_of_the_holder")) {
        return;
    }
    let other = ctx.manager_sharing_the_backend().await;
    let name = support::unique("recorded");
    let guard = take(&ctx.manager, &name).await;
    let mut waiters = Vec::new();
    for queued in 1..=8 {
        waiters.push(waiter(&ctx.manager, &name, queued).await);
        waiters.push(waiter(&other, &name, queued).await);
    }
    let result = Bytes::from_static(b"\x00binary result\xff");
    assert_eq!(
        guard
            .release_recording(result.clone(), RETENTION)
            .await
            .unwrap(),
        Released::Unlocked
    );
    for waiter in waiters {
        assert_eq!(recorded(waiter.await.unwrap()), Some(result.clone()));
    }
    assert_eq!(record_of(&ctx.manager, &name).await, Some(result));
    // An acquisition that does not ask for records takes the lock: it is free.
    let plain = ctx.manager.lock(&name).try_acquire().await.unwrap();
    assert_eq!(plain.release().await.unwrap(), Released::Unlocked);
    support::nothing_left_behind(&ctx.manager).await;
    support::nothing_left_behind(&other).await;
}

/// A record stored [only if awaited](LockRecord::only_if_awaited) reaches the waiters of
/// every manager: those of another manager found the lock held, and those of the holder's
/// own manager (which queue behind it without asking the backend) are known to it.
pub async fn a_record_for_waiters_reaches_them(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has_records("a_record_for_waiters_reaches_them")) {
        return;
    }
    let name = support::unique("awaited-here");
    let guard = take(&ctx.manager, &name).await;
    let near = waiter(&ctx.manager, &name, 1).await;
    let result = Bytes::from_static(b"for the waiter here");
    release_for_waiters(guard, &result).await;
    assert_eq!(recorded(near.await.unwrap()), Some(result));

    let other = ctx.manager_sharing_the_backend().await;
    let name = support::unique("awaited");
    let guard = take(&ctx.manager, &name).await;
    let waiters = [
        waiter(&ctx.manager, &name, 1).await,
        waiter(&other, &name, 1).await,
    ];
    // Longer than what some backends send with a release (Redis sends it by a second
    // call, once the release finds that someone waits).
    let result = Bytes::from(b"for the waiters ".repeat(1024));
    release_for_waiters(guard, &result).await;
    for waiter in waiters {
        assert_eq!(recorded(waiter.await.unwrap()), Some(result.clone()));
    }
}

/// A waiter of another manager still gets a record stored only if awaited when the lock
/// went to a waiter of the holder's manager in between (handed over: the other waiter was
/// not woken, and its word that it waits holds for the new holder too).
pub async fn a_record_for_waiters_outlives_a_hand_over(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has_records("a_record_for_waiters_outlives_a_hand_over")
        && ctx.hands_over("a_record_for_waiters_outlives_a_hand_over"))
    {
        return;
    }
    let other = ctx.manager_sharing_the_backend().await;
    // A release hands over only to a waiter that is not making an attempt of its own at that
    // moment (its first look, queued behind a holder of its manager, may still be on its
    // way): tried again on a new name until it does.
    for tries in 1.. {
        let name = support::unique("awaited-handed-over");
        let first = take(&ctx.manager, &name).await;
        let far = waiter(&other, &name, 1).await;
        let near = waiter(&ctx.manager, &name, 1).await;
        let released = first.release().await.unwrap();
        if released != Released::HandedOver {
            assert!(
                tries < 20,
                "never handed over in {tries} tries: {released:?}"
            );
            // Freed: both waiters go on; each lets the other in.
            let ends = [near, far].map(|waiter| {
                tokio::spawn(async move {
                    if let Ok(Ok(guard)) = waiter.await {
                        assert_ne!(guard.release().await.unwrap(), Released::NotHeld);
                    }
                })
            });
            for end in ends {
                end.await.unwrap();
            }
            continue;
        }
        let second = near.await.unwrap().expect("handed the lock");
        // Long enough to go apart from its release where a backend withholds long records.
        let result = Bytes::from(b"the second's ".repeat(256));
        release_for_waiters(second, &result).await;
        assert_eq!(recorded(far.await.unwrap()), Some(result));
        return;
    }
}

/// A holder that leaves no record (its work failed) lets the next waiter take the lock.
pub async fn a_plain_release_lets_the_next_waiter_in(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has_records("a_plain_release_lets_the_next_waiter_in")) {
        return;
    }
    let name = support::unique("not-recorded");
    let guard = take(&ctx.manager, &name).await;
    let next = waiter(&ctx.manager, &name, 1).await;
    // Freed or handed over to the waiter: no record either way.
    assert_ne!(guard.release().await.unwrap(), Released::NotHeld);
    let next = next.await.unwrap().expect("the next waiter takes the lock");
    assert_eq!(
        next.release_recording("second".into(), RETENTION)
            .await
            .unwrap(),
        Released::Unlocked
    );
    assert_eq!(
        record_of(&ctx.manager, &name).await,
        Some(Bytes::from_static(b"second"))
    );
}

/// A holder whose lock was deleted behind its back (and taken by another) stores nothing:
/// its late result must not stand for the newer holder's.
pub async fn a_holder_that_lost_its_lock_stores_nothing(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has_records("a_holder_that_lost_its_lock_stores_nothing")
        && ctx.inspects("a_holder_that_lost_its_lock_stores_nothing"))
    {
        return;
    }
    let name = support::unique("lost-record");
    let stale = take(&ctx.manager, &name).await;
    ctx.delete(&name).await;
    let newer = take(&ctx.manager, &name).await;
    assert_eq!(
        stale
            .release_recording("stale".into(), RETENTION)
            .await
            .unwrap(),
        Released::NotHeld
    );
    assert_eq!(
        newer
            .release_recording("newer".into(), RETENTION)
            .await
            .unwrap(),
        Released::Unlocked
    );
    assert_eq!(
        record_of(&ctx.manager, &name).await,
        Some(Bytes::from_static(b"newer"))
    );
}

/// A record lasts its retention; then the lock can be taken again, and nothing is left.
pub async fn a_record_expires_with_its_retention(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has_records("a_record_expires_with_its_retention")) {
        return;
    }
    let name = support::unique("record-expires");
    let guard = take(&ctx.manager, &name).await;
    let retention = Duration::from_millis(300);
    assert_eq!(
        guard
            .release_recording("brief".into(), retention)
            .await
            .unwrap(),
        Released::Unlocked
    );
    let guard = support::eventually("the record expires", || async {
        ctx.manager
            .lock(&name)
            .unless_recorded()
            .try_acquire()
            .await
            .ok()
    })
    .await;
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    if let Some(info) = ctx.inspected(&name).await {
        assert_eq!(info.kind, None, "nothing left: {info:?}");
    }
}

/// A lock taken for named work: an acquisition for other work is refused at once (of this
/// manager or another), one for the same work waits as usual; the work is no holder for an
/// inspection and does not keep a force-unlock from freeing the lock.
pub async fn a_lock_held_for_other_work_is_refused_at_once(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has_records("a_lock_held_for_other_work_is_refused_at_once")
        && ctx.inspects("a_lock_held_for_other_work_is_refused_at_once"))
    {
        return;
    }
    let other = ctx.manager_sharing_the_backend().await;
    let name = support::unique("work");
    let guard = ctx
        .manager
        .lock(&name)
        .unless_recorded_for(&b"request-a"[..])
        .acquire()
        .await
        .unwrap();
    for locks in [&ctx.manager, &other] {
        // A long wait: refused at once, not after it.
        match locks
            .lock(&name)
            .unless_recorded_for(&b"request-b"[..])
            .wait(WAIT)
            .acquire()
            .await
        {
            Err(LockError::HeldForOtherWork { key }) => assert_eq!(key.as_str(), name),
            other => panic!("expected a refusal for other work, got {other:?}"),
        }
        // The same work, or none named: busy.
        for request in [
            locks.lock(&name).unless_recorded_for(&b"request-a"[..]),
            locks.lock(&name).unless_recorded(),
        ] {
            assert!(matches!(
                request.try_acquire().await,
                Err(LockError::TimedOut { .. })
            ));
        }
    }
    let info = ctx.manager.inspect(&name).await.unwrap();
    assert_eq!(info.holders.len(), 1, "{info:?}");
    assert_eq!(info.holders[0].owner, guard.owner().as_str());
    let freed = ctx.manager.force_unlock(&name, "test").await.unwrap();
    assert_eq!(freed.freed, 1, "{freed:?}");
    // Free again: taken for any work.
    let next = other
        .lock(&name)
        .unless_recorded_for(&b"request-b"[..])
        .try_acquire()
        .await
        .unwrap();
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
}

/// Records are for the plain lock: other kinds are refused with a clear error.
pub async fn other_kinds_have_no_records(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has("other_kinds_have_no_records", LockKind::Fair)
        && ctx.has("other_kinds_have_no_records", LockKind::Read)
        && ctx.has("other_kinds_have_no_records", LockKind::Fenced)
        && ctx.has_records("other_kinds_have_no_records"))
    {
        return;
    }
    let name = support::unique("record-kinds");
    for request in [
        ctx.manager.fair_lock(&name),
        ctx.manager.read_lock(&name),
        ctx.manager.fenced_lock(&name),
    ] {
        match request.unless_recorded().try_acquire().await {
            Err(LockError::Unavailable(error)) => {
                assert!(error.to_string().contains("plain lock"), "{error}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
