//! Fair locks through the manager: waiters of several managers (processes) are granted the
//! lock in arrival order; a live waiter keeps its place however long the holder keeps the
//! lock; a waiter that stopped asking is dropped from the head of the queue within its
//! timeout and the next goes on, without polling meanwhile; several such waiters cost one
//! timeout in all; dropped waiters leave the
//! queue; a single try never overtakes the queue; reentry and the loss signal.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fred::prelude::{KeysInterface, ListInterface, SortedSetsInterface};
use tower_lock::backend::{AcquireArgs, Backend, MemoryBackend, RedisBackend};
use tower_lock::lock::{OwnerId, Released};
use tower_lock::manager::LockManagerBuilder;
use tower_lock::{LockError, LockManager};

use crate::support;
use crate::support::suite::{backend_suite, BackendUnderTest};

const WAIT: Duration = Duration::from_secs(20);

/// Several managers on one backend: each stands for a process.
struct Processes {
    managers: Vec<LockManager>,
    memory: Option<MemoryBackend>,
    redis: Option<fred::prelude::Client>,
    url: Option<String>,
}

impl Processes {
    async fn new(
        backend: BackendUnderTest,
        count: usize,
        configure: impl Fn(LockManagerBuilder) -> LockManagerBuilder,
    ) -> Processes {
        let mut managers = Vec::new();
        match backend.url() {
            None => {
                let memory = MemoryBackend::new();
                for _ in 0..count {
                    managers.push(configure(LockManager::builder()).backend(memory.clone()));
                }
                Processes {
                    managers,
                    memory: Some(memory),
                    redis: None,
                    url: None,
                }
            }
            Some(url) => {
                for _ in 0..count {
                    managers.push(backend.manager(configure(LockManager::builder())).await);
                }
                Processes {
                    managers,
                    memory: None,
                    redis: Some(support::client(&url).await),
                    url: Some(url),
                }
            }
        }
    }

    /// (places in the queue, deadlines) of `name`'s fair lock in the backend.
    async fn queue(&self, name: &str) -> (usize, usize) {
        if let Some(memory) = &self.memory {
            let queued = memory.queued();
            return (queued, queued);
        }
        let redis = self.redis.as_ref().expect("a memory backend or Redis");
        let (queue, deadlines) = support::fair_keys(name);
        let places: usize = redis.llen(&queue).await.unwrap();
        let deadlines: usize = redis.zcard(&deadlines).await.unwrap();
        (places, deadlines)
    }

    /// A second handle on the backend, to queue a waiter that then stops asking.
    async fn backend(&self) -> Box<dyn Backend> {
        match (&self.memory, &self.url) {
            (Some(memory), _) => Box::new(memory.clone()),
            (None, Some(url)) => Box::new(RedisBackend::connect(url).await.unwrap()),
            (None, None) => unreachable!(),
        }
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
async fn arrival_order_is_acquisition_order_across_processes(backend: BackendUnderTest) {
    let procs = Processes::new(backend, 3, |b| b).await;
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
async fn live_waiters_keep_their_places_past_the_queue_timeout(backend: BackendUnderTest) {
    let timeout = Duration::from_millis(300);
    let procs = Processes::new(backend, 2, |b| {
        b.fair_queue_timeout(timeout)
            .lease(Duration::from_millis(600))
    })
    .await;
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
async fn a_dead_head_is_dropped_and_the_next_goes_on(backend: BackendUnderTest) {
    let timeout = Duration::from_millis(400);
    let procs = Processes::new(backend, 1, |b| b.fair_queue_timeout(timeout)).await;
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
                tower_lock::lock::LockKind::Fair,
                OwnerId::from_raw("ghost:1"),
                Duration::from_secs(30),
            )
            .fair_place(timeout, false),
        )
        .await
        .unwrap();
    assert!(matches!(
        queued,
        tower_lock::backend::Attempt::Queued { .. }
    ));
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
async fn dead_waiters_are_dropped_together(backend: BackendUnderTest) {
    let timeout = Duration::from_secs(1);
    let procs = Processes::new(backend, 1, |b| b.fair_queue_timeout(timeout)).await;
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
                    tower_lock::lock::LockKind::Fair,
                    OwnerId::from_raw(&format!("ghost:{n}")),
                    Duration::from_secs(30),
                )
                .fair_place(timeout, false),
            )
            .await
            .unwrap();
        assert!(matches!(
            queued,
            tower_lock::backend::Attempt::Queued { .. }
        ));
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
async fn dropped_waiters_leave_the_queue(backend: BackendUnderTest) {
    let procs = Processes::new(backend, 1, |b| b).await;
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
async fn holds_reenter_and_report_loss(backend: BackendUnderTest) {
    let procs = Processes::new(backend, 2, |b| b.lease(Duration::from_millis(300))).await;
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
    if let Some(memory) = &procs.memory {
        assert!(memory.force_unlock(&key));
    }
    if let Some(redis) = &procs.redis {
        let deleted: i64 = redis.del(key.as_str()).await.unwrap();
        assert_eq!(deleted, 1);
    }
    tokio::time::timeout(WAIT, guard.loss().lost())
        .await
        .expect("the loss signal fires");
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
    let taken = other.fair_lock(&name).try_acquire().await.unwrap();
    assert_eq!(taken.release().await.unwrap(), Released::Unlocked);
}

backend_suite!(
    [Memory, Redis, Cluster]
    arrival_order_is_acquisition_order_across_processes,
    live_waiters_keep_their_places_past_the_queue_timeout,
    a_dead_head_is_dropped_and_the_next_goes_on,
    dead_waiters_are_dropped_together,
    dropped_waiters_leave_the_queue,
    holds_reenter_and_report_loss,
);
