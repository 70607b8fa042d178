//! Semaphore checker: workers that take permits of one semaphore and check, with a witness
//! counter in Redis, that never more than the limit are inside at once.
//!
//! ```text
//! cargo run --example semaphore_checker -- <redis-url> workers <name> <limit> <workers> <rounds> <hold-ms>
//! cargo run --example semaphore_checker -- <redis-url> hold <name> <limit> <permits> <lease-ms>  # hold until killed
//! ```
//! A worker INCRs `<name>:inside` once it holds its permit (the answer must not exceed the
//! limit), sleeps `hold-ms`, DECRs it and releases, `rounds` times; the `workers` form
//! prints `done acquisitions=… max_inside=… violations=… min_per_worker=… max_per_worker=…`
//! and exits 1 on any violation or error. The `hold` form takes `permits` permits, one
//! guard each, prints `held` and sleeps (to be killed by a test).

use std::process::ExitCode;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::prelude::*;
use tower_lock::LockManager;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |text: &String| text.parse::<u64>().ok();
    match args.as_slice() {
        [url, form, name, limit, workers, rounds, hold_ms] if form == "workers" => {
            let (Some(limit), Some(workers), Some(rounds), Some(hold_ms)) = (
                number(limit),
                number(workers),
                number(rounds),
                number(hold_ms),
            ) else {
                eprintln!("workers: the limit, workers, rounds and hold (ms) are integers");
                return ExitCode::FAILURE;
            };
            let hold = Duration::from_millis(hold_ms);
            run_workers(url, name, limit as u32, workers, rounds, hold).await
        }
        [url, form, name, limit, permits, lease_ms] if form == "hold" => {
            let (Some(limit), Some(permits), Some(lease_ms)) =
                (number(limit), number(permits), number(lease_ms))
            else {
                eprintln!("hold: the limit, permits and lease (ms) are integers");
                return ExitCode::FAILURE;
            };
            let locks = LockManager::builder()
                .lease(Duration::from_millis(lease_ms))
                .redis(url)
                .await
                .expect("connect to Redis");
            let mut guards = Vec::new();
            for _ in 0..permits {
                let guard = locks
                    .semaphore(name, limit as u32)
                    .wait(Duration::from_secs(30))
                    .acquire()
                    .await
                    .expect("acquire a permit");
                guards.push(guard);
            }
            println!("held");
            std::future::pending::<()>().await;
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "usage: semaphore_checker <redis-url> workers <name> <limit> <workers> <rounds> <hold-ms> \
                 | <redis-url> hold <name> <limit> <permits> <lease-ms>"
            );
            ExitCode::FAILURE
        }
    }
}

async fn run_workers(
    url: &str,
    name: &str,
    limit: u32,
    workers: u64,
    rounds: u64,
    hold: Duration,
) -> ExitCode {
    let locks = LockManager::redis(url).await.expect("connect to Redis");
    let witness = Builder::from_config(Config::from_url(url).expect("a Redis URL"))
        .build()
        .expect("a Redis client");
    witness.init().await.expect("connect to Redis");
    let max_inside = Arc::new(AtomicI64::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let inside_key = format!("{name}:inside");
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (locks, witness, name, inside_key) = (
            locks.clone(),
            witness.clone(),
            name.to_owned(),
            inside_key.clone(),
        );
        let (max_inside, violations) = (max_inside.clone(), violations.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = 0u64;
            for _ in 0..rounds {
                let guard = match locks
                    .semaphore(&name, limit)
                    .wait(Duration::from_secs(60))
                    .acquire()
                    .await
                {
                    Ok(guard) => guard,
                    Err(error) => return Err(format!("acquire: {error}")),
                };
                let inside: i64 = witness.incr(&inside_key).await.map_err(|e| e.to_string())?;
                max_inside.fetch_max(inside, Ordering::SeqCst);
                if inside > i64::from(limit) {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(hold).await;
                let _: i64 = witness.decr(&inside_key).await.map_err(|e| e.to_string())?;
                if let Err(error) = guard.release().await {
                    return Err(format!("release: {error}"));
                }
                done += 1;
            }
            Ok(done)
        }));
    }
    let mut per_worker = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok(done)) => per_worker.push(done),
            Ok(Err(error)) => {
                eprintln!("a worker failed: {error}");
                return ExitCode::FAILURE;
            }
            Err(error) => {
                eprintln!("a worker panicked: {error}");
                return ExitCode::FAILURE;
            }
        }
    }
    let violations = violations.load(Ordering::SeqCst);
    println!(
        "done acquisitions={} max_inside={} violations={violations} min_per_worker={} max_per_worker={}",
        per_worker.iter().sum::<u64>(),
        max_inside.load(Ordering::SeqCst),
        per_worker.iter().min().unwrap_or(&0),
        per_worker.iter().max().unwrap_or(&0),
    );
    if violations > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
