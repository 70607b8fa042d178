//! Leases: fixed leases expire, the watchdog renews, the loss signal fires, huge leases are capped.

use std::time::Duration;

use tower_lock::lock::Released;
use tower_lock::manager::MAX_LEASE;

use crate::ctx::Ctx;
use crate::support;
use crate::support::suite::{backend_suite, BackendUnderTest};

async fn explicit_lease_expires(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
    let name = support::unique("lease");
    let lease = Duration::from_millis(300);
    let guard = ctx
        .manager
        .lock(&name)
        .fixed_lease(lease)
        .acquire()
        .await
        .unwrap();
    assert!(!guard.is_renewed());
    assert!(!guard.is_lost());
    let next = ctx
        .manager
        .lock(&name)
        .wait(Duration::from_secs(20))
        .acquire()
        .await
        .expect("another owner gets the lock once the lease ends");
    guard.lost().await;
    assert!(guard.is_lost());
    assert_eq!(
        guard.release().await.unwrap(),
        Released::NotHeld,
        "an expired lease is a typed outcome"
    );
    assert!(
        ctx.manager.lock(&name).try_acquire().await.is_err(),
        "the late release left the new holder alone"
    );
    let _ = next.release().await.unwrap();
}

async fn watchdog_keeps_a_long_hold(backend: BackendUnderTest) {
    let lease = Duration::from_millis(300);
    let ctx = Ctx::with(backend, |b| b.lease(lease)).await;
    let name = support::unique("watchdog");
    let guard = ctx.manager.lock(&name).acquire().await.unwrap();
    assert!(guard.is_renewed());
    tokio::time::sleep(lease * 3).await;
    assert!(!guard.is_lost());
    assert!(
        ctx.manager.lock(&name).try_acquire().await.is_err(),
        "held past three leases"
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

async fn loss_signal_fires_when_the_lock_disappears(backend: BackendUnderTest) {
    let lease = Duration::from_millis(300);
    let ctx = Ctx::with(backend, |b| b.lease(lease)).await;
    let name = support::unique("loss");
    let guard = ctx.manager.lock(&name).acquire().await.unwrap();
    let loss = guard.loss();
    ctx.delete(&name).await;
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("the next renewal reports the loss");
    assert!(loss.is_lost());
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
}

/// A lease too long for the clock (`Duration::MAX`) is lowered to `MAX_LEASE`, explicit
/// or the manager's own: no panic, and the lock works as usual.
async fn huge_leases_are_capped(backend: BackendUnderTest) {
    let ctx = Ctx::with(backend, |b| b.lease(Duration::MAX)).await;
    let name = support::unique("huge-lease");
    let renewed = ctx.manager.lock(&name).acquire().await.unwrap();
    assert_eq!(renewed.lease(), MAX_LEASE);
    assert!(renewed.is_renewed() && !renewed.is_lost());
    assert_eq!(renewed.release().await.unwrap(), Released::Unlocked);
    let explicit = ctx
        .manager
        .lock(&name)
        .fixed_lease(Duration::MAX)
        .acquire()
        .await
        .unwrap();
    assert_eq!(explicit.lease(), MAX_LEASE);
    assert!(!explicit.is_renewed() && !explicit.is_lost());
    assert!(ctx.manager.lock(&name).try_acquire().await.is_err());
    assert_eq!(explicit.release().await.unwrap(), Released::Unlocked);
}

backend_suite!(
    [Memory, Redis, Cluster]
    explicit_lease_expires,
    watchdog_keeps_a_long_hold,
    loss_signal_fires_when_the_lock_disappears,
    huge_leases_are_capped,
);
