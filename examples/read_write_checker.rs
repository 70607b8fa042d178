//! Read-write lock checker: a mixed load of readers and writers on one name, with a witness
//! in Redis, and the pieces of the dead-writer scenario.
//!
//! ```text
//! cargo run --example read_write_checker -- <redis-url> mix <name> <tasks> <seconds> <events-file>
//! cargo run --example read_write_checker -- <redis-url> stream <name> <count> <hold-ms> [long]
//! cargo run --example read_write_checker -- <redis-url> read <name>
//! ```
//!
//! `mix`: `tasks` tasks take the lock `name` for `seconds`, 9 reads in 10 and 1 write, each
//! holding 2–5 ms and waiting up to 10 s (the default settings otherwise). A writer adds 1000
//! to the witness `<name>:witness` on entry (it must find 0: nobody inside) and a reader adds
//! 1 (it must find no writer inside). Each acquisition is written to `events-file` as
//! `<asked> <granted> <r|w>` (microseconds since the Unix epoch; `granted` is `-` for one
//! that failed; a read or a write), so that a test can merge the files of several processes and find the longest time
//! without a grant while someone waited. Prints `grants=… reads=… writes=… violations=…
//! timeouts=… errors=…` and exits 1 on any violation, time-out or error.
//!
//! `stream`: keeps `count` overlapping readers of `name` reading (`hold-ms` each) until it is
//! killed, counting each read in `<name>:reads`; with `long`, it also holds one read lock
//! for as long as it runs. Prints `reading` once it has begun.
//!
//! `read`: prints `asking`, waits up to 30 s for a read lock of `name`, prints `held` and
//! keeps it until killed.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fred::prelude::*;
use tower_lock::{LockError, LockManager};

/// What a writer adds to the witness: a reader inside sees at least this much.
const WRITER: i64 = 1000;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [url, mode, name, tasks, seconds, events] if mode == "mix" => {
            let (Ok(tasks), Ok(seconds)) = (tasks.parse::<u64>(), seconds.parse::<u64>()) else {
                eprintln!("mix: the number of tasks and the seconds are integers");
                return ExitCode::FAILURE;
            };
            mix(url, name, tasks, Duration::from_secs(seconds), events).await
        }
        [url, mode, name, count, hold_ms, long @ ..] if mode == "stream" => {
            let (Ok(count), Ok(hold_ms)) = (count.parse::<u32>(), hold_ms.parse::<u64>()) else {
                eprintln!("stream: the number of readers and the hold (ms) are integers");
                return ExitCode::FAILURE;
            };
            let long = long.first().is_some_and(|arg| arg == "long");
            stream(url, name, count, Duration::from_millis(hold_ms), long).await
        }
        [url, mode, name] if mode == "read" => {
            let locks = LockManager::redis(url).await.expect("connect to Redis");
            println!("asking");
            let _guard = match locks
                .read_lock(name)
                .wait(Duration::from_secs(30))
                .acquire()
                .await
            {
                Ok(guard) => guard,
                Err(error) => {
                    eprintln!("read: {error}");
                    return ExitCode::FAILURE;
                }
            };
            println!("held");
            std::future::pending::<()>().await;
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "usage: read_write_checker <redis-url> mix <name> <tasks> <seconds> <events-file> \
                 | <redis-url> stream <name> <count> <hold-ms> [long] | <redis-url> read <name>"
            );
            ExitCode::FAILURE
        }
    }
}

fn micros_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64)
}

async fn redis_client(url: &str) -> Client {
    let client = Builder::from_config(Config::from_url(url).expect("a Redis URL"))
        .build()
        .expect("a Redis client");
    client.init().await.expect("connect to Redis");
    client
}

#[derive(Default)]
struct Counts {
    reads: AtomicU64,
    writes: AtomicU64,
    violations: AtomicU64,
    timeouts: AtomicU64,
    errors: AtomicU64,
}

async fn mix(url: &str, name: &str, tasks: u64, run: Duration, events_file: &str) -> ExitCode {
    let locks = LockManager::redis(url).await.expect("connect to Redis");
    let witness = redis_client(url).await;
    let witness_key = format!("{name}:witness");
    let counts = Arc::new(Counts::default());
    let events = Arc::new(Mutex::new(String::new()));
    let end = Instant::now() + run;
    let workers: Vec<_> = (0..tasks)
        .map(|task| {
            let (locks, witness, key) = (locks.clone(), witness.clone(), witness_key.clone());
            let (counts, events, name) = (counts.clone(), events.clone(), name.to_owned());
            tokio::spawn(async move {
                let mut state =
                    (task + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(std::process::id());
                let mut mine = String::new();
                while Instant::now() < end {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let writes = state % 10 == 0;
                    let side = if writes { 'w' } else { 'r' };
                    let request = if writes {
                        locks.write_lock(&name)
                    } else {
                        locks.read_lock(&name)
                    };
                    let asked = micros_now();
                    let guard = match request.wait(Duration::from_secs(10)).acquire().await {
                        Ok(guard) => guard,
                        Err(error) => {
                            let _ = writeln!(mine, "{asked} - {side}");
                            let count = match error {
                                LockError::TimedOut { .. } => &counts.timeouts,
                                _ => &counts.errors,
                            };
                            count.fetch_add(1, Ordering::Relaxed);
                            eprintln!("{}: {error}", if writes { "write" } else { "read" });
                            continue;
                        }
                    };
                    let _ = writeln!(mine, "{asked} {} {side}", micros_now());
                    let (add, inside_ok): (i64, fn(i64) -> bool) = if writes {
                        (WRITER, |inside| inside == WRITER)
                    } else {
                        (1, |inside| inside < WRITER)
                    };
                    let inside: i64 = witness.incr_by(&key, add).await.expect("INCRBY");
                    if !inside_ok(inside) {
                        counts.violations.fetch_add(1, Ordering::Relaxed);
                        eprintln!("violation: the witness read {inside} on entry");
                    }
                    let hold = 2_000 + (state >> 8) % 3_000;
                    tokio::time::sleep(Duration::from_micros(hold)).await;
                    let _: i64 = witness.decr_by(&key, add).await.expect("DECRBY");
                    if let Err(error) = guard.release().await {
                        eprintln!("release: {error}");
                        counts.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    let side = if writes {
                        &counts.writes
                    } else {
                        &counts.reads
                    };
                    side.fetch_add(1, Ordering::Relaxed);
                }
                events.lock().unwrap().push_str(&mine);
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a worker");
    }
    std::fs::write(events_file, events.lock().unwrap().as_bytes()).expect("write the events");
    let load = |count: &AtomicU64| count.load(Ordering::Relaxed);
    let (reads, writes) = (load(&counts.reads), load(&counts.writes));
    let (violations, timeouts, errors) = (
        load(&counts.violations),
        load(&counts.timeouts),
        load(&counts.errors),
    );
    println!(
        "grants={} reads={reads} writes={writes} violations={violations} timeouts={timeouts} \
         errors={errors}",
        reads + writes
    );
    if violations + timeouts + errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn stream(url: &str, name: &str, count: u32, hold: Duration, long: bool) -> ExitCode {
    let locks = LockManager::redis(url).await.expect("connect to Redis");
    let counter = redis_client(url).await;
    let _long_read = if long {
        let read = locks
            .read_lock(name)
            .wait(Duration::from_secs(30))
            .acquire();
        Some(read.await.expect("the long read"))
    } else {
        None
    };
    println!("reading");
    for reader in 0..count {
        let (locks, counter, name) = (locks.clone(), counter.clone(), name.to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(hold * reader / count.max(1)).await;
            loop {
                let guard = match locks
                    .read_lock(&name)
                    .wait(Duration::from_secs(60))
                    .acquire()
                    .await
                {
                    Ok(guard) => guard,
                    Err(error) => {
                        eprintln!("reader {reader}: {error}");
                        std::process::exit(1);
                    }
                };
                let _: i64 = counter
                    .incr(format!("{name}:reads"))
                    .await
                    .expect("count the read");
                tokio::time::sleep(hold).await;
                let _ = guard.release().await;
            }
        });
    }
    std::future::pending::<()>().await;
    ExitCode::SUCCESS
}
