//! Exclusion checker on PostgreSQL: tasks of this process take one lock over and over and
//! check, with a witness row updated through the application's own pool, that no two
//! holders — of this process or another — are ever inside at once.
//!
//! ```text
//! cargo run --features postgres --example postgres_checker -- <database-url> check <name> <tasks> <seconds>
//! cargo run --features postgres --example postgres_checker -- <database-url> hold <name>   # hold until killed
//! ```
//! `check` prints `acquisitions=… violations=… errors=… statements=…` and exits 1 on any
//! violation or error; each hold lasts 0–3 ms and every wait up to 30 s. `hold` prints
//! `held` once it holds the lock, then sleeps (for a test to kill it).

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgPool, PgPoolOptions};
use tower_lock::backend::PostgresBackend;
use tower_lock::LockManager;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, command, rest) = match args.as_slice() {
        [url, command, rest @ ..] => (url, command.as_str(), rest),
        _ => return usage(),
    };
    let pool = match PgPoolOptions::new().max_connections(8).connect(url).await {
        Ok(pool) => pool,
        Err(error) => {
            eprintln!("cannot connect to PostgreSQL at {url}: {error}");
            return ExitCode::FAILURE;
        }
    };
    let backend = PostgresBackend::new(&pool);
    let locks = LockManager::builder().backend(backend.clone());
    match (command, rest) {
        ("hold", [name]) => {
            let _guard = locks
                .lock(name)
                .wait(Duration::from_secs(30))
                .acquire()
                .await
                .expect("acquire");
            println!("held");
            std::future::pending::<()>().await;
            ExitCode::SUCCESS
        }
        ("check", [name, tasks, seconds]) => {
            let (Ok(tasks), Ok(seconds)) = (tasks.parse::<usize>(), seconds.parse::<f64>()) else {
                return usage();
            };
            check(&pool, &locks, &backend, name, tasks, seconds).await
        }
        _ => usage(),
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: postgres_checker <database-url> check <name> <tasks> <seconds>\n       \
         postgres_checker <database-url> hold <name>"
    );
    ExitCode::FAILURE
}

#[derive(Default)]
struct Counts {
    acquisitions: AtomicU64,
    violations: AtomicU64,
    errors: AtomicU64,
}

async fn check(
    pool: &PgPool,
    locks: &LockManager,
    backend: &PostgresBackend,
    name: &str,
    tasks: usize,
    seconds: f64,
) -> ExitCode {
    let made = sqlx::query(
        "CREATE TABLE IF NOT EXISTS checker_witness (name text PRIMARY KEY, inside int NOT NULL)",
    )
    .execute(pool)
    .await;
    if let Err(error) = made {
        // Another process made it at the same moment.
        eprintln!("note: {error}");
    }
    let counts = Arc::new(Counts::default());
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let workers: Vec<_> = (0..tasks)
        .map(|task| {
            let (pool, locks, counts, name) =
                (pool.clone(), locks.clone(), counts.clone(), name.to_owned());
            tokio::spawn(async move {
                let mut n = task as u64;
                while Instant::now() < until {
                    let guard = match locks
                        .lock(&name)
                        .wait(Duration::from_secs(30))
                        .acquire()
                        .await
                    {
                        Ok(guard) => guard,
                        Err(error) => {
                            eprintln!("acquire: {error}");
                            counts.errors.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    };
                    let inside: Result<i32, _> = sqlx::query_scalar(
                        "INSERT INTO checker_witness AS w (name, inside) VALUES ($1, 1) \
                         ON CONFLICT (name) DO UPDATE SET inside = w.inside + 1 RETURNING inside",
                    )
                    .bind(&name)
                    .fetch_one(&pool)
                    .await;
                    match inside {
                        Ok(1) => {}
                        Ok(other) => {
                            eprintln!("{other} holders inside at once");
                            counts.violations.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) => {
                            eprintln!("witness: {error}");
                            counts.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    n = n
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    tokio::time::sleep(Duration::from_micros((n >> 33) % 3000)).await;
                    let left = sqlx::query(
                        "UPDATE checker_witness SET inside = inside - 1 WHERE name = $1",
                    )
                    .bind(&name)
                    .execute(&pool)
                    .await;
                    if let Err(error) = left {
                        eprintln!("witness: {error}");
                        counts.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    if let Err(error) = guard.release().await {
                        eprintln!("release: {error}");
                        counts.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    counts.acquisitions.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for worker in workers {
        let _ = worker.await;
    }
    let (acquisitions, violations, errors) = (
        counts.acquisitions.load(Ordering::Relaxed),
        counts.violations.load(Ordering::Relaxed),
        counts.errors.load(Ordering::Relaxed),
    );
    println!(
        "acquisitions={acquisitions} violations={violations} errors={errors} statements={} sessions={}",
        backend.statements_sent(),
        backend.open_sessions()
    );
    if violations == 0 && errors == 0 && acquisitions > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
