//! Both watchdogs renew holds of one name, one after the other and beside holds of their own
//! on other names, without touching each other's: a hold's PTTL never exceeds its own lease,
//! whichever side's watchdog ran last, and no hold is lost.
//!
//! Renewals are counted, not waited for by the clock: the server publishes a keyspace event
//! (`expire`) for each PEXPIRE of the lock key.

use std::time::Duration;

use fred::prelude::*;
use tokio::sync::broadcast;
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

use crate::support::redisson_java::Deployment;
use crate::support::{self, RedisServer};
use crate::Sides;

/// Redisson's `lockWatchdogTimeout` here: renewals every second.
const JAVA_WATCHDOG: Duration = Duration::from_secs(3);
/// tower-lock's leases: one longer and one shorter than Redisson's, so that a renewal by the
/// wrong side would show as a PTTL above the holder's own lease.
const LONG: Duration = Duration::from_secs(6);
const SHORT: Duration = Duration::from_millis(1500);

/// Waits for the next `event` on the key's keyspace channel.
async fn next(events: &mut broadcast::Receiver<fred::types::KeyspaceEvent>, event: &str) {
    loop {
        if events.recv().await.expect("keyspace events").operation == event {
            return;
        }
    }
}

async fn pttl(admin: &Client, key: &str) -> i64 {
    admin.pttl(key).await.unwrap()
}

/// tower-lock holds `name` under its watchdog (`lease`) through `renewals` renewals, each
/// leaving a PTTL within its own lease while Redisson is refused; then releases.
async fn tower_lock_holds(
    sides: &Sides,
    locks: &LockManager,
    name: &str,
    events: &mut broadcast::Receiver<fred::types::KeyspaceEvent>,
    renewals: usize,
    lease: Duration,
) {
    let guard = locks.lock(name).acquire().await.unwrap();
    next(events, "expire").await; // the acquisition's PEXPIRE
    for _ in 0..renewals {
        next(events, "expire").await;
        let left = pttl(&sides.admin, name).await;
        assert!(0 < left && left <= lease.as_millis() as i64, "PTTL {left}");
        assert!(!sides.java_gets_now("j", name).await);
    }
    assert!(!guard.is_lost());
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_watchdogs_renew_without_fighting() {
    let server = RedisServer::start_with(support::free_port(), &["--notify-keyspace-events", "Kg"]);
    let url = server.url();
    let sides = Sides::connect(
        &url,
        Deployment::Single(url.clone()),
        Some(JAVA_WATCHDOG),
        LockManager::builder().lease(SHORT),
    )
    .await;
    let long_locks = LockManager::builder()
        .lease(LONG)
        .redis(&url)
        .await
        .unwrap();
    let name = support::unique("interop-watchdogs");
    let events = support::subscriber(&url).await;
    let mut events_rx = events.keyspace_event_rx();
    support::subscribe_confirmed(&sides.admin, &events, &format!("__keyspace@0__:{name}")).await;

    // Each side's watchdog also keeps a hold of its own alive throughout.
    let ours = sides
        .locks
        .lock(format!("{name}:ours"))
        .acquire()
        .await
        .unwrap();
    let theirs = format!("{name}:theirs");
    assert!(
        sides
            .java
            .lock("own", "lock", &theirs, Some(Duration::ZERO), None)
            .await
            .acquired
    );

    // 1. tower-lock, lease 6 s: two renewals.
    tower_lock_holds(&sides, &long_locks, &name, &mut events_rx, 2, LONG).await;

    // 2. Redisson, watchdog 3 s: three renewals; no renewal of tower-lock's (6 s) lands.
    assert!(
        sides
            .java
            .lock("j", "lock", &name, Some(Duration::ZERO), None)
            .await
            .acquired
    );
    next(&mut events_rx, "expire").await;
    for _ in 0..3 {
        next(&mut events_rx, "expire").await;
        let left = pttl(&sides.admin, &name).await;
        assert!(
            0 < left && left <= JAVA_WATCHDOG.as_millis() as i64,
            "PTTL {left}"
        );
        assert!(matches!(
            long_locks.lock(&name).try_acquire().await,
            Err(LockError::TimedOut { .. })
        ));
        assert!(sides.java.held("j", "lock", &name).await);
    }
    sides.java.unlock("j", "lock", &name).await.unwrap();

    // 3. tower-lock, lease 1.5 s: three renewals; no renewal of Redisson's (3 s) lands.
    tower_lock_holds(&sides, &sides.locks, &name, &mut events_rx, 3, SHORT).await;

    // The holds of their own outlived all of it, each renewed by its own side alone.
    assert!(!ours.is_lost());
    assert!(sides.java.held("own", "lock", &theirs).await);
    let left = pttl(&sides.admin, &theirs).await;
    assert!(
        0 < left && left <= JAVA_WATCHDOG.as_millis() as i64,
        "PTTL {left}"
    );
    assert_eq!(ours.release().await.unwrap(), Released::Unlocked);
    sides.java.unlock("own", "lock", &theirs).await.unwrap();
}
