//! Exclusion checker: runs tasks that take locks on a few names and checks, with a witness
//! counter in Redis, that no two holders of a name are ever inside at once.
//!
//! ```text
//! cargo run --example lock_checker -- <redis-url> <names> <tasks> <seconds> <lease-ms> [prefix]
//! cargo run --example lock_checker -- <redis-url> hold <name> <lease-ms> [plain|read|write]  # hold until killed
//! cargo run --example lock_checker -- <redis-url> fair <name> <queue-timeout-ms> <mark> [waiters]  # fair turns
//! ```
//! Each holder INCRs `<prefix>witness:<name>` on entry (it must return 1) and DECRs it on
//! exit; holds last 0–5 ms. Prints `acquisitions=… violations=… timeouts=… max_wait_ms=…`
//! and exits 1 on any violation or error. The `hold` form prints `held` once it holds the
//! lock and then sleeps (to be killed by a test). The `fair` form starts `waiters` (1 by default) fair
//! waiters that each wait (up to 30 s) for the fair lock, append `mark` to the Redis list
//! `<name>:order` while they hold it and release it; it prints `done` once all have. (Streams of
//! readers: `examples/read_write_checker.rs`.)

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fred::prelude::*;
use tower_lock::{LockError, LockManager};

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [url, hold, name, lease, kind @ ..] if hold == "hold" => {
            let locks = manager(url, lease).await;
            let request = match kind.first().map(String::as_str) {
                Some("read") => locks.read_lock(name),
                Some("write") => locks.write_lock(name),
                _ => locks.lock(name),
            };
            let _guard = request
                .wait(Duration::from_secs(30))
                .acquire()
                .await
                .expect("acquire");
            println!("held");
            std::future::pending::<()>().await;
            ExitCode::SUCCESS
        }
        [url, fair, name, queue_timeout, mark, waiters @ ..] if fair == "fair" => {
            let waiters = match waiters.first().map(|n| n.parse::<usize>()) {
                None => 1,
                Some(Ok(n)) if n > 0 => n,
                Some(_) => {
                    eprintln!("the number of fair waiters must be a positive integer");
                    return ExitCode::FAILURE;
                }
            };
            fair_turns(url, name, queue_timeout, mark, waiters).await
        }
        [url, names, tasks, seconds, lease, rest @ ..] => {
            let prefix = rest.first().cloned().unwrap_or_default();
            check(
                url,
                names.parse().unwrap(),
                tasks.parse().unwrap(),
                seconds.parse().unwrap(),
                lease,
                &prefix,
            )
            .await
        }
        _ => {
            eprintln!("usage: lock_checker <redis-url> <names> <tasks> <seconds> <lease-ms> [prefix] | <redis-url> hold <name> <lease-ms> [plain|read|write] | <redis-url> fair <name> <queue-timeout-ms> <mark> [waiters]");
            ExitCode::FAILURE
        }
    }
}

/// `waiters` turns of the fair lock `name`, taken by as many waiters of one manager that
/// queue at once, each recorded in the list `<name>:order`.
async fn fair_turns(
    url: &str,
    name: &str,
    queue_timeout_ms: &str,
    mark: &str,
    waiters: usize,
) -> ExitCode {
    let timeout = Duration::from_millis(queue_timeout_ms.parse().expect("queue timeout in ms"));
    let locks = LockManager::builder()
        .fair_queue_timeout(timeout)
        .redis(url)
        .await
        .expect("connect to Redis");
    let recorder = Builder::from_config(Config::from_url(url).unwrap())
        .build()
        .unwrap();
    recorder.init().await.expect("connect to Redis");
    let turns: Vec<_> = (0..waiters)
        .map(|_| {
            let (locks, recorder) = (locks.clone(), recorder.clone());
            let (name, mark) = (name.to_owned(), mark.to_owned());
            tokio::spawn(async move {
                let guard = locks
                    .fair_lock(&name)
                    .wait(Duration::from_secs(30))
                    .acquire()
                    .await
                    .map_err(|e| format!("{mark}: {e}"))?;
                let _: i64 = recorder
                    .rpush(format!("{name}:order"), &mark)
                    .await
                    .map_err(|e| format!("{mark}: record the turn: {e}"))?;
                let _ = guard
                    .release()
                    .await
                    .map_err(|e| format!("{mark}: release: {e}"))?;
                Ok::<_, String>(())
            })
        })
        .collect();
    for turn in turns {
        if let Err(error) = turn.await.expect("a fair turn") {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    }
    println!("done");
    ExitCode::SUCCESS
}

async fn manager(url: &str, lease_ms: &str) -> LockManager {
    LockManager::builder()
        .lease(Duration::from_millis(
            lease_ms.parse().expect("lease in ms"),
        ))
        .redis(url)
        .await
        .expect("connect to Redis")
}

async fn check(
    url: &str,
    names: u64,
    tasks: u64,
    seconds: u64,
    lease_ms: &str,
    prefix: &str,
) -> ExitCode {
    let locks = manager(url, lease_ms).await;
    let witness = Builder::from_config(Config::from_url(url).unwrap())
        .build()
        .unwrap();
    witness.init().await.expect("connect to Redis");
    let end = Instant::now() + Duration::from_secs(seconds);
    let (acquisitions, violations, timeouts, errors, max_wait_us) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let workers: Vec<_> = (0..tasks)
        .map(|task| {
            let (locks, witness, prefix) = (locks.clone(), witness.clone(), prefix.to_owned());
            let (acquisitions, violations, timeouts, errors, max_wait_us) = (
                acquisitions.clone(),
                violations.clone(),
                timeouts.clone(),
                errors.clone(),
                max_wait_us.clone(),
            );
            tokio::spawn(async move {
                let mut state =
                    (task + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(std::process::id());
                while Instant::now() < end {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let name = format!("{prefix}checker:{}", state % names);
                    let asked = Instant::now();
                    match locks
                        .lock(&name)
                        .wait(Duration::from_secs(30))
                        .acquire()
                        .await
                    {
                        Ok(guard) => {
                            max_wait_us
                                .fetch_max(asked.elapsed().as_micros() as u64, Ordering::Relaxed);
                            acquisitions.fetch_add(1, Ordering::Relaxed);
                            let key = format!("{prefix}witness:{}", state % names);
                            let inside: i64 = witness.incr(&key).await.expect("INCR");
                            if inside != 1 {
                                violations.fetch_add(1, Ordering::Relaxed);
                            }
                            tokio::time::sleep(Duration::from_micros((state >> 8) % 5_000)).await;
                            let _: i64 = witness.decr(&key).await.expect("DECR");
                            if guard.release().await.is_err() {
                                errors.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(LockError::TimedOut { .. }) => {
                            timeouts.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) => {
                            eprintln!("error: {error}");
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("worker");
    }
    let (v, e) = (
        violations.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
    );
    println!(
        "acquisitions={} violations={v} timeouts={} errors={e} max_wait_ms={}",
        acquisitions.load(Ordering::Relaxed),
        timeouts.load(Ordering::Relaxed),
        max_wait_us.load(Ordering::Relaxed) / 1000
    );
    if v == 0 && e == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
