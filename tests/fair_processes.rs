//! Fair locks across real processes (`examples/lock_checker.rs fair`): three processes
//! started one after another get the lock in that order; a waiter SIGKILLed at the head of
//! the queue is dropped within its queue timeout and the rest proceed; ten waiters of a
//! killed process cost one queue timeout in all; a Redis restart while fair waiters wait.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fred::prelude::*;
use support::RedisServer;
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

/// A process waiting for one turn of the fair lock `name`.
fn fair_turn(url: &str, name: &str, queue_timeout_ms: &str, mark: &str) -> Child {
    fair_turns(url, name, queue_timeout_ms, mark, 1)
}

/// A process with `waiters` fair waiters of `name`, each waiting for one turn.
fn fair_turns(url: &str, name: &str, queue_timeout_ms: &str, mark: &str, waiters: usize) -> Child {
    Command::new(support::example("lock_checker"))
        .args([
            url,
            "fair",
            name,
            queue_timeout_ms,
            mark,
            &waiters.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start lock_checker (cargo build --examples)")
}

async fn finished(child: Child) -> String {
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "a fair process failed: {stdout}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_get_the_lock_in_arrival_order() {
    let server = RedisServer::start();
    let url = server.url();
    let redis = support::client(&url).await;
    let locks = LockManager::redis(&url).await.unwrap();
    let name = "fair:order";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let mut processes = Vec::new();
    for (n, mark) in ["first", "second", "third"].into_iter().enumerate() {
        processes.push(fair_turn(&url, name, "30000", mark));
        support::fair_queued(&redis, name, n + 1).await;
    }
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    for process in processes {
        assert_eq!(finished(process).await.trim(), "done");
    }
    let order: Vec<String> = redis.lrange(format!("{name}:order"), 0, -1).await.unwrap();
    assert_eq!(order, ["first", "second", "third"]);
    support::fair_queued(&redis, name, 0).await;
}

/// The head of the queue is SIGKILLed while it waits: nobody tells the queue. Its place
/// runs out one queue timeout (1 s) after its last renewal, and the next process, then a
/// waiter here, get the lock, well within their waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_head_is_dropped_and_the_rest_proceed() {
    let server = RedisServer::start();
    let url = server.url();
    let redis = support::client(&url).await;
    let timeout = Duration::from_secs(1);
    let locks = LockManager::builder()
        .fair_queue_timeout(timeout)
        .redis(&url)
        .await
        .unwrap();
    let name = "fair:killed-head";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let mut head = fair_turn(&url, name, "1000", "killed");
    support::fair_queued(&redis, name, 1).await;
    let next = fair_turn(&url, name, "1000", "next");
    support::fair_queued(&redis, name, 2).await;
    let here = {
        let locks = locks.clone();
        tokio::spawn(async move {
            locks
                .fair_lock(name)
                .wait(Duration::from_secs(30))
                .acquire()
                .await
        })
    };
    support::fair_queued(&redis, name, 3).await;
    head.kill().unwrap(); // SIGKILL while it heads the queue
    let _ = head.wait();
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    assert_eq!(finished(next).await.trim(), "done");
    let guard = here.await.unwrap().expect("the waiter here follows");
    let order: Vec<String> = redis.lrange(format!("{name}:order"), 0, -1).await.unwrap();
    assert_eq!(order, ["next"], "the killed head never held it");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    support::fair_queued(&redis, name, 0).await;
}

/// Ten waiters of a process SIGKILLed while they queue are ahead of a live one: nobody
/// tells the queue. Their places all run out one queue timeout after their last renewal,
/// and the live waiter's attempt drops them together, moving its place up by one timeout
/// for each: the dead cost one queue timeout in all. (Dropped one after another, as
/// Redisson does and this did, they cost one timeout each: about ten seconds here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_dead_waiters_cost_one_queue_timeout_in_all() {
    let server = RedisServer::start();
    let url = server.url();
    let redis = support::client(&url).await;
    let timeout = Duration::from_secs(1);
    let locks = LockManager::builder()
        .fair_queue_timeout(timeout)
        .redis(&url)
        .await
        .unwrap();
    let name = "fair:ten-dead";
    let holder = locks.fair_lock(name).acquire().await.unwrap();
    let mut dying = fair_turns(&url, name, "1000", "dead", 10);
    support::fair_queued(&redis, name, 10).await;
    let live = {
        let locks = locks.clone();
        tokio::spawn(async move {
            let guard = locks
                .fair_lock(name)
                .wait(Duration::from_secs(30))
                .acquire()
                .await;
            (guard, std::time::Instant::now())
        })
    };
    let places = support::fair_queued(&redis, name, 11).await;
    dying.kill().unwrap(); // SIGKILL: its ten waiters never leave the queue
    let killed = std::time::Instant::now();
    let _ = dying.wait();
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    let (guard, held_at) = live.await.unwrap();
    let guard = guard.expect("the live waiter gets the lock");
    let after = held_at.duration_since(killed);
    // Ten timeouts when dropped one after another; about one when dropped together (the
    // bound leaves room for a busy machine).
    assert!(
        after < timeout * 4,
        "the live waiter held {after:?} after the kill: the ten dead places must cost about \
         one queue timeout ({timeout:?}) in all, not one each (queue was {places:?})"
    );
    let order: Vec<String> = redis.lrange(format!("{name}:order"), 0, -1).await.unwrap();
    assert!(order.is_empty(), "a killed waiter held the lock: {order:?}");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    support::fair_queued(&redis, name, 0).await;
}

/// Redis restarts (without persistence) while fair waiters wait: the queue is gone; the
/// waiters take places again (in the order they look again) and all get the lock, one at a
/// time, with nothing left in the queue afterwards. A waiter whose attempt was on its way as
/// Redis went away waits for its answer (re-sent once Redis is back) or tries again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_while_fair_waiters_wait() {
    let mut server = RedisServer::start();
    let url = server.url();
    let lease = Duration::from_millis(600);
    let holder_side = LockManager::builder()
        .lease(lease)
        .redis(&url)
        .await
        .unwrap();
    let waiter_side = LockManager::builder()
        .lease(lease)
        .redis(&url)
        .await
        .unwrap();
    let name = "fair:restart";
    let holder = holder_side.fair_lock(name).acquire().await.unwrap();
    let inside = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let waiters: Vec<_> = (0..6)
        .map(|_| {
            let (locks, inside) = (waiter_side.clone(), inside.clone());
            tokio::spawn(async move {
                let guard = locks
                    .fair_lock(name)
                    .wait(Duration::from_secs(30))
                    .acquire()
                    .await?;
                let overlap = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::task::yield_now().await;
                inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                let _ = guard.release().await.map_err(LockError::Unavailable)?;
                Ok::<_, LockError>(overlap)
            })
        })
        .collect();
    let redis = support::client(&url).await;
    support::fair_queued(&redis, name, 6).await;
    server.stop();
    server.resume();
    tokio::time::timeout(Duration::from_secs(10), holder.lost())
        .await
        .expect("the holder learns that its lock is gone");
    let mut acquired = 0;
    for waiter in waiters {
        match waiter.await.unwrap() {
            Ok(overlap) => {
                assert_eq!(overlap, 0, "two holders at once");
                acquired += 1;
            }
            Err(LockError::Unavailable(error)) => {
                assert!(error.to_string().contains("unreachable"), "{error}")
            }
            Err(other) => panic!("a fair waiter failed after the restart: {other}"),
        }
    }
    assert!(acquired > 0, "fair waiters acquire after the restart");
    assert_eq!(acquired, 6, "every fair waiter rides the restart out");
    assert_eq!(holder.release().await.unwrap(), Released::NotHeld);
    let redis = support::client(&url).await;
    support::fair_queued(&redis, name, 0).await;
    support::nothing_left_behind(&waiter_side).await;
}
