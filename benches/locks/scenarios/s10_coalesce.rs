//! S10: the coalescing layer — 64 identical GETs over two layers of one backend (two
//! processes, as Redis sees them) on a 50 ms handler, and throughput on distinct keys
//! (nothing to coalesce) — against the same routes without it, in one run.

use std::sync::atomic::AtomicUsize;

use axum::routing::get;
use tower_lock::coalesce::CoalesceLayer;

use super::s4::{http_clients, parallel_rounds, serve};
use super::*;

pub(super) async fn s10(url: &str, scale: Scale, report: &mut Report) {
    eprintln!("S10 coalescing…");
    let section = "S10 coalescing";
    let backend = RedisBackend::connect(url).await.expect("connect");
    let eval_client = backend.client().clone();
    let redis = [
        LockManager::builder().backend(backend),
        LockManager::builder().redis(url).await.expect("connect"),
    ];
    let memory = tower_lock::backend::MemoryBackend::new();
    let memory = [
        LockManager::builder().backend(memory.clone()),
        LockManager::builder().backend(memory),
    ];
    let mut evals = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let _: i64 = eval_client
            .eval("return 1", Vec::<String>::new(), Vec::<String>::new())
            .await
            .unwrap();
        evals.push(t.elapsed());
    }
    let round_trip = percentile(&mut evals, 50.0);

    // 64 identical GETs at once, over two layers, on a handler that ends when the benchmark
    // opens its gate, 50 ms after the burst starts; beside the same burst on the route
    // without the layer, where every request runs the handler and all end at that same
    // instant, as one execution's waiters get their answers at once. Each answer is timed
    // from the gate's opening: what coalescing adds is the difference. Warm connections.
    // One burst's p50 swings by hundreds of µs on two cores (64 answers to write, the
    // runtime's and the kernel's scheduling), so the three routes take turns for several
    // rounds and each is read by its median round.
    let handler_time = Duration::from_millis(50);
    let clients = http_clients(64);
    let gate = Arc::new(tokio::sync::watch::Sender::new(false));
    let slow_route = |runs: Arc<AtomicUsize>| {
        let gate = gate.clone();
        Router::new()
            .route(
                "/report",
                get(move || {
                    runs.fetch_add(1, Ordering::SeqCst);
                    let mut open = gate.subscribe();
                    async move {
                        let _ = open.wait_for(|open| *open).await;
                        "the report"
                    }
                }),
            )
            .route("/warm", get(|| async { "ok" }))
    };
    // Each round asks for a report of its own: a response that other processes' requests
    // waited for is kept a second for them, and the next round must not find it.
    let gated = |addrs: [std::net::SocketAddr; 2], round: usize| {
        let (clients, gate) = (clients.clone(), gate.clone());
        async move {
            gate.send_replace(false);
            let path = format!("/report?round={round}");
            let answers = tokio::spawn(async move { burst(&clients, addrs, &path).await });
            tokio::time::sleep(handler_time).await;
            let opened = Instant::now();
            gate.send_replace(true);
            let mut after: Vec<Duration> = answers
                .await
                .unwrap()
                .into_iter()
                .map(|done| done.saturating_duration_since(opened))
                .collect();
            percentile(&mut after, 50.0)
        }
    };
    let bare = serve(slow_route(Arc::default())).await;
    burst(&clients, [bare, bare], "/warm").await;
    let mut layered = Vec::new();
    for (backend, managers) in [("Redis", &redis), ("memory", &memory)] {
        let runs = Arc::new(AtomicUsize::new(0));
        let namespace = format!("bench-coalesce:{}:{backend}", std::process::id());
        let mut addrs = Vec::new();
        for locks in managers {
            let app = slow_route(runs.clone()).route_layer(
                CoalesceLayer::new()
                    .namespace(&namespace)
                    .manager(locks.clone()),
            );
            addrs.push(serve(app).await);
        }
        let addrs = [addrs[0], addrs[1]];
        burst(&clients, addrs, "/warm").await;
        layered.push((backend, addrs, runs));
    }
    let rounds = if scale.quick { 3 } else { 9 };
    let mut bare_p50s = Vec::new();
    let mut layered_p50s = vec![Vec::new(); layered.len()];
    // The fewest and the most executions a burst made, per layered route.
    let mut executions = vec![(usize::MAX, 0); layered.len()];
    for round in 0..rounds {
        bare_p50s.push(gated([bare, bare], round).await);
        for (n, (_, addrs, runs)) in layered.iter().enumerate() {
            let before = runs.load(Ordering::SeqCst);
            layered_p50s[n].push(gated(*addrs, round).await);
            let made = runs.load(Ordering::SeqCst) - before;
            executions[n] = (executions[n].0.min(made), executions[n].1.max(made));
        }
    }
    let bare_p50 = percentile(&mut bare_p50s, 50.0);
    for (n, (backend, _, _)) in layered.iter().enumerate() {
        let p50 = percentile(&mut layered_p50s[n], 50.0);
        let (fewest, most) = executions[n];
        let over = p50.saturating_sub(bare_p50);
        let trips = over.as_secs_f64() / round_trip.as_secs_f64();
        report.goal(
            section,
            &format!("64 identical GETs over two layers ({backend}), handler 50 ms, {rounds} rounds taking turns with the route without the layer: executions per burst / the answers' p50 after the handler ends (median round) − the same burst's without the layer (median round) → what the layer adds (none when less), in round trips"),
            format!(
                "{fewest}–{most} / {} − {} → {} = {trips:.1} × {}",
                us(p50),
                us(bare_p50),
                us(over),
                us(round_trip)
            ),
            trips,
            "1 / ≤ 2",
            (fewest, most) == (1, 1) && trips <= 2.0,
        );
    }

    // Throughput on distinct keys (POST covered, so that the shared request driver serves):
    // nothing to coalesce, what the layer's own path costs.
    let app = |locks: Option<&LockManager>, body: &'static str| {
        let app = Router::new().route("/k/{key}", post(move || async move { body }));
        match locks {
            Some(locks) => app.route_layer(
                CoalesceLayer::new()
                    .methods([http::Method::POST])
                    .namespace(format!("bench-distinct:{}", std::process::id()))
                    .manager(locks.clone()),
            ),
            None => app,
        }
    };
    let plain = serve(app(None, "ok")).await;
    let with_redis = serve(app(Some(&redis[0]), "ok")).await;
    let with_memory = serve(app(Some(&memory[0]), "ok")).await;
    let sequence = Arc::new(AtomicU64::new(2_000_000_000));
    let clients = http_clients(64);
    let measured = parallel_rounds(
        &clients,
        &[plain, with_redis, with_memory],
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
        ],
    );
    for (variant, backend, goal) in [(1, "Redis", 0.5), (2, "memory", 0.9)] {
        let r = measured.rate(variant) / measured.rate(0);
        report.goal(
            section,
            &format!("distinct keys, 64 connections: {backend} layer ÷ no layer"),
            format!(
                "{:.0}/s ÷ {:.0}/s = {r:.2}",
                measured.rate(variant),
                measured.rate(0)
            ),
            r,
            &format!("≥ {goal}"),
            r >= goal,
        );
    }

    // The same with responses of 16 KiB, as reports are: a response goes to Redis only
    // when someone waits for it.
    let large: &'static str = Box::leak("a line of the report\n".repeat(780).into_boxed_str());
    let (plain, with_redis) = (
        serve(app(None, large)).await,
        serve(app(Some(&redis[0]), large)).await,
    );
    let measured = parallel_rounds(
        &clients,
        &[plain, with_redis],
        &sequence,
        scale.s4_parallel,
        &eval_client,
    )
    .await;
    let r = measured.rate(1) / measured.rate(0);
    report.add(
        section,
        "distinct keys, 16 KiB responses, 64 connections: Redis layer ÷ no layer (informational)",
        format!(
            "{:.0}/s ÷ {:.0}/s = {r:.2}",
            measured.rate(1),
            measured.rate(0)
        ),
        r,
    );
    measured.report_cpu(
        report,
        section,
        &[(
            1,
            "distinct keys, 16 KiB responses, 64 connections, Redis layer",
        )],
    );
}

/// One GET of `path` per client at once, spread over `addrs`; when each was answered.
async fn burst(
    clients: &[HttpClient<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>],
    addrs: [std::net::SocketAddr; 2],
    path: &str,
) -> Vec<Instant> {
    let requests: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(n, client)| {
            let (client, uri) = (client.clone(), format!("http://{}{path}", addrs[n % 2]));
            tokio::spawn(async move {
                let request = http::Request::get(uri).body(Empty::new()).unwrap();
                let response = client.request(request).await.expect("HTTP request");
                assert!(response.status().is_success());
                let _ = response.into_body().collect().await;
                Instant::now()
            })
        })
        .collect();
    let mut answered = Vec::new();
    for request in requests {
        answered.push(request.await.unwrap());
    }
    answered
}
