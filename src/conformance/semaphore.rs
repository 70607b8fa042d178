//! Semaphores through the manager: at most `limit` permits held at once, several permits
//! per acquisition, the limit set on first use and changed explicitly, acquisitions applied
//! at most once, bad input refused. (Waiting, leases and cancellation: `semaphore_holds`.)

use std::time::Duration;

use crate::backend::{AcquireArgs, Attempt, ReleaseArgs};
use crate::lock::{LockKey, LockKind, OwnerId, Permits, Released, MAX_PERMITS};
use crate::LockError;

use super as support;
use super::ctx::{queued_permit_waiter, Ctx};
use super::Subject;

/// A first acquisition of `kind` by `owner`, sent to a backend directly.
pub(super) fn first_acquisition(
    key: &LockKey,
    kind: LockKind,
    owner: &OwnerId,
    lease: Duration,
) -> AcquireArgs {
    AcquireArgs::new(key.clone(), kind, owner.clone(), lease)
}

pub(super) fn busy(result: Result<crate::lock::LockGuard, LockError>) -> bool {
    matches!(result, Err(LockError::TimedOut { .. }))
}

/// `limit` permits and no more, each with an id of its own; a release lets the next one in.
pub async fn at_most_the_limit_is_held(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "at_most_the_limit_is_held",
        LockKind::Semaphore(Permits::ONE),
    )) {
        return;
    }
    let name = support::unique("sem-limit");
    let mut held = Vec::new();
    for _ in 0..3 {
        let guard = ctx.manager.semaphore(&name, 3).try_acquire().await.unwrap();
        assert!(matches!(guard.kind(), LockKind::Semaphore(p) if p.limit() == 3 && p.count() == 1));
        held.push(guard);
    }
    assert!(busy(ctx.manager.semaphore(&name, 3).try_acquire().await));
    let mut ids: Vec<String> = held.iter().flat_map(|guard| guard.permit_ids()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "every permit has an id of its own");
    let usage = ctx.manager.semaphore_usage(&name).await.unwrap();
    assert_eq!(
        (usage.limit, usage.in_use, usage.available()),
        (Some(3), 3, 0)
    );
    assert_eq!(
        held.pop().unwrap().release().await.unwrap(),
        Released::Unlocked
    );
    let again = ctx.manager.semaphore(&name, 3).try_acquire().await.unwrap();
    for guard in held.into_iter().chain([again]) {
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
    let usage = ctx.manager.semaphore_usage(&name).await.unwrap();
    assert_eq!((usage.limit, usage.in_use), (Some(3), 0));
}

/// An acquisition of several permits takes all of them or none.
pub async fn several_permits_are_taken_together(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "several_permits_are_taken_together",
        LockKind::Semaphore(Permits::ONE),
    )) {
        return;
    }
    let name = support::unique("sem-many");
    let three = ctx
        .manager
        .semaphore(&name, 4)
        .permits(3)
        .acquire()
        .await
        .unwrap();
    assert_eq!(three.permit_ids().len(), 3);
    assert!(busy(
        ctx.manager
            .semaphore(&name, 4)
            .permits(2)
            .try_acquire()
            .await
    ));
    let one = ctx.manager.semaphore(&name, 4).try_acquire().await.unwrap();
    assert_eq!(three.release().await.unwrap(), Released::Unlocked);
    let two = ctx
        .manager
        .semaphore(&name, 4)
        .permits(2)
        .try_acquire()
        .await
        .unwrap();
    assert_eq!(ctx.manager.semaphore_usage(&name).await.unwrap().in_use, 3);
    assert_eq!(one.release().await.unwrap(), Released::Unlocked);
    assert_eq!(two.release().await.unwrap(), Released::Unlocked);
}

/// The first configuration of a name sets its limit; a later one with another limit takes
/// permits under the limit in force; an explicit change raises or lowers it: a raise lets
/// a waiter in at once, a cut takes no permit away and lets nobody in until enough are
/// released.
pub async fn the_limit_is_set_on_first_use_and_changed_explicitly(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "the_limit_is_set_on_first_use_and_changed_explicitly",
        LockKind::Semaphore(Permits::ONE),
    )) {
        return;
    }
    let name = support::unique("sem-limits");
    let first = ctx.manager.semaphore(&name, 1).acquire().await.unwrap();
    assert!(
        busy(ctx.manager.semaphore(&name, 5).try_acquire().await),
        "the limit in force is the first one"
    );
    let waiter = queued_permit_waiter(&ctx.manager, &name, Duration::from_secs(60)).await;
    ctx.manager.set_semaphore_limit(&name, 3).await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    let third = ctx.manager.semaphore(&name, 1).try_acquire().await.unwrap();
    assert_eq!(
        ctx.manager.semaphore_usage(&name).await.unwrap().limit,
        Some(3)
    );
    // Cut to 1 under three holders: they keep their permits; nobody else gets one until
    // two of them left.
    ctx.manager.set_semaphore_limit(&name, 1).await.unwrap();
    let usage = ctx.manager.semaphore_usage(&name).await.unwrap();
    assert_eq!(
        (usage.limit, usage.in_use, usage.available()),
        (Some(1), 3, 0)
    );
    assert_eq!(first.release().await.unwrap(), Released::Unlocked);
    assert_eq!(second.release().await.unwrap(), Released::Unlocked);
    assert!(busy(ctx.manager.semaphore(&name, 1).try_acquire().await));
    assert_eq!(third.release().await.unwrap(), Released::Unlocked);
    let last = ctx.manager.semaphore(&name, 1).try_acquire().await.unwrap();
    assert_eq!(last.release().await.unwrap(), Released::Unlocked);
}

/// A backend applies an acquisition at most once: sent again after it took effect, it
/// answers `Acquired` and takes no second permit (Redisson #6517 lost permits this way).
pub async fn a_resent_acquisition_takes_no_second_permit(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "a_resent_acquisition_takes_no_second_permit",
        LockKind::Semaphore(Permits::ONE),
    )) {
        return;
    }
    let name = support::unique("sem-resent");
    let key = ctx.manager.key(&name).unwrap();
    let kind = LockKind::Semaphore(Permits::new(2, 1).unwrap());
    let store = ctx.backend().await;
    let owner = OwnerId::from_raw("resender:1");
    let args = first_acquisition(&key, kind, &owner, Duration::from_secs(30));
    for _ in 0..2 {
        assert_eq!(
            store.acquire(args.clone()).await.unwrap(),
            Attempt::Acquired
        );
    }
    assert_eq!(ctx.manager.semaphore_usage(&name).await.unwrap().in_use, 1);
    let other = ctx.manager.semaphore(&name, 2).try_acquire().await.unwrap();
    let release = ReleaseArgs::new(key, kind, owner, Duration::from_secs(30), 1);
    let first = store.release(release.clone()).await.unwrap().released;
    assert_eq!(first, Released::Unlocked);
    let again = store.release(release).await.unwrap().released;
    assert_eq!(
        again,
        Released::NotHeld,
        "a re-sent release gives nothing back twice"
    );
    assert_eq!(other.release().await.unwrap(), Released::Unlocked);
    let usage = ctx.manager.semaphore_usage(&name).await.unwrap();
    assert_eq!((usage.limit, usage.in_use), (Some(2), 0));
}

/// Bad input is a clear error, and takes nothing.
pub async fn bad_permits_are_refused(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has("bad_permits_are_refused", LockKind::Semaphore(Permits::ONE))) {
        return;
    }
    let name = support::unique("sem-bad");
    let invalid = |result: Result<crate::lock::LockGuard, LockError>, says: &str| match result {
        Err(LockError::InvalidPermits { reason }) => {
            assert!(reason.contains(says), "{reason}");
        }
        other => panic!("expected InvalidPermits ({says}), got {other:?}"),
    };
    invalid(
        ctx.manager.semaphore(&name, 0).try_acquire().await,
        "at least 1",
    );
    invalid(
        ctx.manager
            .semaphore(&name, MAX_PERMITS + 1)
            .try_acquire()
            .await,
        "over the maximum",
    );
    invalid(
        ctx.manager
            .semaphore(&name, 2)
            .permits(3)
            .try_acquire()
            .await,
        "could never be granted",
    );
    invalid(
        ctx.manager
            .semaphore(&name, 2)
            .permits(0)
            .try_acquire()
            .await,
        "at least 1",
    );
    invalid(
        ctx.manager.lock(&name).permits(1).try_acquire().await,
        "not of a plain lock",
    );
    let error = ctx.manager.set_semaphore_limit(&name, 0).await.unwrap_err();
    assert!(matches!(error, LockError::InvalidPermits { .. }), "{error}");
    assert_eq!(
        ctx.manager.semaphore_usage(&name).await.unwrap().limit,
        None
    );
    // A huge limit in range is a limit like another.
    let guard = ctx
        .manager
        .semaphore(&name, MAX_PERMITS)
        .try_acquire()
        .await
        .unwrap();
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}
