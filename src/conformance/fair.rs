//! Fair locks through the manager: waiters of several managers (processes) are granted the
//! lock in arrival order; a live waiter keeps its place however long the holder keeps the
//! lock; a waiter that stopped asking is dropped from the head of the queue within its
//! timeout and the next goes on, without polling meanwhile; several such waiters cost one
//! timeout in all; dropped waiters leave the
//! queue; a single try never overtakes the queue; reentry and the loss signal.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::{AcquireArgs, Backend};
use crate::lock::{LockKind, OwnerId, Released};
use crate::manager::LockManagerBuilder;
use crate::{LockError, LockManager};

use super as support;
use super::Subject;

const WAIT: Duration = Duration::from_secs(20);

/// Several managers on one backend: each stands for a process.
struct Processes<'a> {
    managers: Vec<LockManager>,
    subject: &'a dyn Subject,
}

impl<'a> Processes<'a> {
    /// `count` managers built by `configure`; `None` when the backend has no fair locks or
    /// cannot be inspected (the check says so and passes).
    async fn new(
        check: &str,
        subject: &'a dyn Subject,
        count: usize,
        configure: impl Fn(LockManagerBuilder) -> LockManagerBuilder,
    ) -> Option<Processes<'a>> {
        let mut managers = Vec::new();
        for _ in 0..count {
            managers.push(subject.manager(configure(LockManager::builder())).await);
        }
        let capabilities = managers[0].capabilities();
        if !capabilities.kinds.contains(LockKind::Fair) || !capabilities.inspects {
            let needs = "fair locks or inspection";
            super::not_applicable(check, managers[0].backend_name(), needs);
            return None;
        }
        Some(Processes { managers, subject })
    }

    /// (places in the queue, places listed) of `name`'s fair lock in the backend, as an
    /// inspection reads them.
    async fn queue(&self, name: &str) -> (usize, usize) {
        let info = self.managers[0].inspect(name).await.unwrap();
        (info.queued, info.queue.len())
    }

    /// A second handle on the backend, to queue a waiter that then stops asking.
    async fn backend(&self) -> Arc<dyn Backend> {
        self.subject.backend().await
    }

    /// Spawns a fair waiter in process `at` that records `mark` in `order` once it holds
    /// the lock, then releases it; returns once the backend's queue has grown to `places`.
    async fn queue_waiter(
        &self,
        at: usize,
        name: &str,
        mark: usize,
        order: &Arc<Mutex<Vec<usize>>>,
        places: usize,
    ) -> tokio::task::JoinHandle<()> {
        let (manager, name2, order) = (self.managers[at].clone(), name.to_owned(), order.clone());
        let task = tokio::spawn(async move {
            let guard = manager
                .fair_lock(&name2)
                .wait(WAIT)
                .acquire()
                .await
                .unwrap();
            order.lock().unwrap().push(mark);
            assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
        });
        // The barrier: the next waiter starts only once this one has its place.
        support::eventually("the waiter takes its place", || async {
            (self.queue(name).await.0 == places).then_some(())
        })
        .await;
        task
    }
}

/// Nine waiters in three processes, started one after another, hold the lock in the order
/// they came.
pub async fn arrival_order_is_acquisition_order_across_processes(subject: &dyn Subject) {
    let Some(procs) = Processes::new(
        "arrival_order_is_acquisition_order_across_processes",
        subject,
        3,
        |b| b,
    )
    .await
    else {
        return;
    };
    let name = support::unique("fair-order");
    let holder = procs.managers[0].fair_lock(&name).acquire().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    // Interleaved so that no process's waiters are next to each other.
    for mark in 0..9 {
        let at = [2, 0, 1][mark % 3];
        waiters.push(procs.queue_waiter(at, &name, mark, &order, mark + 1).await);
    }
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..9).collect::<Vec<_>>());
    assert_eq!(procs.queue(&name).await, (0, 0), "the queue is empty");
}

/// A holder keeps the lock under its watchdog for over 3 queue timeouts: the waiters keep
/// their places (Redisson drops them: #3004) and get the lock in arrival order.
pub async fn live_waiters_keep_their_places_past_the_queue_timeout(subject: &dyn Subject) {
    let timeout = Duration::from_millis(300);
    let Some(procs) = Processes::new(
        "live_waiters_keep_their_places_past_the_queue_timeout",
        subject,
        2,
        |b| {
            b.fair_queue_timeout(timeout)
                .lease(Duration::from_millis(600))
        },
    )
    .await
    else {
        return;
    };
    let name = support::unique("fair-long-hold");
    let holder = procs.managers[0].fair_lock(&name).acquire().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for mark in 0..3 {
        waiters.push(
            procs
                .queue_waiter(mark % 2, &name, mark, &order, mark + 1)
                .await,
        );
    }
    // The scenario itself: the holder keeps the lock this long (its lease is renewed).
    tokio::time::sleep(timeout * 4).await;
    assert!(!holder.loss().is_lost());
    assert_eq!(procs.queue(&name).await, (3, 3), "nobody lost its place");
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
}

/// A waiter that stops asking (its process died) at the head of the queue is dropped within
/// its queue timeout, and the waiter behind it gets the lock.
pub async fn a_dead_head_is_dropped_and_the_next_goes_on(subject: &dyn Subject) {
    let timeout = Duration::from_millis(400);
    let Some(procs) = Processes::new(
        "a_dead_head_is_dropped_and_the_next_goes_on",
        subject,
        1,
        |b| b.fair_queue_timeout(timeout),
    )
    .await
    else {
        return;
    };
    let locks = &procs.managers[0];
    let name = support::unique("fair-dead-head");
    let key = locks.key(&name).unwrap();
    let holder = locks.fair_lock(&name).acquire().await.unwrap();
    // A waiter of a process that dies once it has its place: one attempt, no more.
    let ghost = procs.backend().await;
    let queued = ghost
        .acquire(
            AcquireArgs::new(
                key.clone(),
                LockKind::Fair,
                OwnerId::from_raw("ghost:1"),
                Duration::from_secs(30),
            )
            .fair_place(timeout, false),
        )
        .await
        .unwrap();
    assert!(matches!(queued, crate::backend::Attempt::Queued { .. }));
    let order = Arc::new(Mutex::new(Vec::new()));
    let live = procs.queue_waiter(0, &name, 1, &order, 2).await;
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    // Its turn is not given to the live waiter before the ghost's place runs out...
    assert!(matches!(
        locks.fair_lock(&name).try_acquire().await,
        Err(LockError::TimedOut { .. })
    ));
    // ...and then it is, well within the live waiter's wait.
    live.await.unwrap();
    assert_eq!(*order.lock().unwrap(), vec![1]);
    assert_eq!(procs.queue(&name).await, (0, 0));
}

/// Five waiters that stop asking (a killed process's) queue ahead of a live one. Their
/// places run out one queue timeout after they asked, and the live waiter's next attempt
/// drops them all, each moving the places behind up by one timeout: it holds the lock about
/// one timeout after they asked, where dropping them one after another took five.
pub async fn dead_waiters_are_dropped_together(subject: &dyn Subject) {
    let timeout = Duration::from_secs(1);
    let Some(procs) = Processes::new("dead_waiters_are_dropped_together", subject, 1, |b| {
        b.fair_queue_timeout(timeout)
    })
    .await
    else {
        return;
    };
    let locks = &procs.managers[0];
    let name = support::unique("fair-dead-run");
    let key = locks.key(&name).unwrap();
    let holder = locks.fair_lock(&name).acquire().await.unwrap();
    let ghost = procs.backend().await;
    let asked = std::time::Instant::now();
    for n in 0..5 {
        let queued = ghost
            .acquire(
                AcquireArgs::new(
                    key.clone(),
                    LockKind::Fair,
                    OwnerId::from_raw(&format!("ghost:{n}")),
                    Duration::from_secs(30),
                )
                .fair_place(timeout, false),
            )
            .await
            .unwrap();
        assert!(matches!(queued, crate::backend::Attempt::Queued { .. }));
    }
    let order = Arc::new(Mutex::new(Vec::new()));
    let live = procs.queue_waiter(0, &name, 1, &order, 6).await;
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    live.await.unwrap();
    let after = asked.elapsed();
    // Five timeouts when dropped one after another, about one when dropped together: a
    // bound of three leaves room for a busy machine and still fails at five.
    assert!(
        after < timeout * 3,
        "the live waiter held {after:?} after five dead waiters asked: they must cost about \
         one queue timeout ({timeout:?}) in all, not one each"
    );
    assert_eq!(*order.lock().unwrap(), vec![1]);
    assert_eq!(procs.queue(&name).await, (0, 0));
}

/// Waiters dropped at every point of their wait (queued, or with an attempt on its way)
/// leave the queue and the deadline set empty; the manager forgets them.
pub async fn dropped_waiters_leave_the_queue(subject: &dyn Subject) {
    let Some(procs) = Processes::new("dropped_waiters_leave_the_queue", subject, 1, |b| b).await
    else {
        return;
    };
    let locks = &procs.managers[0];
    let name = support::unique("fair-dropped");
    let holder = locks.fair_lock(&name).acquire().await.unwrap();
    let mut tasks = Vec::new();
    for n in 0..24u64 {
        let (locks, name) = (locks.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            let waiting = locks.fair_lock(&name).wait(WAIT).acquire();
            // Dropped after 0..5 ms: before, during or after its first attempt.
            let _ = tokio::time::timeout(Duration::from_micros(n * 200), waiting).await;
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    // The one after them all must not find anybody before it once the holder is gone.
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    support::eventually("the queue is empty", || async {
        (procs.queue(&name).await == (0, 0)).then_some(())
    })
    .await;
    let next = locks
        .fair_lock(&name)
        .try_acquire()
        .await
        .expect("nobody queues");
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
    support::eventually("the manager forgets its waiters", || async {
        let stats = locks.stats();
        (stats.waiters == 0 && stats.subscription_changes == 0 && stats.claimed_names == 0)
            .then_some(())
    })
    .await;
}

/// Reentry, a single try against the queue, and the loss signal.
pub async fn holds_reenter_and_report_loss(subject: &dyn Subject) {
    let Some(procs) = Processes::new("holds_reenter_and_report_loss", subject, 2, |b| {
        b.lease(Duration::from_millis(300))
    })
    .await
    else {
        return;
    };
    let (locks, other) = (&procs.managers[0], &procs.managers[1]);
    let name = support::unique("fair-holds");
    let guard = locks.fair_lock(&name).acquire().await.unwrap();
    let again = guard.reenter().await.unwrap();
    assert!(matches!(
        other.fair_lock(&name).try_acquire().await,
        Err(LockError::TimedOut { .. })
    ));
    assert!(matches!(
        guard.read_lock().await,
        Err(LockError::KindMismatch { .. })
    ));
    assert_eq!(again.release().await.unwrap(), Released::StillHeld);
    // Deleted behind its back: the watchdog's next renewal fires the loss signal.
    let key = locks.key(&name).unwrap();
    let freed = procs.backend().await.force_unlock(key).await.unwrap();
    assert!(freed.kind.is_some());
    tokio::time::timeout(WAIT, guard.loss().lost())
        .await
        .expect("the loss signal fires");
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
    let taken = other.fair_lock(&name).try_acquire().await.unwrap();
    assert_eq!(taken.release().await.unwrap(), Released::Unlocked);
}
