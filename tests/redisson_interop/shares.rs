//! Fair shares across processes: Redisson threads and tower-lock tasks of another process
//! contending for one lock each get a share of its holds; so do the tasks of two tower-lock
//! processes (managers). A release that hands the lock to a waiter of its own process must
//! not keep it from waiters of other processes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::*;
use tower_lock::LockManager;

use super::support::{self, redisson_java::Deployment, RedisServer};
use super::Sides;

const WORKERS: usize = 4;
const HOLD: Duration = Duration::from_millis(2);
const RUN: Duration = Duration::from_secs(10);
/// The most holds one worker may get for each hold of the least served one.
const MAX_SHARE_RATIO: f64 = 2.0;

/// `WORKERS` tasks of `locks` taking `name` in turn until `stop`, holding it `HOLD` and
/// INCRing `counter` inside (a value other than 1 is counted in `violations`).
fn tasks(
    locks: &LockManager,
    admin: &Client,
    name: &str,
    counter: &str,
    stop: &Arc<AtomicBool>,
    violations: &Arc<AtomicU64>,
) -> Vec<tokio::task::JoinHandle<u64>> {
    (0..WORKERS)
        .map(|_| {
            let (locks, admin, name, counter) = (
                locks.clone(),
                admin.clone(),
                name.to_owned(),
                counter.to_owned(),
            );
            let (stop, violations) = (stop.clone(), violations.clone());
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
                    tokio::time::sleep(HOLD).await;
                    let _: i64 = admin.decr(&counter).await.unwrap();
                    let _ = guard.release().await;
                    holds += 1;
                }
                holds
            })
        })
        .collect()
}

fn check_shares(what: &str, holds: &[u64]) {
    let (min, max) = (*holds.iter().min().unwrap(), *holds.iter().max().unwrap());
    let ratio = max as f64 / min.max(1) as f64;
    eprintln!("{what}: holds per worker {holds:?}, max ÷ min {ratio:.2}");
    assert!(
        ratio <= MAX_SHARE_RATIO,
        "{what}: holds per worker {holds:?}: max ÷ min {ratio:.2} > {MAX_SHARE_RATIO}"
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
    let ours = tasks(
        &sides.locks,
        &sides.admin,
        name,
        counter,
        &stop,
        &violations,
    );
    let (java_holds, java_violations) = java.await.unwrap();
    stop.store(true, Ordering::SeqCst);
    let mut holds = java_holds.clone();
    for task in ours {
        holds.push(task.await.unwrap());
    }
    assert_eq!(java_violations + violations.load(Ordering::SeqCst), 0);
    check_shares("4 Redisson threads, then 4 tower-lock tasks", &holds);
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
    let mut all = tasks(&one, &admin, name, counter, &stop, &violations);
    all.extend(tasks(&two, &admin, name, counter, &stop, &violations));
    tokio::time::sleep(RUN).await;
    stop.store(true, Ordering::SeqCst);
    let mut holds = Vec::new();
    for task in all {
        holds.push(task.await.unwrap());
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0);
    check_shares("4 tasks of one manager, then 4 of another", &holds);
}
