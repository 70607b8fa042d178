//! Read-write locks through the manager: readers share, a writer waits for them and then
//! excludes new readers, readers that queued behind a waiting writer let it go first,
//! downgrade, no upgrade, reentry, leases and the loss signal for both kinds, read holds
//! that nobody releases expire, and cancelled waiters leave nothing behind.

use std::time::Duration;

use crate::lock::{LockGuard, LockKind, Released};
use crate::{LockError, LockManager};

use super as support;
use super::ctx::Ctx;
use super::Subject;

const WAIT: Duration = Duration::from_secs(20);

fn busy(result: Result<LockGuard, LockError>) -> bool {
    matches!(result, Err(LockError::TimedOut { .. }))
}

/// Spawns a read or write acquisition and returns once it is queued.
async fn queued(
    manager: &LockManager,
    name: &str,
    kind: LockKind,
) -> tokio::task::JoinHandle<Result<LockGuard, LockError>> {
    let before = manager.waiting(name);
    let task = {
        let (manager, name) = (manager.clone(), name.to_owned());
        tokio::spawn(async move {
            let request = match kind {
                LockKind::Read => manager.read_lock(&name),
                _ => manager.write_lock(&name),
            };
            request.wait(WAIT).acquire().await
        })
    };
    support::eventually("the waiter queues", || async {
        (manager.waiting(name) > before).then_some(())
    })
    .await;
    task
}

/// Readers share; a writer waits for them, and readers that come after a waiting writer wait
/// for it.
pub async fn readers_share_and_a_writer_goes_before_later_readers(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "readers_share_and_a_writer_goes_before_later_readers",
        LockKind::Read,
    )) {
        return;
    }
    let locks = &ctx.manager;
    let name = support::unique("rw");
    let readers: Vec<_> = (0..32).map(|_| locks.read_lock(&name).acquire()).collect();
    let mut guards = Vec::new();
    for reader in readers {
        guards.push(reader.await.expect("32 readers hold at once"));
    }
    let writer = queued(locks, &name, LockKind::Write).await;
    // A reader arriving after the writer queued does not overtake it.
    assert!(busy(locks.read_lock(&name).try_acquire().await));
    let late_reader = queued(locks, &name, LockKind::Read).await;
    for guard in guards {
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
    let writer = writer
        .await
        .unwrap()
        .expect("the writer gets in after the readers");
    assert!(busy(locks.read_lock(&name).try_acquire().await));
    assert!(!late_reader.is_finished(), "readers wait for the writer");
    assert_eq!(writer.release().await.unwrap(), Released::Unlocked);
    let reader = late_reader.await.unwrap().expect("then the reader");
    assert_eq!(reader.release().await.unwrap(), Released::Unlocked);
    assert_eq!(locks.stats().claimed_names, 0);
}

/// Readers that queue behind a writer all get in together when it releases.
pub async fn a_write_release_lets_every_queued_reader_in(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has(
        "a_write_release_lets_every_queued_reader_in",
        LockKind::Read,
    )) {
        return;
    }
    let locks = &ctx.manager;
    let name = support::unique("rw-wake");
    let writer = locks.write_lock(&name).acquire().await.unwrap();
    let mut readers = Vec::new();
    for _ in 0..8 {
        readers.push(queued(locks, &name, LockKind::Read).await);
    }
    assert_eq!(writer.release().await.unwrap(), Released::Unlocked);
    let mut guards = Vec::new();
    for reader in readers {
        guards.push(reader.await.unwrap().expect("every reader gets in"));
    }
    // All eight hold at once.
    assert!(busy(locks.write_lock(&name).try_acquire().await));
    for guard in guards {
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
}

/// A writer may also read (a downgrade) and reenter; a reader can never write (no upgrade).
pub async fn downgrade_reentry_and_no_upgrade(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has("downgrade_reentry_and_no_upgrade", LockKind::Read)) {
        return;
    }
    let locks = &ctx.manager;
    let name = support::unique("rw-kinds");
    let write = locks.write_lock(&name).acquire().await.unwrap();
    let write_again = write.write_lock().await.unwrap();
    // The writer's read hold does not queue behind a waiting reader.
    let waiting_reader = queued(locks, &name, LockKind::Read).await;
    let read = write.read_lock().await.expect("the writer may read");
    assert!(
        busy(locks.read_lock(&name).try_acquire().await),
        "still writing"
    );
    assert_eq!(write_again.release().await.unwrap(), Released::StillHeld);
    assert_eq!(write.release().await.unwrap(), Released::Unlocked);
    // Reading only now: other readers share, writers wait.
    let waited = waiting_reader
        .await
        .unwrap()
        .expect("the queued reader shares now");
    assert_eq!(waited.release().await.unwrap(), Released::Unlocked);
    let other = locks.read_lock(&name).try_acquire().await.unwrap();
    assert!(busy(locks.write_lock(&name).try_acquire().await));
    let upgrade = other.write_lock().await;
    assert!(
        matches!(
            &upgrade,
            Err(LockError::KindMismatch {
                held: LockKind::Read,
                asked: LockKind::Write,
                ..
            })
        ),
        "{upgrade:?}"
    );
    assert!(upgrade.unwrap_err().to_string().contains("no upgrade"));
    let read_again = read.reenter().await.unwrap();
    let plain = locks
        .lock(support::unique("plain"))
        .acquire()
        .await
        .unwrap();
    assert!(matches!(
        plain.read_lock().await,
        Err(LockError::KindMismatch { .. })
    ));
    assert_eq!(plain.release().await.unwrap(), Released::Unlocked);
    for guard in [read_again, read, other] {
        assert_ne!(guard.release().await.unwrap(), Released::NotHeld);
    }
    let write = locks.write_lock(&name).try_acquire().await.unwrap();
    assert_eq!(write.release().await.unwrap(), Released::Unlocked);
}

/// Both kinds keep their holds under the watchdog, and learn of a deleted lock at the next
/// renewal.
pub async fn leases_and_the_loss_signal(subject: &dyn Subject) {
    let lease = Duration::from_millis(300);
    let ctx = Ctx::with(subject, |b| b.lease(lease)).await;
    if !(ctx.has("leases_and_the_loss_signal", LockKind::Read)
        && ctx.inspects("leases_and_the_loss_signal"))
    {
        return;
    }
    let locks = &ctx.manager;
    for kind in [LockKind::Read, LockKind::Write] {
        let name = support::unique("rw-loss");
        let request = match kind {
            LockKind::Read => locks.read_lock(&name),
            _ => locks.write_lock(&name),
        };
        let guard = request.acquire().await.unwrap();
        // Held past three leases by the watchdog.
        tokio::time::sleep(lease * 3).await;
        assert!(!guard.is_lost(), "{kind:?}");
        assert!(busy(locks.write_lock(&name).try_acquire().await));
        ctx.delete(&name).await;
        tokio::time::timeout(Duration::from_secs(10), guard.lost())
            .await
            .expect("the next renewal reports the loss");
        assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
    }
}

/// A reader that never releases (its process died: here its guard is leaked, and its lease
/// is fixed) loses its hold when the lease ends; a waiting writer then gets in.
pub async fn read_holds_nobody_releases_expire(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has("read_holds_nobody_releases_expire", LockKind::Read)) {
        return;
    }
    let locks = &ctx.manager;
    let name = support::unique("rw-crash");
    let lease = Duration::from_millis(400);
    for _ in 0..3 {
        let guard = locks
            .read_lock(&name)
            .fixed_lease(lease)
            .acquire()
            .await
            .unwrap();
        std::mem::forget(guard);
    }
    let writer = locks.write_lock(&name).wait(WAIT).acquire().await;
    let writer = writer.expect("the writer gets in once the readers' leases end");
    assert_eq!(writer.release().await.unwrap(), Released::Unlocked);
}

/// Waiting readers and writers that are cancelled leave no waiter, claim or subscription.
pub async fn cancelled_waiters_leave_nothing(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    if !(ctx.has("cancelled_waiters_leave_nothing", LockKind::Read)) {
        return;
    }
    let locks = &ctx.manager;
    let name = support::unique("rw-cancel");
    let writer = locks.write_lock(&name).acquire().await.unwrap();
    let mut waiters = Vec::new();
    for kind in [LockKind::Read, LockKind::Write, LockKind::Read] {
        waiters.push(queued(locks, &name, kind).await);
    }
    for waiter in &waiters {
        waiter.abort();
    }
    for waiter in waiters {
        assert!(waiter.await.unwrap_err().is_cancelled());
    }
    assert_eq!(locks.waiting(&name), 0);
    assert_eq!(writer.release().await.unwrap(), Released::Unlocked);
    // Its subscription, if it has one, is given up too.
    support::nothing_left_behind(locks).await;
}
