//! Semaphore permits over time, through the manager: a release wakes a waiter of another
//! manager (another process, for Redis) or hands its permit to the next local one; leases
//! are renewed by the watchdog and reclaimed when a holder stops renewing; a permit taken
//! away fires the loss signal; cancelled acquisitions leave nothing.

use std::time::Duration;

use crate::backend::{Attempt, ReleaseArgs, Successor};
use crate::lock::{LockKind, OwnerId, Permits, Released};

use super as support;
use super::ctx::{queued_for, queued_permit_waiter, Ctx};
use super::semaphore::{busy, first_acquisition};
use super::Subject;

/// A waiter of another manager (another process, for Redis) gets the permit a release
/// gives back, long before its wait ends.
pub async fn a_release_wakes_a_waiter_of_another_manager(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "a_release_wakes_a_waiter_of_another_manager",
        LockKind::Semaphore(Permits::ONE),
    )) {
        return;
    }
    let other = ctx.manager_sharing_the_backend().await;
    let name = support::unique("sem-wake");
    let first = ctx.manager.semaphore(&name, 2).acquire().await.unwrap();
    let second = ctx.manager.semaphore(&name, 2).acquire().await.unwrap();
    let waiter = queued_for(&other, &name, Duration::from_secs(60), |locks, name| {
        locks.semaphore(name, 2)
    })
    .await;
    assert_eq!(first.release().await.unwrap(), Released::Unlocked);
    let got = waiter.await.unwrap().unwrap();
    assert!(busy(ctx.manager.semaphore(&name, 2).try_acquire().await));
    assert_eq!(got.release().await.unwrap(), Released::Unlocked);
    assert_eq!(second.release().await.unwrap(), Released::Unlocked);
}

/// A holder's permit outlives many leases while the watchdog renews it; a permit whose
/// holder stopped renewing (a crash: taken through the backend, never renewed) comes back
/// when its lease ends, and a waiter takes it then.
pub async fn leases_are_renewed_and_dead_holders_permits_come_back(subject: &dyn Subject) {
    let lease = Duration::from_millis(300);
    let ctx = Ctx::with(subject, |builder| builder.lease(lease)).await;
    if !(ctx.has(
        "leases_are_renewed_and_dead_holders_permits_come_back",
        LockKind::Semaphore(Permits::ONE),
    )) {
        return;
    }
    let name = support::unique("sem-leases");
    let key = ctx.manager.key(&name).unwrap();
    let kind = LockKind::Semaphore(Permits::new(2, 1).unwrap());
    let held = ctx.manager.semaphore(&name, 2).acquire().await.unwrap();
    // The dead holder: its permit has a lease and nobody renews it.
    let dead = ctx.backend().await;
    let attempt = dead
        .acquire(first_acquisition(
            &key,
            kind,
            &OwnerId::from_raw("dead-process:1"),
            lease,
        ))
        .await
        .unwrap();
    assert_eq!(attempt, Attempt::Acquired);
    let waited = tokio::time::Instant::now();
    let waiter = ctx
        .manager
        .semaphore(&name, 2)
        .wait(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    assert!(
        waited.elapsed() >= lease / 2,
        "the dead holder's permit was taken while live"
    );
    // The live holder kept its permit through the wait (more than one lease).
    tokio::time::sleep(lease * 3).await;
    assert!(!held.is_lost());
    assert!(busy(ctx.manager.semaphore(&name, 2).try_acquire().await));
    assert_eq!(held.release().await.unwrap(), Released::Unlocked);
    assert_eq!(waiter.release().await.unwrap(), Released::Unlocked);
}

/// Permits deleted behind their holder: its next renewal finds them gone and fires the
/// loss signal; its release then reports them not held.
pub async fn a_holder_whose_permit_is_taken_away_is_told(subject: &dyn Subject) {
    let lease = Duration::from_millis(300);
    let ctx = Ctx::with(subject, |builder| builder.lease(lease)).await;
    if !(ctx.has(
        "a_holder_whose_permit_is_taken_away_is_told",
        LockKind::Semaphore(Permits::ONE),
    ) && ctx.inspects("a_holder_whose_permit_is_taken_away_is_told"))
    {
        return;
    }
    let name = support::unique("sem-lost");
    let guard = ctx.manager.semaphore(&name, 2).acquire().await.unwrap();
    ctx.delete(&name).await;
    guard.lost().await;
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
}

/// Acquisitions dropped at every point of their life (first attempt on its way, queued,
/// woken, granted) leave no permit, waiter, claim or subscription: afterwards every permit
/// can be taken at once.
pub async fn cancelled_acquisitions_leave_no_permit(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "cancelled_acquisitions_leave_no_permit",
        LockKind::Semaphore(Permits::ONE),
    )) {
        return;
    }
    let name = support::unique("sem-cancel");
    let holder = ctx.manager.semaphore(&name, 2).acquire().await.unwrap();
    for i in 0..200u32 {
        let (manager, name) = (ctx.manager.clone(), name.clone());
        let task = tokio::spawn(async move { manager.semaphore(&name, 2).acquire().await });
        for _ in 0..(i % 8) {
            tokio::task::yield_now().await;
        }
        task.abort();
        if let Ok(Ok(guard)) = task.await {
            // Finished before the abort: an ordinary holder.
            assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
        }
    }
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    // Background undos of acquisitions that landed run in their own tasks: both permits
    // are free once they did (a 30 s lease: taking both within the wait shows none was
    // left to its lease).
    let both = ctx
        .manager
        .semaphore(&name, 2)
        .permits(2)
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("no cancelled acquisition kept a permit");
    assert_eq!(both.release().await.unwrap(), Released::Unlocked);
    assert_eq!(ctx.manager.semaphore_usage(&name).await.unwrap().in_use, 0);
    support::eventually("nothing left behind", || async {
        (ctx.manager.stats() == Default::default()).then_some(())
    })
    .await;
}

/// A last release hands its permit straight to the next waiter of its process for the same
/// semaphore when that waiter is idle (Redis), or frees it and wakes the waiter (memory; or
/// a waiter whose own attempt is on its way at that moment): either way the waiter holds it
/// and only one permit is in use. Whether the hand-over itself is exact is the backend's
/// test below.
pub async fn a_release_lets_the_next_local_waiter_in(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "a_release_lets_the_next_local_waiter_in",
        LockKind::Semaphore(Permits::ONE),
    )) {
        return;
    }
    let name = support::unique("sem-next");
    let holder = ctx.manager.semaphore(&name, 1).acquire().await.unwrap();
    let waiter = queued_permit_waiter(&ctx.manager, &name, Duration::from_secs(60)).await;
    let released = holder.release().await.unwrap();
    assert!(
        matches!(released, Released::HandedOver | Released::Unlocked),
        "{released:?}"
    );
    let next = waiter.await.unwrap().unwrap();
    let usage = ctx.manager.semaphore_usage(&name).await.unwrap();
    assert_eq!((usage.limit, usage.in_use), (Some(1), 1));
    assert!(busy(ctx.manager.semaphore(&name, 1).try_acquire().await));
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
}

/// The backend's hand-over (Redis: in the release's script): the holder's ids leave the
/// set, the successor's enter it with the successor's lease, the count does not move; a
/// re-sent hand-over answers `HandedOver` again and changes nothing; a releaser that no
/// longer holds hands nothing over. The memory backend does not hand over: it frees.
pub async fn the_backend_hands_permits_over_once(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "the_backend_hands_permits_over_once",
        LockKind::Semaphore(Permits::ONE),
    )) {
        return;
    }
    let name = support::unique("sem-hand-over");
    let key = ctx.manager.key(&name).unwrap();
    let kind = LockKind::Semaphore(Permits::new(2, 1).unwrap());
    let store = ctx.backend().await;
    let (holder, successor) = (OwnerId::from_raw("holder:1"), OwnerId::from_raw("next:1"));
    let acquire = |owner: &OwnerId| first_acquisition(&key, kind, owner, Duration::from_secs(30));
    assert_eq!(
        store.acquire(acquire(&holder)).await.unwrap(),
        Attempt::Acquired
    );
    let release = |owner: &OwnerId, to: &OwnerId| {
        ReleaseArgs::new(key.clone(), kind, owner.clone(), Duration::from_secs(30), 1)
            .successor(Successor::new(to.clone(), Duration::from_secs(60)))
    };
    let handed = store
        .release(release(&holder, &successor))
        .await
        .unwrap()
        .released;
    if !ctx.capabilities().hands_over {
        assert_eq!(
            handed,
            Released::Unlocked,
            "a backend that does not hand over frees"
        );
        return;
    }
    assert_eq!(handed, Released::HandedOver);
    let again = store
        .release(release(&holder, &successor))
        .await
        .unwrap()
        .released;
    assert_eq!(
        again,
        Released::HandedOver,
        "a re-sent hand-over is answered again"
    );
    let usage = ctx.manager.semaphore_usage(&name).await.unwrap();
    assert_eq!((usage.limit, usage.in_use), (Some(2), 1));
    if let Some(info) = ctx.inspected(&name).await {
        assert_eq!(
            info.holders.len(),
            1,
            "only the successor's permit: {info:?}"
        );
        // A permit holder is shown by its permit's id.
        let ids = crate::backend::permit_ids_hex(&successor, 1);
        assert_eq!(info.holders[0].owner, ids[0]);
    }
    // A stranger's hand-over gives nothing.
    let stranger = OwnerId::from_raw("stranger:1");
    let nothing = store
        .release(release(&stranger, &holder))
        .await
        .unwrap()
        .released;
    assert_eq!(nothing, Released::NotHeld);
    let usage = ctx.manager.semaphore_usage(&name).await.unwrap();
    assert_eq!(usage.in_use, 1);
    // The successor holds it as its own: its release gives it back.
    let last = ReleaseArgs::new(
        key.clone(),
        kind,
        successor.clone(),
        Duration::from_secs(30),
        1,
    );
    assert_eq!(
        store.release(last).await.unwrap().released,
        Released::Unlocked
    );
    assert_eq!(ctx.manager.semaphore_usage(&name).await.unwrap().in_use, 0);
}

/// A release that publishes nothing (the limit was lowered under the permits held, so none
/// became available) must not leave this process waiting for its own message: the next
/// release of another process is what wakes the waiter, well within a wait far shorter
/// than the holders' leases.
pub async fn a_silent_release_does_not_hide_the_next_one(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "a_silent_release_does_not_hide_the_next_one",
        LockKind::Semaphore(Permits::ONE),
    )) {
        return;
    }
    let other = ctx.manager_sharing_the_backend().await;
    let name = support::unique("sem-silent");
    let first = ctx.manager.semaphore(&name, 3).acquire().await.unwrap();
    let second = ctx.manager.semaphore(&name, 3).acquire().await.unwrap();
    let elsewhere = other.semaphore(&name, 3).acquire().await.unwrap();
    let waiter = queued_for(
        &ctx.manager,
        &name,
        Duration::from_secs(5),
        |locks, name| locks.semaphore(name, 3),
    )
    .await;
    ctx.manager.set_semaphore_limit(&name, 2).await.unwrap();
    // 2 − 3 held: none available after this release either, so nothing is published.
    assert_eq!(first.release().await.unwrap(), Released::Unlocked);
    assert_eq!(elsewhere.release().await.unwrap(), Released::Unlocked);
    let got = waiter
        .await
        .unwrap()
        .expect("woken by the other process's release");
    assert_eq!(got.release().await.unwrap(), Released::Unlocked);
    assert_eq!(second.release().await.unwrap(), Released::Unlocked);
}
