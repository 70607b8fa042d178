//! S9: tower-lock on PostgreSQL, against the floor of one `SELECT 1` round trip and against
//! advisory locks used directly (a connection per worker: waiting in `pg_advisory_lock`, as
//! DistributedLock does, or polling `pg_try_advisory_lock`).

use sqlx::postgres::PgPool;
use sqlx::Connection;
use tower_lock::backend::PostgresBackend;

use super::other_backends::{across_processes, WORKERS};
use super::s2::{burst, fresh_name};
use super::s4::{http_clients, parallel_rounds, serve};
use super::*;

pub(super) async fn s9(scale: Scale, redis: &Client, report: &mut Report) {
    eprintln!("S9 PostgreSQL…");
    let server = match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let server = support::postgres::Postgres::start();
            (server.url(), Some(server))
        }
    };
    let url = server.0.as_str();
    let pool = PgPool::connect(url).await.expect("connect to PostgreSQL");
    let floor = uncontended(url, &pool, scale, report).await;
    two_processes(url, floor, scale, report).await;
    server_hand_over(url, floor, scale, report).await;
    http(&pool, scale, redis, report).await;
    drop(server);
}

/// The server's own hand-over, without tower-lock: one connection holds a key, another
/// waits for it in `pg_advisory_lock`; from the unlock being sent to the waiter's answer.
async fn server_hand_over(url: &str, floor: Duration, scale: Scale, report: &mut Report) {
    let mut holder = sqlx::postgres::PgConnection::connect(url).await.unwrap();
    let mut waiter = Some(sqlx::postgres::PgConnection::connect(url).await.unwrap());
    let mut gaps = Vec::new();
    for key in 0..(scale.s1_iterations / 5) as i64 {
        let key = key + 0x7000_0000;
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(key)
            .execute(&mut holder)
            .await
            .unwrap();
        let mut conn = waiter.take().expect("the waiter's connection");
        let waits = tokio::spawn(async move {
            sqlx::query("SELECT pg_advisory_lock($1)")
                .bind(key)
                .execute(&mut conn)
                .await
                .unwrap();
            (Instant::now(), conn)
        });
        // The waiter's statement reaches the server and waits.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let sent = Instant::now();
        let _: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
            .bind(key)
            .fetch_one(&mut holder)
            .await
            .unwrap();
        let (granted, mut conn) = waits.await.unwrap();
        gaps.push(granted - sent);
        let _: bool = sqlx::query_scalar("SELECT pg_advisory_unlock($1)")
            .bind(key)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        waiter = Some(conn);
    }
    let gap = percentile(&mut gaps, 50.0);
    report.add(
        "S9 PostgreSQL",
        "the server's own hand-over (unlock sent → the waiting connection's answer, no tower-lock) p50 ÷ floor",
        format!("{} = {:.2} ×", us(gap), ratio(gap, floor)),
        ratio(gap, floor),
    );
}

/// The floor (`SELECT 1` on one connection) and an uncontended acquire + release, taking
/// turns; the floor's p50.
async fn uncontended(url: &str, pool: &PgPool, scale: Scale, report: &mut Report) -> Duration {
    let mut conn = sqlx::postgres::PgConnection::connect(url).await.unwrap();
    let locks = LockManager::builder().backend(PostgresBackend::new(pool));
    let direct = crate::contender("pgblock", url).await;
    let name = fresh_name("pg-uncontended");
    // Warm up: sessions opened, statements prepared.
    for _ in 0..50 {
        let guard = locks.lock(&name).acquire().await.unwrap();
        let _ = guard.release().await.unwrap();
        direct.acquire(&name).await.release().await;
    }
    let (mut floors, mut pairs, mut directs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..scale.s1_iterations {
        let t = Instant::now();
        sqlx::query("SELECT 1").execute(&mut conn).await.unwrap();
        floors.push(t.elapsed());
        let t = Instant::now();
        let guard = locks.lock(&name).acquire().await.unwrap();
        let _ = guard.release().await.unwrap();
        pairs.push(t.elapsed());
        let t = Instant::now();
        direct.acquire(&name).await.release().await;
        directs.push(t.elapsed());
    }
    let floor = percentile(&mut floors, 50.0);
    let pair = percentile(&mut pairs, 50.0);
    let direct = percentile(&mut directs, 50.0);
    report.add(
        "S9 PostgreSQL",
        "SELECT 1 p50 (floor)",
        us(floor),
        floor.as_secs_f64(),
    );
    let r = ratio(pair, floor);
    report.goal(
        "S9 PostgreSQL uncontended",
        "acquire + release p50 ÷ floor",
        format!("{} = {r:.2} ×", us(pair)),
        r,
        "≤ 2.3 ×",
        r <= 2.3,
    );
    report.add(
        "S9 PostgreSQL uncontended",
        "pg_advisory_lock + unlock on the connection p50 ÷ floor",
        format!("{} = {:.2} ×", us(direct), ratio(direct, floor)),
        ratio(direct, floor),
    );
    floor
}

/// Holds of one name by 32 workers over two processes: the hand-over to the other
/// process, a burst and steady contention, against advisory locks used directly.
async fn two_processes(url: &str, floor: Duration, scale: Scale, report: &mut Report) {
    let steady = scale.steady;
    for kind in ["pg", "pgblock", "pgpoll10"] {
        let name = fresh_name(kind);
        let mut spans = burst(url, kind, &name, WORKERS, 2, None).await;
        let burst_stats = hold_stats(&mut spans, WORKERS);
        assert_eq!(burst_stats.violations, 0, "{kind}: two holders at once");
        let across = across_processes(&spans);
        let name = fresh_name(kind);
        let mut spans = burst(url, kind, &name, WORKERS, 2, Some(steady)).await;
        let stats = hold_stats(&mut spans, WORKERS);
        assert_eq!(stats.violations, 0, "{kind}: two holders at once");
        let scenario = format!("S9 {kind} W={WORKERS} 2p");
        if kind == "pg" {
            let r = ratio(across, floor);
            report.goal(
                &scenario,
                "hand-over to the other process (its release sent → next holder) p50 ÷ floor",
                format!("{} = {r:.2} ×", us(across)),
                r,
                "≤ 2 ×",
                r <= 2.0,
            );
            report.goal(
                &scenario,
                "burst efficiency",
                format!("{:.2}", burst_stats.efficiency),
                burst_stats.efficiency,
                "≥ 0.90",
                burst_stats.efficiency >= 0.90,
            );
            report.goal(
                &scenario,
                "steady efficiency (2 ms holds, 5 ms think)",
                format!("{:.2}", stats.efficiency),
                stats.efficiency,
                "≥ 0.85",
                stats.efficiency >= 0.85,
            );
            report.goal(
                &scenario,
                "max/min acquisitions per worker across both processes",
                format!("{:.2}", stats.fairness),
                stats.fairness,
                "≤ 1.5",
                stats.fairness <= 1.5,
            );
        } else {
            report.add(
                &scenario,
                "hand-over to the other process p50 ÷ floor / burst efficiency / steady efficiency / max÷min per worker",
                format!(
                    "{:.2} × / {:.2} / {:.2} / {:.2}",
                    ratio(across, floor),
                    burst_stats.efficiency,
                    stats.efficiency,
                    stats.fairness
                ),
                stats.efficiency,
            );
        }
    }
}

/// The HTTP layer on PostgreSQL against the same route without a lock (64 connections,
/// distinct keys, taking turns), and against the same route making two `SELECT 1`s per
/// request on the application's pool (what any lock of two statements per request costs
/// the server at least).
async fn http(pool: &PgPool, scale: Scale, redis: &Client, report: &mut Report) {
    let locks = LockManager::builder().backend(PostgresBackend::new(pool));
    let route = || Router::new().route("/k/{key}", post(|| async { "ok" }));
    let plain = serve(route()).await;
    let locked = serve(
        route().route_layer(
            LockLayer::by_path_param("key")
                .key_prefix("bench:s9:")
                .manager(locks),
        ),
    )
    .await;
    let selects = {
        let pool = pool.clone();
        let handler = move || {
            let pool = pool.clone();
            async move {
                for _ in 0..2 {
                    sqlx::query("SELECT 1")
                        .execute(&pool)
                        .await
                        .expect("SELECT 1");
                }
                "ok"
            }
        };
        serve(Router::new().route("/k/{key}", post(handler))).await
    };
    let clients = http_clients(64);
    let sequence = Arc::new(AtomicU64::new(0));
    let measured = parallel_rounds(
        &clients,
        &[plain, locked, selects],
        &sequence,
        scale.s4_parallel,
        redis,
    )
    .await;
    let r = measured.rate(1) / measured.rate(0);
    let floor = measured.rate(2) / measured.rate(0);
    report.goal(
        "S9 PostgreSQL HTTP 64 connections",
        "requests/s with the LockLayer on PostgreSQL ÷ without a lock",
        format!("{:.0} / {:.0} = {r:.2}", measured.rate(1), measured.rate(0)),
        r,
        "≥ 0.5",
        r >= 0.5,
    );
    report.add(
        "S9 PostgreSQL HTTP 64 connections",
        "the same route making two SELECT 1 per request on the pool ÷ without (the floor of two statements)",
        format!("{:.0} / {:.0} = {floor:.2}", measured.rate(2), measured.rate(0)),
        floor,
    );
}
