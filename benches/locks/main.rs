//! `cargo bench --bench locks` (`-- --quick` for a short run): lock latency, hand-over and
//! HTTP overhead, every figure beside a floor or baseline measured in the same run.
//!
//! Starts its own redis-server on a loopback port (or uses `REDIS_URL`), prints a markdown
//! table, and writes `target/bench-locks.json` and `target/bench-locks-handover.svg`.

#[path = "../common/script_calls.rs"]
mod script_calls;
#[path = "../../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

mod chart;
mod contenders;
mod cpu;
mod report;
mod scenarios;
mod stats;

use std::time::Duration;

use contenders::{Contender, Workload};
use fred::prelude::*;

/// Run-length settings.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    pub quick: bool,
    pub s1_iterations: usize,
    pub steady: Duration,
    pub s3_duration: Duration,
    pub s4_sequential: usize,
    pub s4_parallel: Duration,
    pub s5_waiters: usize,
}

impl Scale {
    fn new(quick: bool) -> Scale {
        if quick {
            // A run that must complete (CI's), not one to read figures from.
            Scale {
                quick,
                s1_iterations: 300,
                steady: Duration::from_millis(300),
                s3_duration: Duration::from_millis(300),
                s4_sequential: 200,
                s4_parallel: Duration::from_millis(300),
                s5_waiters: 500,
            }
        } else {
            Scale {
                quick,
                s1_iterations: 5_000,
                steady: Duration::from_secs(5),
                s3_duration: Duration::from_secs(5),
                s4_sequential: 3_000,
                s4_parallel: Duration::from_secs(3),
                s5_waiters: 10_000,
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Some(at) = args.iter().position(|a| a == "--worker") {
        runtime.block_on(worker(&args[at + 1..]));
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    runtime.block_on(scenarios::run_all(Scale::new(quick)));
}

/// A second OS process of a two-process scenario: runs its workers, prints their spans.
async fn worker(args: &[String]) {
    let [kind, url, name, workers, first, hold_us, think_us, duration_ms, start_ns, ..] = args
    else {
        panic!(
            "worker arguments: kind url name workers first hold_us think_us duration_ms start_ns"
        );
    };
    let contender = contender(kind, url).await;
    let think_us: u64 = think_us.parse().unwrap();
    let duration_ms: u64 = duration_ms.parse().unwrap();
    let workload = Workload {
        workers: workers.parse().unwrap(),
        first_worker: first.parse().unwrap(),
        hold: Duration::from_micros(hold_us.parse().unwrap()),
        steady: (duration_ms > 0).then(|| {
            (
                Duration::from_micros(think_us),
                Duration::from_millis(duration_ms),
            )
        }),
        start_ns: start_ns.parse().unwrap(),
    };
    let spans = contenders::run(&contender, name, workload).await;
    let mut out = String::new();
    for span in spans {
        out.push_str(&span.to_line());
        out.push('\n');
    }
    out.push_str("done");
    println!("{out}");
}

/// Builds a contender by its short name: `tower`, `tower-free`, `fair`, `sem<N>` (a
/// semaphore of N permits), `poll100`, `poll10`, `memory`; on PostgreSQL (`url` is then a
/// `postgres://` URL): `pg` (tower-lock), `pgblock` (a connection per worker waiting in
/// `pg_advisory_lock`), `pgpoll<N>` (a connection per worker polling every N ms); on
/// ZooKeeper (`url` is then its hosts): `zk`; on MySQL (a `mysql://` URL): `mysql`.
pub async fn contender(kind: &str, url: &str) -> Contender {
    if let Some(rest) = kind.strip_prefix("pg") {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(40)
            .connect(url)
            .await
            .expect("connect to PostgreSQL");
        return match rest {
            "" => Contender::TowerLock(
                tower_lock::LockManager::builder()
                    .backend(tower_lock::backend::PostgresBackend::new(&pool)),
            ),
            "block" => Contender::PgAdvisory { pool, every: None },
            poll => Contender::PgAdvisory {
                pool,
                every: Some(Duration::from_millis(
                    poll.trim_start_matches("poll").parse().expect("pgpollN"),
                )),
            },
        };
    }
    if kind == "mysql" {
        let backend = tower_lock::backend::MySqlBackend::connect(url)
            .await
            .expect("connect to MySQL");
        return Contender::TowerLock(tower_lock::LockManager::builder().backend(backend));
    }
    if kind == "zk" {
        let backend = tower_lock::backend::ZooKeeperBackend::connect(url)
            .await
            .expect("connect to ZooKeeper");
        return Contender::TowerLock(tower_lock::LockManager::builder().backend(backend));
    }
    if let Some(limit) = kind.strip_prefix("sem") {
        let locks = tower_lock::LockManager::redis(url).await.expect("connect");
        return Contender::TowerSemaphore(locks, limit.parse().expect("sem<N>"));
    }
    match kind {
        "fair" => Contender::TowerFair(tower_lock::LockManager::redis(url).await.expect("connect")),
        "tower" => {
            Contender::TowerLock(tower_lock::LockManager::redis(url).await.expect("connect"))
        }
        // Every release frees the lock (no hand-over to the next local waiter).
        "tower-free" => Contender::TowerLock(
            tower_lock::LockManager::builder()
                .hand_over_limit(0)
                .redis(url)
                .await
                .expect("connect"),
        ),
        "memory" => Contender::TowerLock(tower_lock::LockManager::memory()),
        poll => {
            let every: u64 = poll.trim_start_matches("poll").parse().expect("pollN");
            let client = Builder::from_config(Config::from_url(url).unwrap())
                .build()
                .unwrap();
            client.init().await.expect("connect");
            Contender::Polling {
                client,
                every: Duration::from_millis(every),
            }
        }
    }
}
