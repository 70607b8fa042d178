//! Where an uncontended acquire + release spends its time, client and server side.
//!
//! ```sh
//! cargo bench --bench uncontended                    # latencies, each over the EVAL floor
//! cargo bench --bench uncontended -- engine 20000    # one part alone, for a profiler:
//! valgrind --tool=callgrind target/release/deps/uncontended-<hash> engine 2000
//! ```
//!
//! Starts its own redis-server on a loopback port (or uses `REDIS_URL`). Without a part
//! it interleaves four things through one fred client, as a user's code runs them (a
//! default manager, the watchdog lease, the multi-thread runtime): `EVAL "return 1"` (the
//! floor), the manager's acquire and release, and the backend's own acquire and release
//! (the same script calls without the engine). It prints each p50 over the floor and
//! redis-server's own time per call (`INFO commandstats`). With a part (`eval`, `backend`,
//! `engine`, or `memory`: the in-memory backend, no Redis) and a count, it runs only that
//! part, so that a profiler's count for `n` and for `3n` operations gives the cost of one.

#[path = "../common/script_calls.rs"]
mod script_calls;
#[path = "../../tests/support/mod.rs"]
mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fred::prelude::*;
use script_calls::ScriptCalls;
use tower_lock::backend::RedisBackend;
use tower_lock::LockManager;

/// The system allocator, counting allocations (one relaxed add each: this binary runs one
/// operation at a time).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations per run of `f`, over `n` runs (after a warm-up of `n / 10`).
async fn allocations_per<F: std::future::Future>(n: usize, mut f: impl FnMut() -> F) -> f64 {
    for _ in 0..n / 10 {
        f().await;
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..n {
        f().await;
    }
    (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / n as f64
}

/// An uncontended acquire + release on the in-memory backend.
async fn memory_pair(memory: &LockManager) {
    let guard = memory.lock("bench:s1").acquire().await.expect("acquire");
    let released = guard.release().await.expect("release");
    assert_eq!(released, tower_lock::lock::Released::Unlocked);
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let part = args.first().cloned();
    let n: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(20_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(part, n));
}

async fn run(part: Option<String>, n: usize) {
    if part.as_deref() == Some("memory") {
        // The in-memory backend: no Redis, no I/O (callgrind's figure in performance.md).
        let memory = LockManager::memory();
        for _ in 0..n {
            memory_pair(&memory).await;
        }
        return;
    }
    let server = support::redis_from_env_or_start();
    let url = server.0.clone();
    let backend = RedisBackend::connect(&url).await.expect("connect");
    let client = backend.client().clone();
    let locks = LockManager::builder().backend(backend.clone());
    let raw = ScriptCalls::new(
        backend,
        locks.key("bench:uncontended:raw").expect("a valid name"),
    );
    let eval = || async {
        let _: i64 = client
            .eval("return 1", Vec::<String>::new(), Vec::<String>::new())
            .await
            .expect("EVAL");
    };
    let engine = || async {
        let guard = locks
            .lock("bench:uncontended")
            .acquire()
            .await
            .expect("acquire");
        let released = guard.release().await.expect("release");
        assert_eq!(released, tower_lock::lock::Released::Unlocked);
    };
    match part.as_deref() {
        Some("eval") => {
            for _ in 0..n {
                eval().await;
                eval().await;
            }
            return;
        }
        Some("backend") => {
            for _ in 0..n {
                raw.acquire().await;
                raw.release().await;
            }
            return;
        }
        Some("engine") => {
            for _ in 0..n {
                engine().await;
            }
            return;
        }
        Some(other) => panic!("unknown part `{other}`: eval, backend, engine or memory"),
        None => {}
    }
    let admin = support::client(&url).await;
    let resetstat = fred::types::CustomCommand::new_static("CONFIG", None, false);
    let _: () = admin
        .custom(resetstat, vec!["RESETSTAT"])
        .await
        .expect("CONFIG RESETSTAT");
    let mut times: [Vec<Duration>; 5] = Default::default();
    for round in 0..(n + n / 10) {
        let mut timed = [Duration::ZERO; 5];
        let t = Instant::now();
        eval().await;
        timed[0] = t.elapsed();
        let t = Instant::now();
        let guard = locks
            .lock("bench:uncontended")
            .acquire()
            .await
            .expect("acquire");
        timed[1] = t.elapsed();
        let t = Instant::now();
        let released = guard.release().await.expect("release");
        timed[2] = t.elapsed();
        assert_eq!(released, tower_lock::lock::Released::Unlocked);
        let t = Instant::now();
        raw.acquire().await;
        timed[3] = t.elapsed();
        let t = Instant::now();
        raw.release().await;
        timed[4] = t.elapsed();
        if round >= n / 10 {
            // the first tenth warms up
            for (all, one) in times.iter_mut().zip(timed) {
                all.push(one);
            }
        }
    }
    let p50s: Vec<Duration> = times
        .iter_mut()
        .map(|all| {
            all.sort();
            all[all.len() / 2]
        })
        .collect();
    let floor = p50s[0].as_secs_f64();
    let over = |d: Duration| d.as_secs_f64() / floor;
    println!("| part | p50 | ÷ EVAL floor |");
    println!("|---|---:|---:|");
    let names = [
        "EVAL \"return 1\" (floor)",
        "manager acquire",
        "manager release",
        "backend acquire (no engine)",
        "backend release (no engine)",
    ];
    for (name, p50) in names.iter().zip(&p50s) {
        println!("| {name} | {p50:.1?} | {:.2} |", over(*p50));
    }
    println!(
        "| manager (acquire + release) | | {:.2} |",
        over(p50s[1]) + over(p50s[2])
    );
    println!(
        "| backend (acquire + release): the scripts alone | | {:.2} |",
        over(p50s[3]) + over(p50s[4])
    );
    let counted = (n / 10).max(1_000);
    let memory = LockManager::memory();
    let memory_allocations = allocations_per(counted, || memory_pair(&memory)).await;
    let engine_allocations = allocations_per(counted, engine).await;
    let backend_allocations = allocations_per(counted, || async {
        raw.acquire().await;
        raw.release().await;
    })
    .await;
    let eval_allocations = allocations_per(counted, || async {
        eval().await;
        eval().await;
    })
    .await;
    println!("\nheap allocations per acquire + release (this process, every thread):");
    println!("  memory backend       {memory_allocations:.2}");
    println!("  Redis, manager       {engine_allocations:.2}");
    println!("  Redis, backend alone {backend_allocations:.2}");
    println!("  two EVAL \"return 1\" {eval_allocations:.2}");
    let stats: String = admin
        .info(Some(fred::types::InfoKind::CommandStats))
        .await
        .expect("INFO commandstats");
    println!("\nredis-server, µs per call (INFO commandstats; the scripts' own calls inside):");
    for line in stats.lines().filter(|l| l.starts_with("cmdstat_")) {
        let name = line
            .trim_start_matches("cmdstat_")
            .split(':')
            .next()
            .unwrap_or("");
        let per_call = line
            .split(',')
            .find_map(|field| field.strip_prefix("usec_per_call="))
            .unwrap_or("?");
        println!("  {name:<10} {per_call}");
    }
    drop(server);
}
