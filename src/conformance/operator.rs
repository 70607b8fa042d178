//! What operators see and do, through the manager: an inspection of every kind (holders,
//! holds, leases, a fair queue, a token, a semaphore's permits), a force-unlock that wakes
//! a waiter and fires the holder's loss signal, listings by pattern (bounded), bad
//! patterns refused.

use std::time::Duration;

use crate::admin::{HolderSide, InspectedKind};
use crate::lock::{LockKind, Permits, Released};
use crate::LockError;

use super as support;
use super::ctx::{queued_for, queued_permit_waiter, queued_waiter, Ctx};
use super::Subject;

/// An inspection shows every kind as it is held: holders, holds, leases, the fair queue, the
/// last token, the permits.
pub async fn every_kind_is_inspected(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has("every_kind_is_inspected", LockKind::Fair)
        && ctx.has("every_kind_is_inspected", LockKind::Read)
        && ctx.has("every_kind_is_inspected", LockKind::Fenced)
        && ctx.has("every_kind_is_inspected", LockKind::Semaphore(Permits::ONE))
        && ctx.inspects("every_kind_is_inspected"))
    {
        return;
    }
    let locks = &ctx.manager;
    let name = support::unique("inspect");
    let free = locks.inspect(&name).await.unwrap();
    assert_eq!((free.kind, free.holders.len()), (None, 0));
    for bad in ["", &"x".repeat(2000)] {
        let error = locks.inspect(bad).await.unwrap_err();
        assert!(matches!(error, LockError::InvalidName { .. }), "{error}");
        let error = locks.force_unlock(bad, "the test").await.unwrap_err();
        assert!(matches!(error, LockError::InvalidName { .. }), "{error}");
    }

    // The plain lock, entered twice: one holder with two holds and a lease.
    let guard = locks.lock(&name).acquire().await.unwrap();
    let again = guard.reenter().await.unwrap();
    let info = locks.inspect(&name).await.unwrap();
    assert_eq!(info.kind, Some(InspectedKind::Lock));
    let holder = &info.holders[0];
    assert_eq!(
        (holder.owner.as_str(), holder.side, holder.holds),
        (guard.owner().as_str(), HolderSide::Exclusive, 2)
    );
    assert_eq!(holder.process(), Some(locks.id()));
    let lease = holder.lease.expect("a lease");
    assert!(
        lease <= locks.default_lease() && lease > Duration::ZERO,
        "{lease:?}"
    );
    let _ = again.release().await.unwrap();
    let _ = guard.release().await.unwrap();

    // A fenced lock: the token.
    let fenced = locks.fenced_lock(&name).acquire().await.unwrap();
    let info = locks.inspect(&name).await.unwrap();
    assert_eq!(info.fencing_token, fenced.fencing_token());
    let _ = fenced.release().await.unwrap();

    // A read-write lock: two readers, each with its lease.
    let rw = support::unique("inspect-rw");
    let first = locks.read_lock(&rw).acquire().await.unwrap();
    let second = locks.read_lock(&rw).acquire().await.unwrap();
    let info = locks.inspect(&rw).await.unwrap();
    assert_eq!(info.kind, Some(InspectedKind::ReadWrite));
    let mut readers: Vec<String> = info.holders.iter().map(|h| h.owner.clone()).collect();
    readers.sort();
    let mut expected = vec![
        first.owner().as_str().to_owned(),
        second.owner().as_str().to_owned(),
    ];
    expected.sort();
    assert_eq!(readers, expected);
    assert!(info.holders.iter().all(|h| h.side == HolderSide::Read));
    assert!(info.holders.iter().all(|h| h.lease.is_some()));
    let _ = first.release().await.unwrap();
    let _ = second.release().await.unwrap();

    // A fair lock with a waiter queued behind its holder.
    let fair = support::unique("inspect-fair");
    let holder = locks.fair_lock(&fair).acquire().await.unwrap();
    let waiter = {
        let (locks, fair) = (locks.clone(), fair.clone());
        tokio::spawn(async move {
            locks
                .fair_lock(&fair)
                .wait(Duration::from_secs(30))
                .acquire()
                .await
        })
    };
    let info = support::eventually("the fair waiter is queued", || async {
        let info = locks.inspect(&fair).await.unwrap();
        (info.queued == 1).then_some(info)
    })
    .await;
    assert_eq!(info.queue.len(), 1);
    assert!(info.queue[0].place_lasts.is_some());
    assert_eq!(info.holders[0].owner, holder.owner().as_str());
    let _ = holder.release().await.unwrap();
    let _ = waiter.await.unwrap().unwrap().release().await.unwrap();

    // A semaphore: its limit, permits in use, one holder per permit.
    let sem = support::unique("inspect-sem");
    let permits = locks.semaphore(&sem, 5).permits(2).acquire().await.unwrap();
    let info = locks.inspect(&sem).await.unwrap();
    assert_eq!(info.kind, Some(InspectedKind::Semaphore));
    let usage = info.permits.expect("a semaphore's permits");
    assert_eq!((usage.limit, usage.in_use), (Some(5), 2));
    let mut ids: Vec<String> = info.holders.iter().map(|h| h.owner.clone()).collect();
    ids.sort();
    let mut mine = permits.permit_ids();
    mine.sort();
    assert_eq!(ids, mine);
    assert!(info.holders.iter().all(|h| h.side == HolderSide::Permit));
    let _ = permits.release().await.unwrap();
}

/// A force-unlock frees the name, wakes a waiter of another manager at once and tells the
/// holder through its loss signal.
pub async fn force_unlock_wakes_the_waiter_and_tells_the_holder(subject: &dyn Subject) {
    // Holders renew every second, so each one's lease has at least 2 s left: a waiter whose
    // wait is 1.5 s gets the name only if the force-unlock woke it.
    let lease = Duration::from_secs(3);
    let wait = Duration::from_millis(1500);
    let ctx = Ctx::with(subject, |builder| builder.lease(lease)).await;
    if !(ctx.has(
        "force_unlock_wakes_the_waiter_and_tells_the_holder",
        LockKind::Read,
    ) && ctx.has(
        "force_unlock_wakes_the_waiter_and_tells_the_holder",
        LockKind::Semaphore(Permits::ONE),
    ) && ctx.inspects("force_unlock_wakes_the_waiter_and_tells_the_holder"))
    {
        return;
    }
    // The waiters' manager (another process, for Redis).
    let other = ctx.manager_sharing_the_backend().await;
    for kind in ["lock", "write", "semaphore"] {
        let name = support::unique(&format!("force-{kind}"));
        let holder = match kind {
            "lock" => ctx.manager.lock(&name).acquire().await.unwrap(),
            "write" => ctx.manager.write_lock(&name).acquire().await.unwrap(),
            _ => ctx.manager.semaphore(&name, 1).acquire().await.unwrap(),
        };
        let waiter = match kind {
            "lock" => queued_waiter(&other, &name, wait).await,
            "write" => queued_for(&other, &name, wait, |locks, name| locks.write_lock(name)).await,
            _ => queued_permit_waiter(&other, &name, wait).await,
        };
        let freed = ctx.manager.force_unlock(&name, "the test").await.unwrap();
        assert_eq!(freed.freed, 1, "{kind}");
        let next = waiter.await.unwrap().expect("woken by the force-unlock");
        // Its holder is told at its next renewal.
        holder.lost().await;
        assert_eq!(holder.release().await.unwrap(), Released::NotHeld, "{kind}");
        assert_ne!(next.release().await.unwrap(), Released::NotHeld, "{kind}");
    }
    // Nothing there: nothing done.
    let nothing = ctx
        .manager
        .force_unlock(&support::unique("force-none"), "the test")
        .await
        .unwrap();
    assert_eq!((nothing.kind, nothing.freed), (None, 0));
}

/// Names are listed by pattern, within the limit, and a listing cut short says so.
pub async fn names_are_listed_by_pattern_and_bounded(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "names_are_listed_by_pattern_and_bounded",
        LockKind::Semaphore(Permits::ONE),
    ) && ctx.inspects("names_are_listed_by_pattern_and_bounded"))
    {
        return;
    }
    let prefix = support::unique("list");
    let mut guards = Vec::new();
    for i in 0..30 {
        guards.push(
            ctx.manager
                .lock(format!("{prefix}:order:{i}"))
                .acquire()
                .await
                .unwrap(),
        );
    }
    guards.push(
        ctx.manager
            .semaphore(format!("{prefix}:sem"), 3)
            .acquire()
            .await
            .unwrap(),
    );
    let all = ctx
        .manager
        .list_names(&format!("{prefix}:*"), 100)
        .await
        .unwrap();
    assert_eq!(all.names.len(), 31, "{:?}", all.names);
    assert!(!all.truncated);
    assert!(
        all.names.contains(&format!("{prefix}:sem")),
        "the semaphore, not its permits' set"
    );
    let some = ctx
        .manager
        .list_names(&format!("{prefix}:order:1*"), 5)
        .await
        .unwrap();
    assert_eq!(some.names.len(), 5);
    assert!(some.truncated, "11 names match, 5 were asked for");
    assert!(some
        .names
        .iter()
        .all(|name| name.starts_with(&format!("{prefix}:order:1"))));
    for (pattern, limit, says) in [
        ("", 10, "empty"),
        ("a[b", 10, "without its"),
        ("x*", 0, "1 to"),
    ] {
        match ctx.manager.list_names(pattern, limit).await {
            Err(LockError::InvalidName { reason }) => assert!(reason.contains(says), "{reason}"),
            other => panic!("{pattern:?} {limit}: {other:?}"),
        }
    }
    for guard in guards {
        let _ = guard.release().await.unwrap();
    }
}

/// The process's own view: each live hold (kind, owner, how long), none once released;
/// waiters by name; nothing kept when the manager is built not to.
pub async fn this_process_lists_its_holds_and_waiters(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "this_process_lists_its_holds_and_waiters",
        LockKind::Semaphore(Permits::ONE),
    )) {
        return;
    }
    let name = support::unique("local");
    let guard = ctx.manager.semaphore(&name, 1).acquire().await.unwrap();
    let holds = ctx.manager.local_holds();
    let mine: Vec<_> = holds
        .iter()
        .filter(|hold| hold.key == *guard.key())
        .collect();
    assert_eq!(mine.len(), 1, "{holds:?}");
    assert_eq!(
        (mine[0].owner.as_str(), mine[0].kind),
        (guard.owner().as_str(), guard.kind())
    );
    assert!(mine[0].renewed && !mine[0].lost && mine[0].request.is_none());
    let waiter = queued_permit_waiter(&ctx.manager, &name, Duration::from_secs(30)).await;
    let waiting = ctx.manager.local_waiters();
    assert!(
        waiting.iter().any(|(key, n)| key == guard.key() && *n == 1),
        "{waiting:?}"
    );
    let _ = guard.release().await.unwrap();
    let next = waiter.await.unwrap().unwrap();
    let _ = next.release().await.unwrap();
    // The last reference to a released hold may be a background task's for a moment.
    let key = ctx.manager.key(&name).unwrap();
    support::eventually("the released holds are gone from the view", || async {
        (!ctx.manager.local_holds().iter().any(|hold| hold.key == key)).then_some(())
    })
    .await;

    let untracked = Ctx::with(subject, |builder| builder.track_holds(false)).await;
    let _held = untracked
        .manager
        .lock(support::unique("untracked"))
        .acquire()
        .await
        .unwrap();
    assert!(untracked.manager.local_holds().is_empty());
}
