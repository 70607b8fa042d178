//! Waiting: FIFO order, wake-ups on release, typed timeouts, and waiters that give up.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::lock::Released;
use crate::LockError;

use super as support;
use super::ctx::{queued_waiter, Ctx};
use super::Subject;

/// Waiters of one manager get the lock in the order they came.
pub async fn waiters_acquire_in_fifo_order(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let name = support::unique("fifo");
    let holder = ctx.manager.lock(&name).acquire().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..100 {
        let (manager, n, order) = (ctx.manager.clone(), name.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let guard = manager
                .lock(&n)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
                .unwrap_or_else(|e| panic!("waiter {i} failed: {e}"));
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(1)).await;
            let _ = guard.release().await.unwrap();
        }));
        // Enqueue in a known order: wait until waiter i is queued.
        while ctx.manager.waiting(&name) < i + 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let _ = holder.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..100).collect::<Vec<_>>());
    assert_eq!(ctx.manager.waiting_names(), 0);
}

/// A release wakes the next waiter at once, whatever the holder's lease: with an hour's
/// lease, a lost wake-up would leave the waiter to time out.
pub async fn a_release_wakes_the_waiter_before_the_lease_ends(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let name = support::unique("wake");
    let holder = ctx
        .manager
        .lock(&name)
        .fixed_lease(Duration::from_secs(3600))
        .acquire()
        .await
        .unwrap();
    let waiter = queued_waiter(&ctx.manager, &name, Duration::from_secs(20)).await;
    // Redis hands the lock straight to the waiter unless its own attempt is on its way.
    let released = holder.release().await.unwrap();
    assert!(
        matches!(released, Released::Unlocked | Released::HandedOver),
        "{released:?}"
    );
    let guard = waiter.await.unwrap().expect("the release woke the waiter");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    support::nothing_left_behind(&ctx.manager).await;
}

/// A wait that ends while the lock is held is `LockError::TimedOut`, after the wait and well
/// before the holder's lease.
pub async fn wait_times_out_with_a_typed_error(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let name = support::unique("timeout");
    let _holder = ctx.manager.lock(&name).acquire().await.unwrap();
    let wait = Duration::from_millis(200);
    match ctx.manager.lock(&name).wait(wait).acquire().await {
        Err(LockError::TimedOut {
            key,
            waited,
            holder_lease,
            held_back,
            ..
        }) => {
            assert_eq!(key.as_str(), name);
            assert!(!held_back, "a plain lock is never held back");
            assert!(waited >= wait, "gave up early, after {waited:?}");
            assert!(waited < crate::manager::DEFAULT_LEASE, "waited {waited:?}");
            match holder_lease {
                Some(lease) => assert!(lease <= crate::manager::DEFAULT_LEASE),
                None => assert!(!ctx.capabilities().reports_holder_lease, "no holder lease"),
            }
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(ctx.manager.waiting_names(), 0);
}

/// A release that finds the lock gone (deleted behind its holder) lets the next local
/// waiter try at once: the lock is free. It used to leave the waiter asleep until the
/// holder's lease as last reported (here 300 s), or its own deadline.
pub async fn a_release_that_finds_the_lock_gone_wakes_the_next_waiter(subject: &dyn Subject) {
    let lease = Duration::from_secs(300);
    let ctx = Ctx::with(subject, |b| b.lease(lease).hand_over_limit(0)).await;
    if !(ctx.inspects("a_release_that_finds_the_lock_gone_wakes_the_next_waiter")) {
        return;
    }
    let name = support::unique("gone-wakes");
    let holder = ctx.manager.lock(&name).acquire().await.unwrap();
    let waiter = queued_waiter(&ctx.manager, &name, lease).await;
    ctx.delete(&name).await;
    assert_eq!(holder.release().await.unwrap(), Released::NotHeld);
    // Far less than the 300 s the waiter was told the holder's lease runs.
    let guard = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter tries as soon as the release found the lock gone")
        .unwrap()
        .expect("and gets the free lock");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    support::nothing_left_behind(&ctx.manager).await;
}

/// A waiter dropped while it waits leaves the queue, and nothing of it is left behind.
pub async fn dropped_waiter_leaves_the_queue(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let name = support::unique("dropwait");
    let holder = ctx.manager.lock(&name).acquire().await.unwrap();
    let waiter = queued_waiter(&ctx.manager, &name, Duration::from_secs(60)).await;
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    assert_eq!(ctx.manager.waiting(&name), 0);
    assert_eq!(ctx.manager.waiting_names(), 0);
    let _ = holder.release().await.unwrap();
    // Its subscription, if it has one, is given up too.
    support::nothing_left_behind(&ctx.manager).await;
}
