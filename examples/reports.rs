//! A report service behind `CoalesceLayer`: when many clients ask for the same report at
//! once, on any number of instances, the report is computed once and every one of them
//! gets it.
//!
//! ```text
//! cargo run --example reports                 # in memory; REDIS_URL=redis://… for Redis
//! ```
//! Listens on 127.0.0.1:3003 (`PORT` overrides; `0` picks a free port). Computing a report
//! takes `WORK_MS` (200). `GET /reports/{name}` is coalesced; `GET /mine` answers
//! `Cache-Control: private` (never shared); `GET /flaky` answers `503` (never shared: the
//! next waiter computes it); `GET /computed` says how many reports this instance computed.
//! `WAIT_MS` is how long a request waits for another's computation (5000), `LEASE_MS` the
//! lease of a computing request's lock (30000).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tower_lock::coalesce::CoalesceLayer;
use tower_lock::LockManager;

#[derive(Clone)]
struct Reports {
    work: Duration,
    computed: Arc<AtomicU64>,
    instance: u32,
}

impl Reports {
    async fn compute(&self) -> u64 {
        let n = self.computed.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::time::sleep(self.work).await;
        n
    }
}

async fn report(State(reports): State<Reports>, Path(name): Path<String>) -> String {
    let n = reports.compute().await;
    format!(
        "report {name}, computation {n} of instance {}\n",
        reports.instance
    )
}

async fn mine(State(reports): State<Reports>) -> impl IntoResponse {
    let n = reports.compute().await;
    (
        [(header::CACHE_CONTROL, "private")],
        format!("your report, computation {n}\n"),
    )
}

async fn flaky(State(reports): State<Reports>) -> impl IntoResponse {
    reports.compute().await;
    (StatusCode::SERVICE_UNAVAILABLE, "try again\n")
}

async fn computed(State(reports): State<Reports>) -> String {
    reports.computed.load(Ordering::SeqCst).to_string()
}

fn millis(name: &str, default: u64) -> Result<Duration, String> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .map(Duration::from_millis)
            .map_err(|_| format!("{name} must be a number of milliseconds, not `{value}`")),
        Err(_) => Ok(Duration::from_millis(default)),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => LockManager::builder().redis(&url).await?,
        _ => LockManager::memory(),
    };
    let reports = Reports {
        work: millis("WORK_MS", 200)?,
        computed: Arc::default(),
        instance: std::process::id(),
    };
    let coalesce = CoalesceLayer::new()
        .namespace("reports")
        .wait(millis("WAIT_MS", 5000)?)
        .lease(millis("LEASE_MS", 30_000)?)
        .manager(locks);
    let app = Router::new()
        .route("/reports/{name}", get(report))
        .route("/mine", get(mine))
        .route("/flaky", get(flaky))
        .route_layer(coalesce)
        .route("/computed", get(computed))
        .with_state(reports);
    let port: u16 = match std::env::var("PORT") {
        Ok(port) => port
            .parse()
            .map_err(|_| format!("PORT must be a port number, not `{port}`"))?,
        Err(_) => 3003,
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let base = format!("http://{}", listener.local_addr()?);
    println!("report service on {base}");
    println!("try, in two terminals at once:");
    println!("  curl -i {base}/reports/daily   # one computation; the other is marked Cache-Status: …; collapsed");
    axum::serve(listener, app).await?;
    Ok(())
}
