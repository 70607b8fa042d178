//! Leases: fixed leases expire, the watchdog renews, the loss signal fires, huge leases are capped.

use std::time::Duration;

use crate::lock::Released;
use crate::manager::MAX_LEASE;

use super as support;
use super::ctx::Ctx;
use super::Subject;

/// A fixed lease ends by itself: another owner gets the lock after it, and the late release
/// says it was not held.
pub async fn explicit_lease_expires(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
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

/// The watchdog renews a hold past several leases.
pub async fn watchdog_keeps_a_long_hold(subject: &dyn Subject) {
    let lease = Duration::from_millis(300);
    let ctx = Ctx::with(subject, |b| b.lease(lease)).await;
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

/// A lock freed behind its holder's back fires the holder's loss signal.
pub async fn loss_signal_fires_when_the_lock_disappears(subject: &dyn Subject) {
    let lease = Duration::from_millis(300);
    let ctx = Ctx::with(subject, |b| b.lease(lease)).await;
    if !(ctx.inspects("loss_signal_fires_when_the_lock_disappears")) {
        return;
    }
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
pub async fn huge_leases_are_capped(subject: &dyn Subject) {
    let ctx = Ctx::with(subject, |b| b.lease(Duration::MAX)).await;
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
