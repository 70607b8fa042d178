//! Fenced locks through the manager: every acquisition, reentry included, gets a token
//! greater than every one before it, across processes; a re-sent acquisition that already
//! counted keeps its token; the fenced and the plain lock of one name exclude each other;
//! a holder whose lease ran out holds a token lower than the next holder's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::{AcquireArgs, Attempt};
use crate::lock::{LockKind, OwnerId, Released};
use crate::LockError;

use super as support;
use super::ctx::Ctx;
use super::Subject;

/// Acquisitions, reentries and releases: each token is greater than the one before.
pub async fn every_acquisition_gets_a_greater_token(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has("every_acquisition_gets_a_greater_token", LockKind::Fenced)) {
        return;
    }
    let name = support::unique("fenced-grows");
    let mut last = 0;
    for _ in 0..3 {
        let guard = ctx.manager.fenced_lock(&name).acquire().await.unwrap();
        assert_eq!(guard.kind(), LockKind::Fenced);
        let token = guard.fencing_token().expect("a fenced guard has a token");
        assert!(token > last, "{token} after {last}");
        let again = guard.reenter().await.unwrap();
        let reentered = again.fencing_token().expect("a reentry has a token");
        assert!(
            reentered > token,
            "a reentry counts too: {reentered} after {token}"
        );
        assert_eq!(again.release().await.unwrap(), Released::StillHeld);
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
        last = reentered;
    }
    if let Some(info) = ctx.inspected(&name).await {
        assert_eq!(
            info.fencing_token,
            Some(last),
            "the last token given is kept"
        );
    }
    assert_eq!(
        ctx.manager
            .lock(&name)
            .acquire()
            .await
            .unwrap()
            .fencing_token(),
        None,
        "the plain lock has no token"
    );
}

/// The fenced and the plain lock of one name are one lock (Redisson's `RFencedLock` is an
/// `RLock`).
pub async fn fenced_and_plain_locks_exclude_each_other(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "fenced_and_plain_locks_exclude_each_other",
        LockKind::Fenced,
    )) {
        return;
    }
    let name = support::unique("fenced-plain");
    let fenced = ctx.manager.fenced_lock(&name).acquire().await.unwrap();
    let busy = ctx.manager.lock(&name).try_acquire().await.unwrap_err();
    assert!(matches!(busy, LockError::TimedOut { .. }), "{busy}");
    assert_eq!(fenced.release().await.unwrap(), Released::Unlocked);
    let plain = ctx.manager.lock(&name).acquire().await.unwrap();
    let busy = ctx
        .manager
        .fenced_lock(&name)
        .try_acquire()
        .await
        .unwrap_err();
    assert!(matches!(busy, LockError::TimedOut { .. }), "{busy}");
    assert_eq!(plain.release().await.unwrap(), Released::Unlocked);
}

/// A backend applies a fenced acquisition at most once: sent again after it counted, it
/// answers the same token and counts no second hold (a reentry likewise).
pub async fn a_resent_acquisition_keeps_its_token(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has("a_resent_acquisition_keeps_its_token", LockKind::Fenced)) {
        return;
    }
    let store = ctx.backend().await;
    let key = ctx.manager.key(&support::unique("fenced-resent")).unwrap();
    let args = |expected| {
        AcquireArgs::new(
            key.clone(),
            LockKind::Fenced,
            OwnerId::from_raw("resender"),
            Duration::from_secs(30),
        )
        .expected(expected)
    };
    let first = store.acquire(args(0)).await.unwrap();
    let token = first.fencing_token().expect("acquired with a token");
    assert_eq!(
        store.acquire(args(0)).await.unwrap(),
        Attempt::Fenced(token)
    );
    let reentry = store.acquire(args(1)).await.unwrap();
    assert_eq!(reentry, Attempt::Fenced(token + 1));
    assert_eq!(store.acquire(args(1)).await.unwrap(), reentry);
    assert_eq!(store.acquire(args(3)).await.unwrap(), Attempt::Lost);
    let other = AcquireArgs::new(
        key.clone(),
        LockKind::Fenced,
        OwnerId::from_raw("other"),
        Duration::from_secs(30),
    );
    let reports_lease = store.capabilities().reports_holder_lease;
    assert!(matches!(
        store.acquire(other).await.unwrap(),
        Attempt::Busy(lease) if lease.is_some() == reports_lease
    ));
    // Two holds, not three: the second release frees it.
    let release = |expected| {
        crate::backend::ReleaseArgs::new(
            key.clone(),
            LockKind::Fenced,
            OwnerId::from_raw("resender"),
            Duration::from_secs(30),
            expected,
        )
    };
    assert_eq!(
        store.release(release(2)).await.unwrap().released,
        Released::StillHeld
    );
    assert_eq!(
        store.release(release(1)).await.unwrap().released,
        Released::Unlocked
    );
}

/// Holders of two managers (processes; one in memory), four tasks each, contend: the
/// tokens, in the order the holders ran, only grow.
pub async fn tokens_grow_in_the_order_holders_run(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has("tokens_grow_in_the_order_holders_run", LockKind::Fenced)) {
        return;
    }
    let first = ctx.manager.clone();
    let second = ctx.second_process().await;
    let name = support::unique("fenced-order");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let manager = if worker % 2 == 0 { &first } else { &second }.clone();
        let (name, seen) = (name.clone(), seen.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                let guard = manager
                    .fenced_lock(&name)
                    .wait(Duration::from_secs(30))
                    .acquire()
                    .await
                    .unwrap();
                seen.lock().unwrap().push(guard.fencing_token().unwrap());
                tokio::task::yield_now().await;
                assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 80);
    assert!(
        seen.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens in holding order: {seen:?}"
    );
}

/// A holder whose fixed lease ran out (a pause it cannot see) holds a lower token than the
/// next holder (`examples/fenced_write.rs` shows a store refusing its write).
pub async fn a_holder_past_its_lease_has_the_lower_token(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "a_holder_past_its_lease_has_the_lower_token",
        LockKind::Fenced,
    )) {
        return;
    }
    let name = support::unique("fenced-stale");
    let paused = ctx
        .manager
        .fenced_lock(&name)
        .fixed_lease(Duration::from_millis(200))
        .acquire()
        .await
        .unwrap();
    paused.lost().await;
    let next = ctx
        .manager
        .fenced_lock(&name)
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let (late, current) = (
        paused.fencing_token().unwrap(),
        next.fencing_token().unwrap(),
    );
    assert!(
        late < current,
        "{late} < {current}: the late write can be refused"
    );
    assert_eq!(paused.release().await.unwrap(), Released::NotHeld);
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
}

/// A fenced waiter queued behind a plain holder of the same name gets a token of its own
/// when the plain lock is released (a plain release never hands a fenced waiter the lock
/// without one), and the plain waiter behind it then gets the lock too.
pub async fn a_fenced_waiter_behind_a_plain_holder_gets_a_token(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "a_fenced_waiter_behind_a_plain_holder_gets_a_token",
        LockKind::Fenced,
    )) {
        return;
    }
    let name = support::unique("fenced-behind-plain");
    let plain = ctx.manager.lock(&name).acquire().await.unwrap();
    let fenced = tokio::spawn({
        let (manager, name) = (ctx.manager.clone(), name.clone());
        async move {
            let guard = manager
                .fenced_lock(&name)
                .wait(Duration::from_secs(30))
                .acquire()
                .await
                .unwrap();
            let token = guard.fencing_token();
            (guard.release().await.unwrap(), token)
        }
    });
    while ctx.manager.waiting(&name) == 0 {
        tokio::task::yield_now().await;
    }
    let handed = plain.release().await.unwrap();
    let (released, token) = fenced.await.unwrap();
    assert!(token.is_some(), "a fenced guard always has a token");
    assert_eq!(handed, Released::Unlocked, "freed, not handed over");
    assert_eq!(released, Released::Unlocked);
}
