//! Semaphores through the manager: at most `limit` permits held at once across managers
//! (processes, for Redis), several permits per acquisition, waiters woken by releases,
//! the limit set on first use and changed explicitly, leases renewed by the watchdog and
//! reclaimed when a holder stops renewing, acquisitions applied at most once, bad input
//! refused.

use std::time::Duration;

use fred::prelude::{KeysInterface, SortedSetsInterface};
use tower_lock::backend::{AcquireArgs, Attempt, ReleaseArgs};
use tower_lock::lock::{LockKind, OwnerId, Permits, Released, MAX_PERMITS};
use tower_lock::LockError;

use crate::ctx::Ctx;
use crate::support;
use crate::support::suite::{backend_suite, BackendUnderTest};

/// The sorted set of the permits of the semaphore `name` (Redisson's `{name}:timeout`).
fn deadlines_key(name: &str) -> String {
    format!("{{{name}}}:timeout")
}

fn busy(result: Result<tower_lock::lock::LockGuard, LockError>) -> bool {
    matches!(result, Err(LockError::TimedOut { .. }))
}

/// `limit` permits and no more; a release lets the next one in; the layout in Redis is
/// Redisson's (the count of available permits, 16-byte ids scored by their deadline).
async fn at_most_the_limit_is_held(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
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
    if let Some(redis) = &ctx.redis {
        let available: i64 = redis.get(&name).await.unwrap();
        assert_eq!(available, 0);
        let members: Vec<(fred::bytes::Bytes, f64)> = redis
            .zrange(deadlines_key(&name), 0, -1, None, false, None, true)
            .await
            .unwrap();
        assert_eq!(members.len(), 3);
        let mut stored: Vec<String> = members
            .iter()
            .map(|(id, _)| id.iter().map(|b| format!("{b:02x}")).collect())
            .collect();
        stored.sort();
        assert_eq!(
            stored, ids,
            "the members are the guards' ids, as 16 raw bytes"
        );
    }
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
async fn several_permits_are_taken_together(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
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

/// A waiter of another manager (another process, for Redis) gets the permit a release
/// gives back, long before its wait ends.
async fn a_release_wakes_a_waiter_of_another_manager(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
    let other = ctx.manager_sharing_the_backend().await;
    let name = support::unique("sem-wake");
    let first = ctx.manager.semaphore(&name, 2).acquire().await.unwrap();
    let second = ctx.manager.semaphore(&name, 2).acquire().await.unwrap();
    let waiter = {
        let (other, name) = (other.clone(), name.clone());
        tokio::spawn(async move {
            other
                .semaphore(&name, 2)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    while other.waiting(&name) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(first.release().await.unwrap(), Released::Unlocked);
    let got = waiter.await.unwrap().unwrap();
    assert!(busy(ctx.manager.semaphore(&name, 2).try_acquire().await));
    assert_eq!(got.release().await.unwrap(), Released::Unlocked);
    assert_eq!(second.release().await.unwrap(), Released::Unlocked);
}

/// The first configuration of a name sets its limit; a later one with another limit takes
/// permits under the limit in force; an explicit change raises or lowers it: a raise lets
/// a waiter in at once, a cut takes no permit away and lets nobody in until enough are
/// released.
async fn the_limit_is_set_on_first_use_and_changed_explicitly(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
    let name = support::unique("sem-limits");
    let first = ctx.manager.semaphore(&name, 1).acquire().await.unwrap();
    assert!(
        busy(ctx.manager.semaphore(&name, 5).try_acquire().await),
        "the limit in force is the first one"
    );
    let waiter = {
        let (manager, name) = (ctx.manager.clone(), name.clone());
        tokio::spawn(async move {
            manager
                .semaphore(&name, 1)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    while ctx.manager.waiting(&name) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
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

/// A holder's permit outlives many leases while the watchdog renews it; a permit whose
/// holder stopped renewing (a crash: taken through the backend, never renewed) comes back
/// when its lease ends, and a waiter takes it then.
async fn leases_are_renewed_and_dead_holders_permits_come_back(backend: BackendUnderTest) {
    let lease = Duration::from_millis(300);
    let ctx = Ctx::with(backend, |builder| builder.lease(lease)).await;
    let name = support::unique("sem-leases");
    let key = ctx.manager.key(&name).unwrap();
    let kind = LockKind::Semaphore(Permits::new(2, 1).unwrap());
    let held = ctx.manager.semaphore(&name, 2).acquire().await.unwrap();
    // The dead holder: its permit has a lease and nobody renews it.
    let dead = ctx.backend().await;
    let attempt = dead
        .acquire(AcquireArgs {
            key: key.clone(),
            kind,
            owner: OwnerId::from_raw("dead-process:1"),
            lease,
            expected: 0,
            waits: false,
            unless_recorded: false,
        })
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
async fn a_holder_whose_permit_is_taken_away_is_told(backend: BackendUnderTest) {
    let lease = Duration::from_millis(300);
    let ctx = Ctx::with(backend, |builder| builder.lease(lease)).await;
    let name = support::unique("sem-lost");
    let guard = ctx.manager.semaphore(&name, 2).acquire().await.unwrap();
    if let Some(memory) = &ctx.memory {
        assert!(memory.force_unlock(&ctx.manager.key(&name).unwrap()));
    }
    if let Some(redis) = &ctx.redis {
        let deleted: i64 = redis
            .del(vec![name.clone(), deadlines_key(&name)])
            .await
            .unwrap();
        assert_eq!(deleted, 2);
    }
    guard.lost().await;
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
}

/// A backend applies an acquisition at most once: sent again after it took effect, it
/// answers `Acquired` and takes no second permit (Redisson #6517 lost permits this way).
async fn a_resent_acquisition_takes_no_second_permit(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
    let name = support::unique("sem-resent");
    let key = ctx.manager.key(&name).unwrap();
    let kind = LockKind::Semaphore(Permits::new(2, 1).unwrap());
    let store = ctx.backend().await;
    let owner = OwnerId::from_raw("resender:1");
    let args = AcquireArgs {
        key: key.clone(),
        kind,
        owner: owner.clone(),
        lease: Duration::from_secs(30),
        expected: 0,
        waits: false,
        unless_recorded: false,
    };
    for _ in 0..2 {
        assert_eq!(
            store.acquire(args.clone()).await.unwrap(),
            Attempt::Acquired
        );
    }
    assert_eq!(ctx.manager.semaphore_usage(&name).await.unwrap().in_use, 1);
    let other = ctx.manager.semaphore(&name, 2).try_acquire().await.unwrap();
    let release = ReleaseArgs {
        key,
        kind,
        owner,
        lease: Duration::from_secs(30),
        expected: 1,
        successor: None,
        announce_run: None,
        record: None,
    };
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
async fn bad_permits_are_refused(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
    let name = support::unique("sem-bad");
    let invalid = |result: Result<tower_lock::lock::LockGuard, LockError>, says: &str| match result
    {
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

/// Acquisitions dropped at every point of their life (first attempt on its way, queued,
/// woken, granted) leave no permit, waiter, claim or subscription: afterwards every permit
/// can be taken at once.
async fn cancelled_acquisitions_leave_no_permit(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
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
    if let Some(redis) = &ctx.redis {
        let channel = format!("redisson_sc:{{{}}}", ctx.manager.key(&name).unwrap());
        support::eventually("the subscription ends", || async {
            (support::numsub(redis, &channel).await == 0).then_some(())
        })
        .await;
    }
    support::eventually("nothing left behind", || async {
        (ctx.manager.stats() == Default::default()).then_some(())
    })
    .await;
}

/// A last release hands its permit straight to the next waiter of its process for the same
/// semaphore (Redis: in the release's script, so the permit is never free in between and
/// the waiter needs no attempt of its own); the memory backend frees it and wakes the
/// waiter. Either way the waiter holds it, and only one permit is in use.
async fn a_release_hands_its_permit_to_the_next_local_waiter(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
    let name = support::unique("sem-hand-over");
    let holder = ctx.manager.semaphore(&name, 1).acquire().await.unwrap();
    let waiter = {
        let (manager, name) = (ctx.manager.clone(), name.clone());
        tokio::spawn(async move {
            manager
                .semaphore(&name, 1)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    while ctx.manager.waiting(&name) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let released = holder.release().await.unwrap();
    let expected = match backend {
        BackendUnderTest::Memory => Released::Unlocked,
        _ => Released::HandedOver,
    };
    assert_eq!(released, expected);
    let next = waiter.await.unwrap().unwrap();
    let usage = ctx.manager.semaphore_usage(&name).await.unwrap();
    assert_eq!((usage.limit, usage.in_use), (Some(1), 1));
    if let Some(redis) = &ctx.redis {
        let members: Vec<fred::bytes::Bytes> = redis
            .zrange(deadlines_key(&name), 0, -1, None, false, None, false)
            .await
            .unwrap();
        let stored: Vec<String> = members
            .iter()
            .map(|id| id.iter().map(|b| format!("{b:02x}")).collect())
            .collect();
        assert_eq!(
            stored,
            next.permit_ids(),
            "the waiter's permit, in the holder's place"
        );
    }
    assert!(busy(ctx.manager.semaphore(&name, 1).try_acquire().await));
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
}

backend_suite!(
    [Memory, Redis, Cluster]
    at_most_the_limit_is_held,
    several_permits_are_taken_together,
    a_release_wakes_a_waiter_of_another_manager,
    the_limit_is_set_on_first_use_and_changed_explicitly,
    leases_are_renewed_and_dead_holders_permits_come_back,
    a_holder_whose_permit_is_taken_away_is_told,
    a_resent_acquisition_takes_no_second_permit,
    bad_permits_are_refused,
    cancelled_acquisitions_leave_no_permit,
    a_release_hands_its_permit_to_the_next_local_waiter,
);
