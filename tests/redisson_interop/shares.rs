//! Shares across processes: Redisson threads and tower-lock tasks of another process
//! contending for one lock each get holds of it; so do the tasks of two tower-lock processes
//! (managers). A release that hands the lock to a waiter of its own process must not keep it
//! from waiters of other processes: runs of hand-overs stop at the hand-over limit.
//!
//! What is asserted cannot depend on how the machine schedules the two sides: no overlap,
//! every worker served, no run of hand-overs past the limit. How evenly the holds are shared
//! over the run is a figure, printed here and measured by the benchmark (S2b).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fred::prelude::*;
use tower_lock::lock::Released;
use tower_lock::manager::DEFAULT_HAND_OVER_LIMIT;
use tower_lock::LockManager;

use super::support::{self, redisson_java::Deployment, RedisServer};
use super::Sides;

const WORKERS: usize = 4;
const HOLD: Duration = Duration::from_millis(2);
const RUN: Duration = Duration::from_secs(10);

/// The tower-lock tasks' holds: for each, its place in the order of all holds (counted
/// inside the lock) and whether its release handed the lock straight to the next one.
type Handed = Arc<Mutex<Vec<(i64, bool)>>>;

/// `WORKERS` tasks of `locks` taking `name` in turn until `stop`, holding it `HOLD` and
/// INCRing `counter` inside (a value other than 1 is counted in `violations`); each hold
/// is numbered by `<counter>:holds` and noted in `handed`.
fn tasks(
    locks: &LockManager,
    admin: &Client,
    name: &str,
    counter: &str,
    stop: &Arc<AtomicBool>,
    violations: &Arc<AtomicU64>,
    handed: &Handed,
) -> Vec<tokio::task::JoinHandle<u64>> {
    (0..WORKERS)
        .map(|_| {
            let (locks, admin, name, counter) = (
                locks.clone(),
                admin.clone(),
                name.to_owned(),
                counter.to_owned(),
            );
            let (stop, violations, handed) = (stop.clone(), violations.clone(), handed.clone());
            tokio::spawn(async move {
                let mut holds = 0;
                while !stop.load(Ordering::SeqCst) {
                    let guard = locks
                        .lock(&name)
                        .wait(Duration::from_secs(30))
                        .acquire()
                        .await
                        .expect("a task gets the lock");
                    let inside: i64 = admin.incr(&counter).await.unwrap();
                    if inside != 1 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    let place: i64 = admin.incr(format!("{counter}:holds")).await.unwrap();
                    tokio::time::sleep(HOLD).await;
                    let _: i64 = admin.decr(&counter).await.unwrap();
                    let released = guard.release().await;
                    handed
                        .lock()
                        .unwrap()
                        .push((place, matches!(released, Ok(Released::HandedOver))));
                    holds += 1;
                }
                holds
            })
        })
        .collect()
}

/// Every worker was served, and no run of hand-overs went past the limit (the holds in
/// order, whoever else waited); the spread of holds is printed, not judged.
fn check_shares(what: &str, holds: &[u64], handed: &Handed) {
    let (min, max) = (*holds.iter().min().unwrap(), *holds.iter().max().unwrap());
    eprintln!(
        "{what}: holds per worker {holds:?}, max ÷ min {:.2} (a figure, not a limit)",
        max as f64 / min.max(1) as f64
    );
    assert!(min > 0, "{what}: a worker was never served: {holds:?}");
    let mut handed = handed.lock().unwrap().clone();
    handed.sort_unstable();
    let (mut run, mut longest) = (0u32, 0u32);
    for window in handed.windows(2) {
        let ((place, handed_over), (next, _)) = (window[0], window[1]);
        // A hand-over gives the lock to the very next hold, one of ours.
        if handed_over {
            assert_eq!(next, place + 1, "{what}: a hand-over went to a later hold");
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    eprintln!("{what}: longest run of hand-overs {longest}");
    assert!(
        longest <= DEFAULT_HAND_OVER_LIMIT,
        "{what}: {longest} hand-overs in a row, over the limit of {DEFAULT_HAND_OVER_LIMIT}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_threads_and_tower_lock_tasks_share_the_lock() {
    let server = RedisServer::start();
    let url = server.url();
    let sides = Sides::connect(
        &url,
        Deployment::Single(url.clone()),
        None,
        LockManager::builder(),
    )
    .await;
    let name = "shares:mixed";
    let counter = "shares:mixed:inside";
    let (stop, violations) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let java = {
        let java = sides.java.clone();
        tokio::spawn(async move {
            java.contend("lock", name, WORKERS, HOLD, RUN, counter)
                .await
        })
    };
    let handed = Handed::default();
    let ours = tasks(
        &sides.locks,
        &sides.admin,
        name,
        counter,
        &stop,
        &violations,
        &handed,
    );
    let (java_holds, java_violations) = java.await.unwrap();
    stop.store(true, Ordering::SeqCst);
    let mut holds = java_holds.clone();
    for task in ours {
        holds.push(task.await.unwrap());
    }
    assert_eq!(java_violations + violations.load(Ordering::SeqCst), 0);
    check_shares(
        "4 Redisson threads, then 4 tower-lock tasks",
        &holds,
        &handed,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_two_tower_lock_processes_share_the_lock() {
    let server = RedisServer::start();
    let url = server.url();
    let admin = support::client(&url).await;
    let (one, two) = (
        LockManager::redis(&url).await.unwrap(),
        LockManager::redis(&url).await.unwrap(),
    );
    let name = "shares:tower";
    let counter = "shares:tower:inside";
    let (stop, violations) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let handed = Handed::default();
    let mut all = tasks(&one, &admin, name, counter, &stop, &violations, &handed);
    all.extend(tasks(
        &two,
        &admin,
        name,
        counter,
        &stop,
        &violations,
        &handed,
    ));
    tokio::time::sleep(RUN).await;
    stop.store(true, Ordering::SeqCst);
    let mut holds = Vec::new();
    for task in all {
        holds.push(task.await.unwrap());
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0);
    check_shares("4 tasks of one manager, then 4 of another", &holds, &handed);
}
