//! S4: the HTTP layer on Redis and on memory, against no lock.
//!
//! S4c repeats S4b's no-lock and Redis variants with redis-server on a core of its own
//! (informational): on two shared cores, redis-server's own CPU time is taken from the
//! service's, whereas in production Redis runs on another machine.
//!
//! The layers are set up as the README recommends, with the manager given to the layer
//! (`LockLayer::manager`). One more memory variant takes its manager from an `Extension`
//! layer instead, for comparison (the extra layer costs axum a boxed service and a future
//! per request, and the manager an extension insert); another locks with the `Locked<K>`
//! extractor instead of the layer, its manager from an `Extension` layer too.

use super::pinned::Pinned;
use super::*;
use crate::cpu::CpuTime;
use tower_lock::extract::{KeySource, Lockable, Locked};

/// The extractor variant's key: the path's `key`, locked under the layer's names.
struct PathKey(String);

impl Lockable for PathKey {
    fn source() -> KeySource {
        KeySource::path("key")
    }
    fn parse(raw: &str) -> Result<Self, String> {
        Ok(PathKey(raw.to_owned()))
    }
    fn lock_name(&self) -> String {
        format!("bench:s4:key:{}", self.0)
    }
}

/// How a variant locks: a layer given its manager, a layer finding it in an `Extension`,
/// or the extractor (its manager in an `Extension`).
enum Locking {
    Layer,
    LayerWithExtension,
    Extractor,
}

/// S4: HTTP overhead of the layer, Redis and memory, against no lock.
pub(super) async fn s4(url: &str, scale: Scale, own_server: bool, report: &mut Report) {
    eprintln!("S4 HTTP overhead…");
    let backend = RedisBackend::connect(url).await.expect("connect");
    let eval_client = backend.client().clone();
    let redis = LockManager::builder().backend(backend);
    let layer = || LockLayer::by_path_param("key").key_prefix("bench:s4:");
    let variants = [
        ("no lock", None),
        ("LockLayer redis", Some((redis, Locking::Layer))),
        (
            "LockLayer memory",
            Some((LockManager::memory(), Locking::Layer)),
        ),
        (
            "LockLayer memory, manager from an Extension layer",
            Some((LockManager::memory(), Locking::LayerWithExtension)),
        ),
        (
            "Locked<K> extractor memory, manager from an Extension layer",
            Some((LockManager::memory(), Locking::Extractor)),
        ),
    ];
    let mut addrs = Vec::new();
    for (_, locks) in &variants {
        let app = Router::new().route("/k/{key}", post(|| async { "ok" }));
        let app = match locks {
            Some((locks, Locking::Layer)) => app.route_layer(layer().manager(locks.clone())),
            Some((locks, Locking::LayerWithExtension)) => {
                app.route_layer(layer()).layer(Extension(locks.clone()))
            }
            Some((locks, Locking::Extractor)) => Router::new()
                .route(
                    "/k/{key}",
                    post(|Locked(_key): Locked<PathKey>| async { "ok" }),
                )
                .layer(Extension(locks.clone())),
            None => app,
        };
        addrs.push(serve(app).await);
    }
    // S4b's floors: no lock, but a handler that makes one or two `EVAL "return 1"`s per
    // request through the Redis variant's client (two: the round trips of a lock without
    // batching).
    let mut floor_addrs = Vec::new();
    for evals in [1, 2] {
        let client = eval_client.clone();
        let handler = move || async move {
            for _ in 0..evals {
                let _: i64 = client
                    .eval("return 1", Vec::<String>::new(), Vec::<String>::new())
                    .await
                    .expect("EVAL");
            }
            "ok"
        };
        let app = Router::new().route("/k/{key}", post(handler));
        floor_addrs.push(serve(app).await);
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

    // (b) 64 connections; the variants and the floors take turns (see `rounds`).
    let clients = http_clients(64);
    let all_addrs = [&addrs[..], &floor_addrs[..]].concat();
    let mut measured = parallel_rounds(
        &clients,
        &all_addrs,
        &sequence,
        scale.s4_parallel,
        &eval_client,
    )
    .await;
    // The layer variants, then the floors, in `all_addrs`' order.
    let floors = variants.len();
    let labels: Vec<&str> = variants
        .iter()
        .map(|(label, _)| *label)
        .chain([
            "no lock, one `EVAL \"return 1\"` per request (floor: one round trip)",
            "no lock, two `EVAL \"return 1\"`s one after the other (a lock's two round trips, unbatched)",
        ])
        .collect();
    let mut rates = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        let rate = measured.rate(i);
        let times = &mut measured.times[i];
        report.add(
            "S4b 64 connections",
            &format!("{label} req/s, p50 / p99"),
            format!(
                "{rate:.0}/s, {} / {}",
                us(percentile(times, 50.0)),
                us(percentile(times, 99.0))
            ),
            rate,
        );
        rates.push(rate);
    }
    // Informational: where the Redis variant's throughput goes on these shared cores (the
    // Extension variant left out: it differs from the memory one by one layer).
    let variants = [0, 1, 2, floors, floors + 1].map(|i| (i, labels[i]));
    measured.report_cpu(report, "S4b 64 connections", &variants);
    let (r_redis, r_memory) = (rates[1] / rates[0], rates[2] / rates[0]);
    let r_extension = rates[3] / rates[0];
    report.add(
        "S4b 64 connections",
        "memory layer with the manager from an Extension layer ÷ no lock",
        format!("{r_extension:.2}"),
        r_extension,
    );
    let r_extractor = rates[4] / rates[0];
    report.add(
        "S4b 64 connections",
        "memory Locked<K> extractor (manager from an Extension layer) ÷ no lock",
        format!("{r_extractor:.2}"),
        r_extractor,
    );
    let (one_eval, two_evals) = (rates[floors] / rates[0], rates[floors + 1] / rates[0]);
    report.add(
        "S4b 64 connections",
        "one / two `EVAL \"return 1\"`s per request ÷ no lock (informational: what a round trip per request costs here)",
        format!("{one_eval:.2} / {two_evals:.2}"),
        one_eval,
    );
    let r_floor = rates[1] / rates[floors];
    report.add(
        "S4b 64 connections",
        "redis layer (two lock operations per request) ÷ one `EVAL` per request",
        format!("{r_floor:.2}"),
        r_floor,
    );
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

    // (c) The no-lock and Redis variants again, this process on one core and redis-server
    // on the other.
    let section = "S4c 64 connections, redis-server on a core of its own";
    let pinned = match own_server {
        true => Pinned::apply(&eval_client).await,
        false => Err("Redis is not this benchmark's own server (REDIS_URL)".into()),
    };
    match pinned {
        Ok(pinned) => {
            let measured = parallel_rounds(
                &clients,
                &addrs[..2],
                &sequence,
                scale.s4_parallel,
                &eval_client,
            )
            .await;
            drop(pinned);
            let rate = |i: usize| measured.rate(i);
            let r = rate(1) / rate(0);
            report.add(
                section,
                "no lock / LockLayer redis req/s (this process pinned to one core, redis-server to another)",
                format!("{:.0}/s / {:.0}/s", rate(0), rate(1)),
                rate(1),
            );
            report.add(
                section,
                "redis layer throughput ÷ no lock (informational: the layer's cost to the service's core, as with Redis on its own machine)",
                format!("{r:.2}"),
                r,
            );
            measured.report_cpu(report, section, &[(0, "no lock"), (1, "LockLayer redis")]);
        }
        Err(why) => report.add(section, "not measured", why, 0.0),
    }
}

/// Serves `app` on a loopback port of its own, in the background.
pub(super) async fn serve(app: Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Requests per variant of `addrs` over 64 connections, the variants taking turns (see
/// `rounds`): each request's latency, and each variant's time in all.
pub(super) async fn parallel_rounds(
    clients: &[HttpClient<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>],
    addrs: &[std::net::SocketAddr],
    sequence: &Arc<AtomicU64>,
    duration: Duration,
    redis: &Client,
) -> Rounds {
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); addrs.len()];
    let mut elapsed = vec![Duration::ZERO; addrs.len()];
    let mut cpu = vec![CpuTime::ZERO; addrs.len()];
    let rounds = rounds(duration);
    for _ in 0..rounds {
        for (i, addr) in addrs.iter().enumerate() {
            let cpu_before = CpuTime::now(redis).await;
            let end = Instant::now() + duration / rounds;
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
            cpu[i] = cpu[i].add(CpuTime::now(redis).await.since(cpu_before));
        }
    }
    Rounds {
        times,
        elapsed,
        cpu,
    }
}

/// What [`parallel_rounds`] measured, per variant.
pub(super) struct Rounds {
    /// Each request's latency.
    times: Vec<Vec<Duration>>,
    /// The variant's time in all.
    elapsed: Vec<Duration>,
    /// CPU time used while the variant ran, by this process and by redis-server.
    cpu: Vec<CpuTime>,
}

impl Rounds {
    pub(super) fn rate(&self, variant: usize) -> f64 {
        self.times[variant].len() as f64 / self.elapsed[variant].as_secs_f64()
    }

    /// Reports the CPU time per request of each `(variant, label)`, as
    /// "<label>: CPU time per request (informational)".
    pub(super) fn report_cpu(
        &self,
        report: &mut Report,
        section: &str,
        variants: &[(usize, &str)],
    ) {
        for &(variant, label) in variants {
            let (value, number) = self.cpu_per_request(variant);
            report.add(
                section,
                &format!("{label}: CPU time per request (informational)"),
                value,
                number,
            );
        }
    }

    /// CPU time per request of `variant`: "this process X µs + redis-server Y µs".
    fn cpu_per_request(&self, variant: usize) -> (String, f64) {
        let requests = self.times[variant].len().max(1) as u32;
        let cpu = self.cpu[variant];
        let per = |time: Option<Duration>| time.map(|t| t / requests);
        match (per(cpu.process), per(cpu.redis)) {
            (Some(process), Some(redis)) => (
                format!(
                    "{} = this process {} + redis-server {}",
                    us(process + redis),
                    us(process),
                    us(redis)
                ),
                (process + redis).as_secs_f64(),
            ),
            _ => (
                "not measured (needs Linux's /proc and Redis's INFO cpu)".into(),
                0.0,
            ),
        }
    }
}

/// `n` HTTP clients of one connection each.
pub(super) fn http_clients(
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

pub(super) async fn post_once(
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
