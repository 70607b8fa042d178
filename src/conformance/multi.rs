//! Multi-locks through the manager: two callers locking the same keys crosswise never
//! deadlock and never overlap; a partial failure releases what was taken; a part lost
//! mid-hold fires the loss signal; duplicates are taken once; bad names are errors; a
//! dropped acquisition leaves nothing behind. On the cluster the parts live in different
//! slots.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::lock::Released;
use crate::{LockError, LockManager};

use super as support;
use super::ctx::Ctx;
use super::Subject;

const WAIT: Duration = Duration::from_secs(30);

/// Two callers (two processes where the backend serves several) lock {A, B} and {B, A}
/// 1,000 times each: all complete (no deadlock), and nobody else is ever inside either key.
pub async fn crosswise_callers_never_deadlock_nor_overlap(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let other = ctx.second_process().await;
    let (a, b) = (support::unique("multi-a"), support::unique("multi-b"));
    let inside = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let caller = |manager: LockManager, names: [String; 2]| {
        let inside = inside.clone();
        tokio::spawn(async move {
            for _ in 0..1000 {
                let guard = manager
                    .multi_lock(&names)
                    .wait(WAIT)
                    .acquire()
                    .await
                    .unwrap();
                for count in inside.iter() {
                    assert_eq!(count.fetch_add(1, Ordering::SeqCst), 0, "overlap");
                }
                tokio::task::yield_now().await;
                for count in inside.iter() {
                    count.fetch_sub(1, Ordering::SeqCst);
                }
                assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
            }
        })
    };
    let first = caller(ctx.manager.clone(), [a.clone(), b.clone()]);
    let second = caller(other.clone(), [b.clone(), a.clone()]);
    first.await.unwrap();
    second.await.unwrap();
    support::nothing_left_behind(&ctx.manager).await;
    support::nothing_left_behind(&other).await;
}

/// A part held by someone else: the multi-lock waits for it within its wait, then fails and
/// leaves every other part free (the parts before it, held while it waited, and after it).
pub async fn a_partial_failure_releases_what_was_taken(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let names = ["a", "b", "c"].map(|n| support::unique(&format!("multi-partial-{n}")));
    let blocker = ctx.manager.lock(&names[1]).acquire().await.unwrap();
    for wait in [Duration::ZERO, Duration::from_millis(100)] {
        let error = ctx
            .manager
            .multi_lock(&names)
            .wait(wait)
            .acquire()
            .await
            .unwrap_err();
        match &error {
            LockError::TimedOut { key, waited, .. } => {
                assert_eq!(key.as_str(), ctx.manager.key(&names[1]).unwrap().as_str());
                assert!(*waited >= wait);
            }
            other => panic!("expected TimedOut on the blocked part, got {other:?}"),
        }
        for name in [&names[0], &names[2]] {
            let free = ctx.manager.lock(name).try_acquire().await;
            let free = free.unwrap_or_else(|e| panic!("{name} was left held: {e}"));
            assert_eq!(free.release().await.unwrap(), Released::Unlocked);
        }
    }
    assert_eq!(blocker.release().await.unwrap(), Released::Unlocked);
    let all = ctx.manager.multi_lock(&names).try_acquire().await.unwrap();
    assert_eq!(all.parts().len(), 3);
    assert_eq!(all.release().await.unwrap(), Released::Unlocked);
    support::nothing_left_behind(&ctx.manager).await;
}

/// A waiting multi-lock gets every part once the holder of one lets it go.
pub async fn a_waiting_multi_lock_gets_all_parts_when_freed(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let names = [
        support::unique("multi-wait-a"),
        support::unique("multi-wait-b"),
    ];
    let blocker = ctx.manager.lock(&names[0]).acquire().await.unwrap();
    let waiter = {
        let (manager, names) = (ctx.manager.clone(), names.clone());
        tokio::spawn(async move { manager.multi_lock(&names).wait(WAIT).acquire().await })
    };
    while ctx.manager.waiting(&names[0]) == 0 {
        tokio::task::yield_now().await;
    }
    let released = blocker.release().await.unwrap();
    assert!(
        matches!(released, Released::Unlocked | Released::HandedOver),
        "{released:?}"
    );
    let guard = waiter.await.unwrap().unwrap();
    for name in &names {
        assert!(
            ctx.manager.lock(name).try_acquire().await.is_err(),
            "{name} held"
        );
    }
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

/// A part deleted behind the holder's back: the multi-lock's loss signal fires, and its
/// release reports the part not held.
pub async fn a_part_lost_mid_hold_fires_the_loss_signal(subject: &dyn Subject) {
    let ctx = Ctx::with(subject, |b| b.lease(Duration::from_millis(300))).await;
    if !(ctx.inspects("a_part_lost_mid_hold_fires_the_loss_signal")) {
        return;
    }
    let names = [
        support::unique("multi-lost-a"),
        support::unique("multi-lost-b"),
    ];
    let guard = ctx.manager.multi_lock(&names).acquire().await.unwrap();
    let signal = guard.loss();
    assert!(!guard.is_lost());
    ctx.delete(&names[1]).await;
    guard.lost().await;
    assert!(signal.is_lost() && guard.is_lost());
    assert!(guard.parts()[1].is_lost() && !guard.parts()[0].is_lost());
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
    support::nothing_left_behind(&ctx.manager).await;
}

/// A name given twice is taken once; no names, or an invalid one, is an error.
pub async fn duplicates_once_and_bad_names_are_errors(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let name = support::unique("multi-dup");
    let guard = ctx
        .manager
        .multi_lock([name.as_str(), name.as_str()])
        .acquire()
        .await
        .unwrap();
    assert_eq!(guard.parts().len(), 1);
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    let none = ctx.manager.multi_lock(Vec::<String>::new()).acquire().await;
    assert!(
        matches!(none, Err(LockError::InvalidName { .. })),
        "{none:?}"
    );
    let bad = ctx.manager.multi_lock([name.as_str(), ""]).acquire().await;
    assert!(matches!(bad, Err(LockError::InvalidName { .. })), "{bad:?}");
    assert!(ctx.manager.lock(&name).try_acquire().await.is_ok());
}

/// Acquisitions dropped at every point, while a part is busy: nothing stays held or
/// queued.
pub async fn dropped_acquisitions_leave_nothing(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let names = [
        support::unique("multi-drop-a"),
        support::unique("multi-drop-b"),
    ];
    let blocker = ctx.manager.lock(&names[1]).acquire().await.unwrap();
    for polls in 0..12 {
        let mut acquiring = Box::pin(ctx.manager.multi_lock(&names).wait(WAIT).acquire());
        for _ in 0..polls {
            let _ = futures_poll_once(acquiring.as_mut()).await;
            tokio::task::yield_now().await;
        }
        drop(acquiring);
    }
    assert_eq!(blocker.release().await.unwrap(), Released::Unlocked);
    support::eventually("every part is free again", || async {
        let guard = ctx.manager.multi_lock(&names).try_acquire().await.ok()?;
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
        Some(())
    })
    .await;
    support::eventually("nothing queued or claimed", || async {
        (ctx.manager.stats() == Default::default()).then_some(())
    })
    .await;
}

/// Polls `future` once.
async fn futures_poll_once<F: std::future::Future + ?Sized>(
    future: std::pin::Pin<&mut F>,
) -> std::task::Poll<F::Output> {
    let mut future = Some(future);
    std::future::poll_fn(|cx| std::task::Poll::Ready(future.take().unwrap().poll(cx))).await
}
