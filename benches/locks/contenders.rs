//! The locks under test: tower-lock (Redis, PostgreSQL or memory), the common polling lock
//! (SET NX PX, retry every N ms, compare-and-delete release), and PostgreSQL's advisory
//! locks on a connection per worker (polling `pg_try_advisory_lock`, or waiting in
//! `pg_advisory_lock` as DistributedLock does), driven by the same workload.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fred::prelude::*;
use fred::types::{Expiration, SetOptions};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, Postgres};
use tower_lock::backend::AdvisoryKey;
use tower_lock::lock::LockGuard;
use tower_lock::LockManager;

use crate::stats::Span;

const POLL_RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

#[derive(Clone)]
pub enum Contender {
    TowerLock(LockManager),
    /// tower-lock's fair lock.
    TowerFair(LockManager),
    /// A permit of tower-lock's semaphore of this limit.
    TowerSemaphore(LockManager, u32),
    Polling {
        client: Client,
        every: Duration,
    },
    /// PostgreSQL advisory locks without tower-lock, on a connection of the pool per
    /// worker: polling every `every`, or (`None`) waiting in the server's queue.
    PgAdvisory {
        pool: PgPool,
        every: Option<Duration>,
    },
}

pub enum Holding {
    Tower(LockGuard),
    Pg {
        conn: PoolConnection<Postgres>,
        key: i64,
    },
    Polling {
        client: Client,
        key: String,
        token: String,
    },
}

static TOKENS: AtomicU64 = AtomicU64::new(0);

impl Contender {
    pub async fn acquire(&self, name: &str) -> Holding {
        match self {
            Contender::TowerLock(locks) | Contender::TowerFair(locks) => {
                let request = match self {
                    Contender::TowerFair(_) => locks.fair_lock(name),
                    _ => locks.lock(name),
                };
                Holding::Tower(
                    request
                        .wait(Duration::from_secs(600))
                        .acquire()
                        .await
                        .expect("tower-lock acquisition"),
                )
            }
            Contender::TowerSemaphore(locks, limit) => Holding::Tower(
                locks
                    .semaphore(name, *limit)
                    .wait(Duration::from_secs(600))
                    .acquire()
                    .await
                    .expect("tower-lock semaphore acquisition"),
            ),
            Contender::PgAdvisory { pool, every } => {
                let key = match AdvisoryKey::from_name(name) {
                    AdvisoryKey::Single(key) => key,
                    AdvisoryKey::Pair(high, low) => (i64::from(high) << 32) | i64::from(low as u32),
                };
                let mut conn = pool.acquire().await.expect("a connection");
                match every {
                    None => {
                        sqlx::query("SELECT pg_advisory_lock($1)")
                            .bind(key)
                            .execute(&mut *conn)
                            .await
                            .expect("pg_advisory_lock");
                    }
                    Some(every) => loop {
                        let took: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                            .bind(key)
                            .fetch_one(&mut *conn)
                            .await
                            .expect("pg_try_advisory_lock");
                        if took {
                            break;
                        }
                        tokio::time::sleep(*every).await;
                    },
                }
                Holding::Pg { conn, key }
            }
            Contender::Polling { client, every } => {
                let token = format!(
                    "{}:{}",
                    std::process::id(),
                    TOKENS.fetch_add(1, Ordering::Relaxed)
                );
                loop {
                    let set: Option<String> = client
                        .set(
                            name,
                            token.as_str(),
                            Some(Expiration::PX(30_000)),
                            Some(SetOptions::NX),
                            false,
                        )
                        .await
                        .expect("SET NX");
                    if set.is_some() {
                        return Holding::Polling {
                            client: client.clone(),
                            key: name.to_owned(),
                            token,
                        };
                    }
                    tokio::time::sleep(*every).await;
                }
            }
        }
    }
}

impl Holding {
    pub async fn release(self) {
        match self {
            Holding::Tower(guard) => {
                let _ = guard.release().await.expect("tower-lock release");
            }
            Holding::Pg { mut conn, key } => {
                let _: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
                    .bind(key)
                    .fetch_one(&mut *conn)
                    .await
                    .expect("pg_advisory_unlock");
            }
            Holding::Polling { client, key, token } => {
                let _: i64 = client
                    .eval(POLL_RELEASE, vec![key], vec![token])
                    .await
                    .expect("release");
            }
        }
    }
}

/// Nanoseconds since the Unix epoch: a clock all processes of the run share.
pub fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// Workers on one lock name.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub workers: usize,
    /// Number of the first worker (workers of a second process continue the numbering).
    pub first_worker: usize,
    pub hold: Duration,
    /// `Some((think, duration))`: loop acquire → hold → release → think for `duration`.
    /// `None`: each worker acquires once.
    pub steady: Option<(Duration, Duration)>,
    /// Start time (ns on the shared clock), so that processes start together.
    pub start_ns: u128,
}

pub async fn run(contender: &Contender, name: &str, workload: Workload) -> Vec<Span> {
    let delay = Duration::from_nanos(workload.start_ns.saturating_sub(now_ns()) as u64);
    tokio::time::sleep(delay).await;
    let end_ns = workload.steady.map(|(_, d)| now_ns() + d.as_nanos());
    let tasks: Vec<_> = (0..workload.workers)
        .map(|i| {
            let (contender, name) = (contender.clone(), name.to_owned());
            tokio::spawn(async move {
                let worker = workload.first_worker + i;
                let mut spans = Vec::new();
                loop {
                    let asked = now_ns();
                    let holding = contender.acquire(&name).await;
                    let acquired = now_ns();
                    match contender {
                        // Its goal is stated against holds of the given length.
                        Contender::TowerSemaphore(..) => precise_hold(workload.hold).await,
                        _ => hold(workload.hold).await,
                    }
                    let releasing = now_ns();
                    holding.release().await;
                    let released = now_ns();
                    spans.push(Span {
                        worker,
                        asked,
                        acquired,
                        releasing,
                        released,
                    });
                    match (workload.steady, end_ns) {
                        (Some((think, _)), Some(end)) if now_ns() < end => hold(think).await,
                        _ => break,
                    }
                }
                spans
            })
        })
        .collect();
    let mut spans = Vec::new();
    for task in tasks {
        spans.extend(task.await.expect("worker"));
    }
    spans
}

/// Holds for `d` on a blocking thread, where tokio's timer would round up to the next
/// millisecond (a 2 ms hold lasts about 3 ms with it): the OS's sleep until the last
/// 200 µs (its wake-up is late by 100–200 µs on a busy machine), then yields of the thread
/// until `d` is over.
pub async fn precise_hold(d: Duration) {
    if d.is_zero() {
        return;
    }
    let _ = tokio::task::spawn_blocking(move || {
        let start = std::time::Instant::now();
        std::thread::sleep(d.saturating_sub(Duration::from_micros(200)));
        while start.elapsed() < d {
            std::thread::yield_now();
        }
    })
    .await;
}

/// Holds the lock (or thinks) for `d`: the timer rounds up to the next millisecond, and
/// the figures use the measured times.
pub async fn hold(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}
