//! The scenarios S1–S5 and the baselines.

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
use tower_lock::{LockLayer, LockManager};

use crate::contenders::{self, now_ns, Workload};
use crate::report::Report;
use crate::stats::{hold_stats, ms, percentile, us, HoldStats, Span};
use crate::{support, Scale};

const HOLD: Duration = Duration::from_millis(2);
const THINK: Duration = Duration::from_millis(5);

pub async fn run_all(scale: Scale) {
    let started = Instant::now();
    let server = match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let server = support::RedisServer::start();
            (server.url(), Some(server))
        }
    };
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
    let mut handover = Vec::new();
    if wanted("s2") {
        handover = s2(&url, &admin, floor, &mut report).await;
    }
    if wanted("s2b") {
        s2b(&url, &admin, scale, &mut report).await;
    }
    if wanted("s3") {
        s3(&url, scale, &mut report).await;
    }
    if wanted("s4") {
        s4(&url, scale, &mut report).await;
    }
    if wanted("s5") {
        s5(&url, &admin, scale, &mut report).await;
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

/// S1: uncontended acquire + release, against a trivial EVAL through the same client.
async fn s1(url: &str, scale: Scale, report: &mut Report) -> Duration {
    eprintln!("S1 uncontended…");
    let floor = s1_redis(url, "S1 redis", scale, report).await;
    s1_memory(scale, report).await;
    floor
}

/// Acquire + release against a trivial EVAL through the same client; returns the floor.
async fn s1_redis(url: &str, scenario: &str, scale: Scale, report: &mut Report) -> Duration {
    let backend = RedisBackend::connect(url).await.expect("connect");
    let client = backend.client().clone();
    let locks = LockManager::builder().backend(backend);
    let n = scale.s1_iterations;
    let mut eval = Vec::with_capacity(n);
    let mut lock = Vec::with_capacity(n);
    for round in 0..(n + n / 10) {
        let t = Instant::now();
        let _: i64 = client
            .eval("return 1", Vec::<String>::new(), Vec::<String>::new())
            .await
            .unwrap();
        let e = t.elapsed();
        let t = Instant::now();
        let guard = locks.lock("bench:s1").acquire().await.unwrap();
        guard.release().await.unwrap();
        let l = t.elapsed();
        if round >= n / 10 {
            // the first tenth warms up
            eval.push(e);
            lock.push(l);
        }
    }
    let floor = percentile(&mut eval, 50.0);
    let p50 = percentile(&mut lock, 50.0);
    report.add(
        scenario,
        "EVAL \"return 1\" p50 (floor)",
        us(floor),
        floor.as_secs_f64(),
    );
    report.add(
        scenario,
        "acquire+release p99",
        us(percentile(&mut lock, 99.0)),
        0.0,
    );
    let r = ratio(p50, floor);
    report.goal(
        scenario,
        "acquire+release p50 ÷ floor",
        format!("{} = {r:.2} ×", us(p50)),
        r,
        "≤ 2.3 ×",
        r <= 2.3,
    );
    floor
}

/// The memory backend against an uncontended tokio Mutex, timed in batches of 100.
async fn s1_memory(scale: Scale, report: &mut Report) {
    let n = scale.s1_iterations;
    let memory = LockManager::memory();
    let mutex = tokio::sync::Mutex::new(());
    let (mut floor_m, mut lock_m) = (Vec::new(), Vec::new());
    for _ in 0..(n / 10).max(50) {
        let t = Instant::now();
        for _ in 0..100 {
            drop(mutex.lock().await);
        }
        floor_m.push(t.elapsed() / 100);
        let t = Instant::now();
        for _ in 0..100 {
            memory
                .lock("bench:s1")
                .acquire()
                .await
                .unwrap()
                .release()
                .await
                .unwrap();
        }
        lock_m.push(t.elapsed() / 100);
    }
    let (fm, lm) = (
        percentile(&mut floor_m, 50.0),
        percentile(&mut lock_m, 50.0),
    );
    report.add(
        "S1 memory",
        "tokio Mutex lock+unlock p50 (floor)",
        us(fm),
        fm.as_secs_f64(),
    );
    let r = ratio(lm, fm);
    report.add(
        "S1 memory",
        "acquire+release p50 ÷ floor",
        format!("{} = {r:.0} ×", us(lm)),
        r,
    );
}

/// Runs `workload` split over `processes` (1 or 2) and returns every hold.
async fn burst(
    url: &str,
    kind: &str,
    name: &str,
    workers: usize,
    processes: usize,
    steady: Option<Duration>,
) -> Vec<Span> {
    let start_ns = now_ns() + Duration::from_millis(400).as_nanos();
    let local_workers = workers / processes;
    let mut child = None;
    if processes == 2 {
        let exe = std::env::current_exe().expect("own executable");
        let process = Command::new(exe)
            .args([
                "--worker",
                kind,
                url,
                name,
                &(workers - local_workers).to_string(),
                &local_workers.to_string(),
                &HOLD.as_micros().to_string(),
                &THINK.as_micros().to_string(),
                &steady.map_or(0, |d| d.as_millis()).to_string(),
                &start_ns.to_string(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the second process");
        child = Some(process);
    }
    let contender = crate::contender(kind, url).await;
    let workload = Workload {
        workers: local_workers,
        first_worker: 0,
        hold: HOLD,
        steady: steady.map(|d| (THINK, d)),
        start_ns,
    };
    let mut spans = contenders::run(&contender, name, workload).await;
    if let Some(child) = child {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .expect("second process output");
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains("done"), "the second process failed: {text}");
        spans.extend(text.lines().filter_map(Span::from_line));
    }
    spans
}

static RUN: AtomicU64 = AtomicU64::new(0);

fn fresh_name(label: &str) -> String {
    format!(
        "bench:{label}:{}:{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    )
}

async fn measured(
    url: &str,
    admin: &Client,
    kind: &str,
    workers: usize,
    processes: usize,
    steady: Option<Duration>,
) -> (HoldStats, f64, Vec<Span>) {
    let before = client_commands(admin, kind).await;
    let mut spans = burst(url, kind, &fresh_name(kind), workers, processes, steady).await;
    let commands = client_commands(admin, kind).await - before;
    let stats = hold_stats(&mut spans, workers);
    let per = commands as f64 / stats.acquisitions.max(1) as f64;
    (stats, per, spans)
}

/// S2: bursts of W duplicates; tower-lock against the polling baselines.
async fn s2(
    url: &str,
    admin: &Client,
    floor: Duration,
    report: &mut Report,
) -> Vec<(String, Vec<Duration>)> {
    eprintln!("S2 bursts…");
    let mut chart = Vec::new();
    let mut commands_at = std::collections::HashMap::new();
    for workers in [8, 32, 128] {
        for processes in [1, 2] {
            let scenario = format!("S2 W={workers} {processes}p");
            let mut makespans = Vec::new();
            for kind in ["tower", "poll100", "poll10"] {
                let (stats, per, _) = measured(url, admin, kind, workers, processes, None).await;
                assert_eq!(
                    stats.acquisitions, workers,
                    "{kind}: every worker acquires once"
                );
                makespans.push((kind, stats.makespan));
                if kind == "tower" {
                    commands_at.insert((workers, processes), per);
                    let eff_goal = workers == 32 && processes == 2;
                    if eff_goal {
                        report.goal(
                            &scenario,
                            "tower efficiency",
                            format!("{:.2}", stats.efficiency),
                            stats.efficiency,
                            "≥ 0.90",
                            stats.efficiency >= 0.90,
                        );
                        let r = ratio(stats.gap_p50, floor);
                        report.goal(
                            &scenario,
                            "tower hand-over p50 ÷ EVAL floor",
                            format!("{} = {r:.2} ×", us(stats.gap_p50)),
                            r,
                            "≤ 3 ×",
                            r <= 3.0,
                        );
                        chart.push(("tower-lock".to_owned(), stats.gaps.clone()));
                    } else {
                        report.add(
                            &scenario,
                            "tower efficiency",
                            format!("{:.2}", stats.efficiency),
                            stats.efficiency,
                        );
                        report.add(
                            &scenario,
                            "tower hand-over p50",
                            us(stats.gap_p50),
                            stats.gap_p50.as_secs_f64(),
                        );
                    }
                    report.add(
                        &scenario,
                        "tower hand-over p99 / max",
                        format!("{} / {}", us(stats.gap_p99), us(stats.gap_max)),
                        stats.gap_p99.as_secs_f64(),
                    );
                    report.add(
                        &scenario,
                        "tower makespan / max wait",
                        format!("{} / {}", ms(stats.makespan), ms(stats.max_wait)),
                        stats.makespan.as_secs_f64(),
                    );
                    report.violations(&scenario, "tower exclusion violations", stats.violations);
                    report.add(
                        &scenario,
                        "tower commands / acquisition",
                        format!("{per:.2}"),
                        per,
                    );
                } else {
                    if workers == 32 && processes == 2 {
                        chart.push((
                            format!("polling every {} ms", kind.trim_start_matches("poll")),
                            stats.gaps.clone(),
                        ));
                    }
                    report.add(
                        &scenario,
                        &format!("{kind} efficiency / hand-over p50"),
                        format!("{:.2} / {}", stats.efficiency, us(stats.gap_p50)),
                        stats.efficiency,
                    );
                    report.add(
                        &scenario,
                        &format!("{kind} commands / acquisition"),
                        format!("{per:.2}"),
                        per,
                    );
                    report.violations(
                        &scenario,
                        &format!("{kind} exclusion violations"),
                        stats.violations,
                    );
                }
            }
            let tower = makespans[0].1;
            for (kind, makespan) in &makespans[1..] {
                let r = ratio(tower, *makespan);
                report.add(
                    &scenario,
                    &format!("makespan tower ÷ {kind}"),
                    format!("{r:.2}"),
                    r,
                );
            }
        }
    }
    for processes in [1, 2] {
        let r = commands_at[&(128, processes)] / commands_at[&(8, processes)];
        report.goal(
            &format!("S2 {processes}p"),
            "tower commands/acq W=128 ÷ W=8",
            format!("{r:.2}"),
            r,
            "≤ 1.5",
            r <= 1.5,
        );
    }
    chart
}

/// S2b: steady contention, 32 workers looping.
async fn s2b(url: &str, admin: &Client, scale: Scale, report: &mut Report) {
    eprintln!("S2b steady contention…");
    for (kind, processes) in [("tower", 1), ("tower", 2), ("memory", 1)] {
        let scenario = format!("S2b {kind} {processes}p");
        let (stats, per, spans) =
            measured(url, admin, kind, 32, processes, Some(scale.steady)).await;
        let seconds = stats.makespan.as_secs_f64();
        let rate = stats.acquisitions as f64 / seconds.max(1e-9);
        report.add(&scenario, "acquisitions/s", format!("{rate:.0}"), rate);
        report.add(
            &scenario,
            "hand-over p50 / p99",
            format!("{} / {}", us(stats.gap_p50), us(stats.gap_p99)),
            stats.gap_p50.as_secs_f64(),
        );
        report.violations(&scenario, "exclusion violations", stats.violations);
        let within = if processes == 1 {
            stats.fairness
        } else {
            // Fairness within each process (FIFO is local).
            let half = 16;
            let mut worst: f64 = 1.0;
            for range in [0..half, half..32] {
                let mut local: Vec<Span> = spans
                    .iter()
                    .copied()
                    .filter(|s| range.contains(&s.worker))
                    .map(|mut s| {
                        s.worker -= range.start;
                        s
                    })
                    .collect();
                worst = worst.max(hold_stats(&mut local, half).fairness);
            }
            worst
        };
        let starving = stats.min_per_worker == 0;
        if kind == "memory" {
            report.add(
                &scenario,
                "max/min acquisitions per worker",
                format!("{within:.2}"),
                within,
            );
        } else {
            report.goal(
                &scenario,
                "max/min acquisitions per worker (within a process)",
                format!("{within:.2}"),
                within,
                "≤ 2, none starves",
                within <= 2.0 && !starving,
            );
            report.add(
                &scenario,
                "commands / acquisition",
                format!("{per:.2}"),
                per,
            );
        }
    }
}

/// A small xorshift generator: random names without a dependency.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// S3: many names, 64 workers, against EVAL throughput at the same concurrency.
async fn s3(url: &str, scale: Scale, report: &mut Report) {
    eprintln!("S3 many names…");
    let backend = RedisBackend::connect(url).await.expect("connect");
    let client = backend.client().clone();
    let locks = LockManager::builder().backend(backend);
    let eval_op = move |_| {
        let client = client.clone();
        async move {
            let _: i64 = client
                .eval("return 1", Vec::<String>::new(), Vec::<String>::new())
                .await
                .unwrap();
        }
    };
    let lock_op = move |n| lock_cycle(locks.clone(), n);
    let (eval_rate, lock_rate) = interleaved(scale.s3_duration, eval_op, lock_op).await;
    report.add(
        "S3 redis",
        "EVAL throughput, 64 workers (floor)",
        format!("{eval_rate:.0}/s"),
        eval_rate,
    );
    let r = lock_rate / eval_rate;
    report.goal(
        "S3 redis",
        "acquire+release throughput ÷ floor",
        format!("{lock_rate:.0}/s = {r:.2} ×"),
        r,
        "≥ 0.4 ×",
        r >= 0.4,
    );

    let mutexes: Arc<Vec<tokio::sync::Mutex<()>>> =
        Arc::new((0..10_000).map(|_| tokio::sync::Mutex::new(())).collect());
    let mutex_op = move |n: u64| {
        let mutexes = mutexes.clone();
        async move {
            drop(mutexes[(n % 10_000) as usize].lock().await);
        }
    };
    let memory = LockManager::memory();
    let memory_op = move |n| lock_cycle(memory.clone(), n);
    let (mutex_rate, memory_rate) = interleaved(scale.s3_duration, mutex_op, memory_op).await;
    report.add(
        "S3 memory",
        "tokio Mutex throughput, 64 workers (floor)",
        format!("{mutex_rate:.0}/s"),
        mutex_rate,
    );
    let r = memory_rate / mutex_rate;
    report.add(
        "S3 memory",
        "acquire+release throughput ÷ floor",
        format!("{memory_rate:.0}/s = {r:.2} ×"),
        r,
    );
}

/// S3's operation: acquire and release one of 10,000 names picked by `n`.
async fn lock_cycle(locks: LockManager, n: u64) {
    let guard = locks
        .lock(format!("bench:s3:{}", n % 10_000))
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    guard.release().await.unwrap();
}

/// Rounds in which the variants of a throughput comparison take turns, so that a machine
/// whose speed drifts during the run favours none of them.
const ROUNDS: u32 = 5;

/// Operations per second of `a` and of `b`, each run for `duration` in all, taking turns.
async fn interleaved<A, FA, B, FB>(duration: Duration, a: A, b: B) -> (f64, f64)
where
    A: Fn(u64) -> FA + Clone + Send + 'static,
    FA: std::future::Future<Output = ()> + Send,
    B: Fn(u64) -> FB + Clone + Send + 'static,
    FB: std::future::Future<Output = ()> + Send,
{
    let slice = duration / ROUNDS;
    let (mut count_a, mut time_a, mut count_b, mut time_b) = (0, Duration::ZERO, 0, Duration::ZERO);
    for round in 0..u64::from(ROUNDS) {
        let (n, t) = run_for(slice, round, a.clone()).await;
        (count_a, time_a) = (count_a + n, time_a + t);
        let (n, t) = run_for(slice, round, b.clone()).await;
        (count_b, time_b) = (count_b + n, time_b + t);
    }
    (
        count_a as f64 / time_a.as_secs_f64(),
        count_b as f64 / time_b.as_secs_f64(),
    )
}

/// Operations completed by 64 workers calling `op(random)` for `duration`, and the time.
async fn run_for<F, Fut>(duration: Duration, round: u64, op: F) -> (u64, Duration)
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let end = Instant::now() + duration;
    let start = Instant::now();
    let tasks: Vec<_> = (0..64u64)
        .map(|worker| {
            let op = op.clone();
            tokio::spawn(async move {
                let seed = (round * 64 + worker + 1).wrapping_mul(0x2545_F491_4F6C_DD1D);
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

/// S4: HTTP overhead of the layer, Redis and memory, against no lock.
async fn s4(url: &str, scale: Scale, report: &mut Report) {
    eprintln!("S4 HTTP overhead…");
    let backend = RedisBackend::connect(url).await.expect("connect");
    let eval_client = backend.client().clone();
    let redis = LockManager::builder().backend(backend);
    let variants = [
        ("no lock", None),
        ("LockLayer redis", Some(redis)),
        ("LockLayer memory", Some(LockManager::memory())),
    ];
    let mut addrs = Vec::new();
    for (_, locks) in &variants {
        let app = Router::new().route("/k/{key}", post(|| async { "ok" }));
        let app = match locks {
            Some(locks) => app
                .route_layer(LockLayer::by_path_param("key").key_prefix("bench:s4:"))
                .layer(Extension(locks.clone())),
            None => app,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.push(listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
    }
    let sequence = Arc::new(AtomicU64::new(0));
    // (a) one connection per variant, sequential requests, distinct keys; the variants
    // take turns request by request.
    let clients = http_clients(variants.len());
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    let mut evals = Vec::new();
    for _ in 0..scale.s4_sequential {
        // The floor again, through the Redis variant's own client, in the same turns.
        let t = Instant::now();
        let _: i64 = eval_client
            .eval("return 1", Vec::<String>::new(), Vec::<String>::new())
            .await
            .unwrap();
        evals.push(t.elapsed());
        for (i, client) in clients.iter().enumerate() {
            let key = sequence.fetch_add(1, Ordering::Relaxed);
            let t = Instant::now();
            post_once(client, addrs[i], key).await;
            times[i].push(t.elapsed());
        }
    }
    let mut p50 = Vec::new();
    for (i, (label, _)) in variants.iter().enumerate() {
        let median = percentile(&mut times[i], 50.0);
        report.add(
            "S4a 1 connection",
            &format!("{label} p50"),
            us(median),
            median.as_secs_f64(),
        );
        p50.push(median);
    }
    let floor = percentile(&mut evals, 50.0);
    report.add(
        "S4a 1 connection",
        "EVAL \"return 1\" p50 (floor, taking turns with the requests)",
        us(floor),
        floor.as_secs_f64(),
    );
    let added = p50[1].saturating_sub(p50[0]);
    let r = ratio(added, floor);
    report.goal(
        "S4a 1 connection",
        "redis layer added p50 ÷ EVAL floor",
        format!("{} = {r:.2} ×", us(added)),
        r,
        "≤ 2.5 ×",
        r <= 2.5,
    );
    let added_m = p50[2].saturating_sub(p50[0]);
    report.add(
        "S4a 1 connection",
        "memory layer added p50",
        us(added_m),
        added_m.as_secs_f64(),
    );

    // (b) 64 connections; the variants take turns (see `ROUNDS`).
    let clients = http_clients(64);
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    let mut elapsed = vec![Duration::ZERO; variants.len()];
    for _ in 0..ROUNDS {
        for (i, addr) in addrs.iter().enumerate() {
            let end = Instant::now() + scale.s4_parallel / ROUNDS;
            let start = Instant::now();
            let tasks: Vec<_> = clients
                .iter()
                .map(|client| {
                    let (client, addr, sequence) = (client.clone(), *addr, sequence.clone());
                    tokio::spawn(async move {
                        let mut times = Vec::new();
                        while Instant::now() < end {
                            let key = sequence.fetch_add(1, Ordering::Relaxed);
                            let t = Instant::now();
                            post_once(&client, addr, key).await;
                            times.push(t.elapsed());
                        }
                        times
                    })
                })
                .collect();
            for task in tasks {
                times[i].extend(task.await.unwrap());
            }
            elapsed[i] += start.elapsed();
        }
    }
    let mut rates = Vec::new();
    for (i, (label, _)) in variants.iter().enumerate() {
        let rate = times[i].len() as f64 / elapsed[i].as_secs_f64();
        report.add(
            "S4b 64 connections",
            &format!("{label} req/s, p50 / p99"),
            format!(
                "{rate:.0}/s, {} / {}",
                us(percentile(&mut times[i], 50.0)),
                us(percentile(&mut times[i], 99.0))
            ),
            rate,
        );
        rates.push(rate);
    }
    let (r_redis, r_memory) = (rates[1] / rates[0], rates[2] / rates[0]);
    report.goal(
        "S4b 64 connections",
        "redis layer throughput ÷ no lock",
        format!("{r_redis:.2}"),
        r_redis,
        "≥ 0.5",
        r_redis >= 0.5,
    );
    report.goal(
        "S4b 64 connections",
        "memory layer throughput ÷ no lock",
        format!("{r_memory:.2}"),
        r_memory,
        "≥ 0.9",
        r_memory >= 0.9,
    );
}

/// `n` HTTP clients of one connection each.
fn http_clients(
    n: usize,
) -> Vec<HttpClient<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>> {
    (0..n)
        .map(|_| {
            HttpClient::builder(TokioExecutor::new())
                .pool_max_idle_per_host(1)
                .build_http::<Empty<Bytes>>()
        })
        .collect()
}

async fn post_once(
    client: &HttpClient<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    addr: std::net::SocketAddr,
    key: u64,
) {
    let request = http::Request::post(format!("http://{addr}/k/{key}"))
        .body(Empty::new())
        .unwrap();
    let response = client.request(request).await.expect("HTTP request");
    assert!(response.status().is_success(), "HTTP {}", response.status());
    let _ = response.into_body().collect().await;
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// S5: many waiters on one name in one process.
async fn s5(url: &str, admin: &Client, scale: Scale, report: &mut Report) {
    eprintln!("S5 many waiters…");
    let locks = LockManager::redis(url).await.expect("connect");
    let mut per_handover = Vec::new();
    for waiters in [100, scale.s5_waiters] {
        let name = fresh_name("s5");
        let holder = locks.lock(&name).acquire().await.unwrap();
        let rss_before = rss_bytes();
        let acquired = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..waiters)
            .map(|_| {
                let (locks, name, acquired) = (locks.clone(), name.clone(), acquired.clone());
                tokio::spawn(async move {
                    let guard = locks
                        .lock(&name)
                        .wait(Duration::from_secs(600))
                        .acquire()
                        .await
                        .unwrap();
                    acquired.fetch_add(1, Ordering::Relaxed);
                    guard.release().await.unwrap();
                })
            })
            .collect();
        while locks.waiting(&name) < waiters {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let rss_full = rss_bytes();
        let channel = locks.key(&name).unwrap().channel();
        while support::numsub(admin, &channel).await == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let subscriptions = support::numsub(admin, &channel).await;
        let before = client_commands(admin, "tower").await;
        let t = Instant::now();
        holder.release().await.unwrap();
        for task in tasks {
            task.await.unwrap();
        }
        let drained = t.elapsed();
        let commands = client_commands(admin, "tower").await - before;
        let per = commands as f64 / waiters as f64;
        per_handover.push(per);
        if waiters == scale.s5_waiters {
            let scenario = format!("S5 {waiters} waiters");
            let per_waiter = rss_full.saturating_sub(rss_before) as f64 / waiters as f64;
            report.goal(
                &scenario,
                "memory per waiter (RSS delta ÷ waiters)",
                format!("{per_waiter:.0} B"),
                per_waiter,
                "≤ 2 KiB",
                per_waiter <= 2048.0,
            );
            report.goal(
                &scenario,
                "subscriptions for the name",
                subscriptions.to_string(),
                subscriptions as f64,
                "1",
                subscriptions == 1,
            );
            let all = acquired.load(Ordering::Relaxed);
            report.goal(
                &scenario,
                "waiters that acquired",
                all.to_string(),
                all as f64,
                &format!("{waiters}"),
                all == waiters as u64,
            );
            report.add(
                &scenario,
                "drain time / hand-overs per second",
                format!(
                    "{} / {:.0}",
                    ms(drained),
                    waiters as f64 / drained.as_secs_f64()
                ),
                drained.as_secs_f64(),
            );
            let r = per_handover[1] / per_handover[0];
            report.goal(
                &scenario,
                "commands per hand-over ÷ those at 100 waiters",
                format!("{:.2} ÷ {:.2} = {r:.2}", per_handover[1], per_handover[0]),
                r,
                "≈ 1 (≤ 1.5)",
                r <= 1.5,
            );
        }
    }
}

/// S1 and S2 (W = 32) on a local 3-master Redis Cluster (sharded pub/sub).
async fn cluster(scale: Scale, report: &mut Report) {
    eprintln!("S1/S2 on a local cluster…");
    let cluster = tokio::task::spawn_blocking(|| support::cluster::RedisCluster::start(3, 0))
        .await
        .expect("start a local cluster");
    let url = cluster.url();
    let floor = s1_redis(&url, "S1 cluster", scale, report).await;
    for processes in [1, 2] {
        let scenario = format!("S2 cluster W=32 {processes}p");
        let mut spans = burst(&url, "tower", &fresh_name("cluster"), 32, processes, None).await;
        let stats = hold_stats(&mut spans, 32);
        report.add(
            &scenario,
            "tower efficiency",
            format!("{:.2}", stats.efficiency),
            stats.efficiency,
        );
        let r = ratio(stats.gap_p50, floor);
        report.add(
            &scenario,
            "tower hand-over p50 ÷ EVAL floor",
            format!("{} = {r:.2} ×", us(stats.gap_p50)),
            r,
        );
        report.violations(&scenario, "tower exclusion violations", stats.violations);
    }
    drop(cluster);
}
