//! S7: the idempotency layer — a replay's latency, the Redis round trips of a first
//! execution, a burst of duplicates, and throughput on distinct keys — against the same
//! routes without it, in one run.

use std::sync::atomic::AtomicUsize;

use tower_lock::idempotency::IdempotencyLayer;

use super::s4::{http_clients, parallel_rounds, serve};
use super::*;

/// The key of a request: its path (`/k/<key>`).
fn path_key(parts: &http::request::Parts) -> Option<String> {
    Some(parts.uri.path().to_owned())
}

pub(super) async fn s7(url: &str, admin: &Client, scale: Scale, report: &mut Report) {
    eprintln!("S7 idempotency…");
    let section = "S7 idempotency";
    let backend = RedisBackend::connect(url).await.expect("connect");
    let eval_client = backend.client().clone();
    let redis = LockManager::builder().backend(backend);
    let memory = LockManager::memory();
    let app = |locks: Option<&LockManager>| {
        let app = Router::new().route("/k/{key}", post(|| async { "ok" }));
        match locks {
            Some(locks) => app.route_layer(
                IdempotencyLayer::by_fn(path_key)
                    .namespace(format!("bench:{}", std::process::id()))
                    .manager(locks.clone()),
            ),
            None => app,
        }
    };
    let plain = serve(app(None)).await;
    let with_redis = serve(app(Some(&redis))).await;
    let with_memory = serve(app(Some(&memory))).await;
    // The plain lock layer on the same keys: what the lock alone costs (informational).
    let lock_app = |locks: &LockManager| {
        Router::new()
            .route("/k/{key}", post(|| async { "ok" }))
            .route_layer(LockLayer::by_fn(path_key).manager(locks.clone()))
    };
    let lock_redis = serve(lock_app(&redis)).await;
    let lock_memory = serve(lock_app(&memory)).await;
    let sequence = Arc::new(AtomicU64::new(1_000_000_000));

    // Replays of one stored response against the route without the layer and one EVAL, in
    // turns.
    let clients = http_clients(2);
    post_key(&clients[1], with_redis, 1).await;
    let (mut replays, mut plains, mut evals) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..scale.s4_sequential {
        let t = Instant::now();
        post_key(&clients[0], plain, sequence.fetch_add(1, Ordering::Relaxed)).await;
        plains.push(t.elapsed());
        let t = Instant::now();
        let _: i64 = eval_client
            .eval("return 1", Vec::<String>::new(), Vec::<String>::new())
            .await
            .unwrap();
        evals.push(t.elapsed());
        let t = Instant::now();
        post_key(&clients[1], with_redis, 1).await;
        replays.push(t.elapsed());
    }
    let (replay, plain_p50, floor) = (
        percentile(&mut replays, 50.0),
        percentile(&mut plains, 50.0),
        percentile(&mut evals, 50.0),
    );
    let r = ratio(replay, plain_p50 + floor);
    report.goal(
        section,
        "replay p50 ÷ (no layer p50 + EVAL p50)",
        format!(
            "{} ÷ ({} + {}) = {r:.2}",
            us(replay),
            us(plain_p50),
            us(floor)
        ),
        r,
        "≤ 1.3",
        r <= 1.3,
    );

    // Redis commands of a first execution: the claim, then the store with the release.
    let before = client_commands(admin, "tower").await;
    let firsts = 200;
    for _ in 0..firsts {
        post_key(
            &clients[1],
            with_redis,
            sequence.fetch_add(1, Ordering::Relaxed),
        )
        .await;
    }
    let per = (client_commands(admin, "tower").await - before) as f64 / firsts as f64;
    report.goal(
        section,
        "Redis calls per first execution",
        format!("{per:.2}"),
        per,
        "≤ 2",
        per <= 2.0 + 1e-9,
    );

    // 64 duplicates of one key at once, on a handler that takes 20 ms.
    let handler_time = Duration::from_millis(20);
    let runs = Arc::new(AtomicUsize::new(0));
    let burst_app = {
        let runs = runs.clone();
        Router::new()
            .route(
                "/k/{key}",
                post(move || {
                    let runs = runs.clone();
                    async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(handler_time).await;
                        "ok"
                    }
                }),
            )
            .route_layer(
                IdempotencyLayer::by_fn(path_key)
                    .namespace(format!("bench-burst:{}", std::process::id()))
                    .manager(redis.clone()),
            )
    };
    let burst = serve(burst_app).await;
    let burst_clients = http_clients(64);
    let start = Instant::now();
    let requests: Vec<_> = burst_clients
        .iter()
        .map(|client| {
            let client = client.clone();
            tokio::spawn(async move { post_key(&client, burst, 7).await })
        })
        .collect();
    for request in requests {
        request.await.unwrap();
    }
    let makespan = start.elapsed();
    let executions = runs.load(Ordering::SeqCst);
    let over = makespan.saturating_sub(handler_time);
    report.goal(
        section,
        "64 duplicates at once: executions / makespan − handler time",
        format!("{executions} / {}", ms(over)),
        over.as_secs_f64(),
        "1 / ≤ 10 ms",
        executions == 1 && over <= Duration::from_millis(10),
    );

    // Throughput on distinct keys, 64 connections, the variants taking turns.
    let clients = http_clients(64);
    let measured = parallel_rounds(
        &clients,
        &[plain, with_redis, with_memory, lock_redis, lock_memory],
        &sequence,
        scale.s4_parallel,
        &eval_client,
    )
    .await;
    measured.report_cpu(
        report,
        section,
        &[
            (0, "distinct keys, 64 connections, no layer"),
            (1, "distinct keys, 64 connections, Redis layer"),
            (2, "distinct keys, 64 connections, memory layer"),
            (3, "distinct keys, 64 connections, LockLayer Redis"),
            (4, "distinct keys, 64 connections, LockLayer memory"),
        ],
    );
    let (r_redis, r_memory) = (
        measured.rate(1) / measured.rate(0),
        measured.rate(2) / measured.rate(0),
    );
    report.add(
        section,
        "distinct keys, 64 connections: req/s no layer / Redis layer / memory layer",
        format!(
            "{:.0}/s / {:.0}/s / {:.0}/s",
            measured.rate(0),
            measured.rate(1),
            measured.rate(2)
        ),
        measured.rate(0),
    );
    report.add(
        section,
        "distinct keys, 64 connections: LockLayer ÷ no layer, Redis / memory (informational: the lock alone, batched with other requests' on Redis)",
        format!(
            "{:.2} / {:.2}",
            measured.rate(3) / measured.rate(0),
            measured.rate(4) / measured.rate(0)
        ),
        measured.rate(3) / measured.rate(0),
    );
    report.goal(
        section,
        "distinct keys, 64 connections: Redis layer ÷ no layer",
        format!("{r_redis:.2}"),
        r_redis,
        "≥ 0.40",
        r_redis >= 0.40,
    );
    report.goal(
        section,
        "distinct keys, 64 connections: memory layer ÷ no layer",
        format!("{r_memory:.2}"),
        r_memory,
        "≥ 0.9",
        r_memory >= 0.9,
    );
}

async fn post_key(
    client: &HttpClient<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    addr: std::net::SocketAddr,
    key: u64,
) {
    super::s4::post_once(client, addr, key).await;
}
