//! Other processes get their turn: a busy process whose tasks queue again at once does
//! not keep the lock from a waiter of another process (a second manager, or a Redisson
//! client waiting as Redisson does: subscribed to the unlock channel, trying on each
//! message).

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::*;
use support::redisson_scripts::RedissonScripts;
use support::RedisServer;
use tower_lock::manager::DEFAULT_HAND_OVER_LIMIT;
use tower_lock::LockManager;

const TASKS: usize = 30;
const HOLD: Duration = Duration::from_millis(20);
const ROUNDS: usize = 5;

/// `TASKS` tasks of `locks` taking `name` in turn, holding it `HOLD` each time and asking
/// again at once; the count of their acquisitions.
fn busy_process(locks: &LockManager, name: &str, stop: &Arc<AtomicBool>) -> Arc<AtomicUsize> {
    let count = Arc::new(AtomicUsize::new(0));
    for _ in 0..TASKS {
        let (locks, name, stop, count) =
            (locks.clone(), name.to_owned(), stop.clone(), count.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let guard = locks
                    .lock(&name)
                    .wait(Duration::from_secs(60))
                    .acquire()
                    .await
                    .unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(HOLD).await;
                let _ = guard.release().await;
            }
        });
    }
    count
}

/// How many acquisitions the busy process may make while another process waits: a run of
/// hand-overs within the process, then the release that frees the lock, and as much again
/// if the other waiter's first chance slipped by (a loaded machine). Without letting the
/// other process go first it made hundreds.
const BOUND: usize = 3 * (DEFAULT_HAND_OVER_LIMIT as usize + 1);

async fn until_busy(count: &AtomicUsize) {
    support::eventually("the busy process runs", || async {
        (count.load(Ordering::SeqCst) > TASKS).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_of_another_manager_gets_its_turn() {
    let server = RedisServer::start();
    let busy = LockManager::redis(&server.url()).await.unwrap();
    let other = LockManager::redis(&server.url()).await.unwrap();
    let name = support::unique("fair");
    let stop = Arc::new(AtomicBool::new(false));
    let count = busy_process(&busy, &name, &stop);
    until_busy(&count).await;
    let mut meanwhile = Vec::new();
    for _ in 0..ROUNDS {
        let before = count.load(Ordering::SeqCst);
        let started = tokio::time::Instant::now();
        let guard = other
            .lock(&name)
            .wait(Duration::from_secs(30))
            .acquire()
            .await
            .expect("the other process gets the lock");
        meanwhile.push((count.load(Ordering::SeqCst) - before, started.elapsed()));
        tokio::time::sleep(HOLD).await;
        let _ = guard.release().await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    println!("busy acquisitions and time while another manager waited: {meanwhile:?}");
    for (acquisitions, _) in &meanwhile {
        assert!(*acquisitions <= BOUND, "{meanwhile:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_waiter_gets_its_turn() {
    let server = RedisServer::start();
    let busy = LockManager::redis(&server.url()).await.unwrap();
    let redisson = RedissonScripts::new(support::client(&server.url()).await);
    let subscriber = support::subscriber(&server.url()).await;
    let name = support::unique("fair-redisson");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let stop = Arc::new(AtomicBool::new(false));
    let count = busy_process(&busy, &name, &stop);
    until_busy(&count).await;
    let mut meanwhile = Vec::new();
    for round in 0..ROUNDS {
        let before = count.load(Ordering::SeqCst);
        let started = tokio::time::Instant::now();
        // Redisson's wait: subscribe, try; then try again on every unlock message (or
        // when the holder's lease as last reported ends).
        let mut messages = subscriber.message_rx();
        subscriber.subscribe(&channel).await.unwrap();
        loop {
            match redisson.try_lock(&name, 30_000).await {
                None => break,
                Some(pttl) => {
                    let pttl = Duration::from_millis(pttl.max(1) as u64);
                    let _ = tokio::time::timeout(pttl, messages.recv()).await;
                }
            }
        }
        subscriber.unsubscribe(&channel).await.unwrap();
        meanwhile.push((count.load(Ordering::SeqCst) - before, started.elapsed()));
        tokio::time::sleep(HOLD).await;
        assert_eq!(
            redisson.unlock(&name, &format!("round-{round}")).await,
            Some(1)
        );
    }
    stop.store(true, Ordering::SeqCst);
    println!("busy acquisitions and time while a Redisson client waited: {meanwhile:?}");
    for (acquisitions, _) in &meanwhile {
        assert!(*acquisitions <= BOUND, "{meanwhile:?}");
    }
}
