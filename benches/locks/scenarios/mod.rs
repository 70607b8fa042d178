//! The scenarios S1–S12 and the baselines, one file each; they share this module's imports
//! and helpers (`use super::*`).

mod cluster;
mod other_backends;
mod pinned;
mod s1;
mod s10_coalesce;
mod s11_zookeeper;
mod s12_mysql;
mod s1_kinds;
mod s2;
mod s2b_fair;
mod s3;
mod s4;
mod s5;
mod s6;
mod s7_idempotency;
mod s8_semaphore;
mod s9_postgres;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::{Extension, Router};
use fred::prelude::*;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use tower_lock::backend::RedisBackend;
use tower_lock::layer::LockLayer;
use tower_lock::LockManager;

use crate::contenders::{self, now_ns, Workload};
use crate::report::Report;
use crate::stats::{hold_stats, ms, percentile, us, HoldStats, Span};
use crate::{support, Scale};

use cluster::cluster;
use s1::s1;
use s10_coalesce::s10;
use s11_zookeeper::s11;
use s12_mysql::s12;
use s1_kinds::s1_kinds;
use s2::{s2, s2b};
use s2b_fair::s2b_fair;
use s3::s3;
use s4::s4;
use s5::s5;
use s6::s6;
use s7_idempotency::s7;
use s8_semaphore::s8;
use s9_postgres::s9;

const HOLD: Duration = Duration::from_millis(2);
const THINK: Duration = Duration::from_millis(5);

pub async fn run_all(scale: Scale) {
    let started = Instant::now();
    let server = support::redis_from_env_or_start();
    let url = server.0.clone();
    let admin = support::client(&url).await;
    let mut report = Report::default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    eprintln!(
        "tower-lock benchmark ({}), {cores} cores, Redis at {url}",
        if scale.quick { "quick" } else { "full" }
    );

    // BENCH_ONLY=s1,s4 runs a subset (S1 always runs: it measures the floor).
    let only = std::env::var("BENCH_ONLY")
        .unwrap_or_default()
        .to_lowercase();
    let wanted = |s: &str| only.is_empty() || only.split(',').any(|o| o.trim() == s);
    let floor = s1(&url, scale, &mut report).await;
    if wanted("kinds") {
        s1_kinds(&url, scale, &mut report).await;
    }
    let mut handover = Vec::new();
    if wanted("s2") {
        handover = s2(&url, &admin, floor, &mut report).await;
    }
    if wanted("s2b") {
        s2b(&url, &admin, scale, &mut report).await;
    }
    if wanted("s2b") || wanted("fair") {
        s2b_fair(&url, &admin, floor, scale, &mut report).await;
    }
    if wanted("s3") {
        s3(&url, scale, &mut report).await;
    }
    if wanted("s4") {
        s4(&url, scale, server.1.is_some(), &mut report).await;
    }
    if wanted("s5") {
        s5(&url, &admin, scale, &mut report).await;
    }
    if wanted("s6") {
        s6(&url, &admin, scale, &mut report).await;
    }
    if wanted("s7") || wanted("idempotency") {
        s7(&url, &admin, scale, &mut report).await;
    }
    if wanted("s8") || wanted("semaphore") {
        s8(&url, &admin, scale, &mut report).await;
    }
    if wanted("s9") || wanted("postgres") {
        s9(scale, &admin, &mut report).await;
    }
    if wanted("s10") || wanted("coalesce") {
        s10(&url, scale, &mut report).await;
    }
    if wanted("s11") || wanted("zookeeper") {
        s11(scale, &mut report).await;
    }
    if wanted("s12") || wanted("mysql") {
        s12(scale, &mut report).await;
    }
    if wanted("cluster") {
        cluster(scale, &mut report).await;
    }

    let table = report.markdown();
    println!("\n{table}");
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let _ = std::fs::create_dir_all(&target);
    let json = report.json(&[
        (
            "command",
            format!(
                "cargo bench --bench locks{}",
                if scale.quick { " -- --quick" } else { "" }
            ),
        ),
        ("cores", cores.to_string()),
        ("redis", redis_version()),
        ("seconds", format!("{:.0}", started.elapsed().as_secs_f64())),
    ]);
    let json_path = format!("{target}/bench-locks.json");
    let svg_path = format!("{target}/bench-locks-handover.svg");
    std::fs::write(&json_path, json).expect("write the JSON report");
    std::fs::write(
        &svg_path,
        crate::chart::cdf_svg("S2 hand-over gaps, W = 32 over two processes", &handover),
    )
    .expect("write the chart");
    eprintln!(
        "wrote {json_path} and {svg_path} in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    drop(server);
}

fn redis_version() -> String {
    Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// Commands clients sent to Redis. INFO commandstats also counts calls made inside
/// scripts, so only commands that the contenders send themselves are summed: SET is the
/// polling lock's own command, but inside tower-lock's release script it is the latch.
async fn client_commands(admin: &Client, kind: &str) -> u64 {
    let mut commands = vec!["evalsha", "eval", "subscribe", "unsubscribe", "script|load"];
    if kind.starts_with("poll") {
        commands.push("set");
    }
    let mut total = 0;
    for command in commands {
        total += support::command_calls(admin, command).await;
    }
    total
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-12)
}

/// A small xorshift generator: random names without a dependency.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Rounds in which the variants of a throughput comparison that runs `duration` in all
/// take turns, so that a machine whose speed drifts during the run favours none of them:
/// one round per 200 ms of each variant (a shared host's speed was seen to swing by a
/// third within a second), at least 5.
fn rounds(duration: Duration) -> u32 {
    (duration.as_millis() / 200).clamp(5, 50) as u32
}

/// Operations per second of `a` and of `b`, each run for `duration` in all, taking turns
/// (64 workers each).
async fn interleaved<A, FA, B, FB>(duration: Duration, a: A, b: B) -> (f64, f64)
where
    A: Fn(u64) -> FA + Clone + Send + 'static,
    FA: std::future::Future<Output = ()> + Send,
    B: Fn(u64) -> FB + Clone + Send + 'static,
    FB: std::future::Future<Output = ()> + Send,
{
    interleaved_on(64, duration, a, b).await
}

/// [`interleaved`] with `workers` workers per variant.
async fn interleaved_on<A, FA, B, FB>(workers: u64, duration: Duration, a: A, b: B) -> (f64, f64)
where
    A: Fn(u64) -> FA + Clone + Send + 'static,
    FA: std::future::Future<Output = ()> + Send,
    B: Fn(u64) -> FB + Clone + Send + 'static,
    FB: std::future::Future<Output = ()> + Send,
{
    let rounds = rounds(duration);
    let slice = duration / rounds;
    let (mut count_a, mut time_a, mut count_b, mut time_b) = (0, Duration::ZERO, 0, Duration::ZERO);
    for round in 0..u64::from(rounds) {
        let (n, t) = run_for(workers, slice, round, a.clone()).await;
        (count_a, time_a) = (count_a + n, time_a + t);
        let (n, t) = run_for(workers, slice, round, b.clone()).await;
        (count_b, time_b) = (count_b + n, time_b + t);
    }
    (
        count_a as f64 / time_a.as_secs_f64(),
        count_b as f64 / time_b.as_secs_f64(),
    )
}

/// Operations completed by `workers` workers calling `op(random)` for `duration`, and the
/// time.
async fn run_for<F, Fut>(workers: u64, duration: Duration, round: u64, op: F) -> (u64, Duration)
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let end = Instant::now() + duration;
    let start = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|worker| {
            let op = op.clone();
            tokio::spawn(async move {
                let seed = (round * workers + worker + 1).wrapping_mul(0x2545_F491_4F6C_DD1D);
                let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ seed;
                let mut count = 0u64;
                while Instant::now() < end {
                    op(next_random(&mut state)).await;
                    count += 1;
                }
                count
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    (total, start.elapsed())
}
