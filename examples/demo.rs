//! The tower-lock demo: concurrent HTTP requests against an axum app that locks on the
//! order id, and a timeline that shows what the lock did.
//!
//! ```text
//! cargo run --example demo                          # embedded in-memory backend
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example demo   # on Redis
//! DATABASE_URL=postgres://app@localhost/app cargo run --features postgres --example demo   # on PostgreSQL
//! ZOOKEEPER_HOSTS=127.0.0.1:2181 cargo run --features zookeeper --example demo   # on ZooKeeper
//! ```

use std::io::Write;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Path;
use axum::routing::post;
use axum::{Extension, Router};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower_lock::layer::LockLayer;
use tower_lock::LockManager;

/// Simulated work per payment.
const WORK: Duration = Duration::from_millis(150);
/// Milliseconds per timeline column.
const MS_PER_COLUMN: u128 = 15;

#[derive(Clone, Debug)]
struct Span {
    order: String,
    request: usize,
    start: Duration,
    end: Duration,
}

type Timeline = Arc<Mutex<Vec<Span>>>;

async fn pay(
    Path((order, request)): Path<(String, usize)>,
    Extension(started): Extension<Instant>,
    Extension(timeline): Extension<Timeline>,
) -> String {
    let start = started.elapsed();
    tokio::time::sleep(WORK).await;
    let end = started.elapsed();
    timeline.lock().unwrap().push(Span {
        order: order.clone(),
        request,
        start,
        end,
    });
    format!("order {order} paid by request {request}\n")
}

/// A manager on PostgreSQL at `url`.
#[cfg(feature = "postgres")]
async fn postgres(url: &str) -> Result<LockManager, String> {
    let backend = tower_lock::backend::PostgresBackend::connect(url)
        .await
        .map_err(|error| error.to_string())?;
    Ok(LockManager::builder().backend(backend))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_url: &str) -> Result<LockManager, String> {
    Err("the demo was built without PostgreSQL: run it with `--features postgres`".into())
}

/// A manager on the ZooKeeper servers at `hosts`.
#[cfg(feature = "zookeeper")]
async fn zookeeper(hosts: &str) -> Result<LockManager, String> {
    let backend = tower_lock::backend::ZooKeeperBackend::connect(hosts)
        .await
        .map_err(|error| error.to_string())?;
    Ok(LockManager::builder().backend(backend))
}

#[cfg(not(feature = "zookeeper"))]
async fn zookeeper(_hosts: &str) -> Result<LockManager, String> {
    Err("the demo was built without ZooKeeper: run it with `--features zookeeper`".into())
}

#[tokio::main]
async fn main() -> ExitCode {
    let hosts = std::env::var("ZOOKEEPER_HOSTS").unwrap_or_default();
    let locks = match (std::env::var("REDIS_URL"), std::env::var("DATABASE_URL")) {
        _ if !hosts.is_empty() => match zookeeper(&hosts).await {
            Ok(locks) => {
                println!("backend: ZooKeeper at {hosts}");
                locks
            }
            Err(error) => {
                eprintln!("cannot use ZooKeeper at {hosts}: {error}");
                return ExitCode::FAILURE;
            }
        },
        (Ok(url), _) if !url.is_empty() => match LockManager::redis(&url).await {
            Ok(locks) => {
                println!("backend: Redis at {url}");
                locks
            }
            Err(error) => {
                eprintln!("cannot use Redis at {url}: {error}");
                return ExitCode::FAILURE;
            }
        },
        (_, Ok(url)) if !url.is_empty() => match postgres(&url).await {
            Ok(locks) => {
                println!("backend: PostgreSQL at {url}");
                locks
            }
            Err(error) => {
                eprintln!("cannot use PostgreSQL at {url}: {error}");
                return ExitCode::FAILURE;
            }
        },
        _ => {
            println!(
                "backend: embedded in-memory (set REDIS_URL to use Redis, DATABASE_URL for \
                 PostgreSQL, ZOOKEEPER_HOSTS for ZooKeeper)"
            );
            LockManager::memory()
        }
    };
    let started = Instant::now();
    let timeline: Timeline = Arc::default();
    let app = Router::new()
        .route("/orders/{orderId}/pay/{request}", post(pay))
        .route_layer(
            LockLayer::by_path_param("orderId")
                .key_prefix("demo:order:")
                .manager(locks),
        )
        .layer(Extension(started))
        .layer(Extension(timeline.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    println!("app: http://{addr}  route: POST /orders/{{orderId}}/pay/{{request}}  layer: LockLayer::by_path_param(\"orderId\")");
    println!("work per request: {} ms\n", WORK.as_millis());

    // Four payments of order A and of order B at once, plus four single orders.
    let mut requests = Vec::new();
    for order in ["A", "B"] {
        for request in 1..=4 {
            requests.push((order.to_owned(), request));
        }
    }
    for order in ["C", "D", "E", "F"] {
        requests.push((order.to_owned(), 1));
    }
    let total = requests.len();
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
    for (order, request) in requests {
        let (client, done_tx) = (client.clone(), done_tx.clone());
        tokio::spawn(async move {
            let uri = format!("http://{addr}/orders/{order}/pay/{request}");
            let req = http::Request::post(uri)
                .body(Empty::new())
                .expect("request");
            let result = match client.request(req).await {
                Ok(response) => {
                    let status = response.status();
                    let _ = response.into_body().collect().await;
                    Ok(status)
                }
                Err(error) => Err(error.to_string()),
            };
            let _ = done_tx.send((order, request, result));
        });
    }
    drop(done_tx);
    let mut failures = Vec::new();
    let mut answered = 0;
    while let Some((order, request, result)) = done.recv().await {
        answered += 1;
        match result {
            Ok(status) if status.is_success() => {}
            Ok(status) => failures.push(format!("order {order} request {request}: HTTP {status}")),
            Err(error) => failures.push(format!("order {order} request {request}: {error}")),
        }
        print!("\rrequests answered: {answered}/{total}");
        let _ = std::io::stdout().flush();
    }
    println!("\n");

    let mut spans = timeline.lock().unwrap().clone();
    spans.sort_by(|a, b| a.order.cmp(&b.order).then(a.start.cmp(&b.start)));
    println!("timeline (one column = {MS_PER_COLUMN} ms; # = inside the handler, holding the order's lock)");
    for span in &spans {
        let from = (span.start.as_millis() / MS_PER_COLUMN) as usize;
        let to = (span.end.as_millis() / MS_PER_COLUMN).max(from as u128 + 1) as usize;
        println!(
            "  order {} request {} |{}{}",
            span.order,
            span.request,
            " ".repeat(from),
            "#".repeat(to - from)
        );
    }

    // Same order: never two at once. Different orders: at the same time.
    let overlaps = |a: &Span, b: &Span| a.start < b.end && b.start < a.end;
    let same_order_overlaps = spans
        .iter()
        .enumerate()
        .flat_map(|(i, a)| spans[i + 1..].iter().map(move |b| (a, b)))
        .filter(|(a, b)| a.order == b.order && overlaps(a, b))
        .count();
    let most_at_once = spans
        .iter()
        .map(|a| spans.iter().filter(|b| overlaps(a, b)).count())
        .max()
        .unwrap_or(0);
    let span_of = |order: &str| {
        let of: Vec<_> = spans.iter().filter(|s| s.order == order).collect();
        let first = of.iter().map(|s| s.start).min().unwrap_or_default();
        let last = of.iter().map(|s| s.end).max().unwrap_or_default();
        (of.len(), last.saturating_sub(first))
    };

    println!("\nsummary");
    for order in ["A", "B"] {
        let (count, took) = span_of(order);
        println!(
            "  order {order}: {count} concurrent payments ran one after another in {} ms (≈ {count} × {} ms)",
            took.as_millis(),
            WORK.as_millis()
        );
    }
    println!("  same order overlapping in the handler: {same_order_overlaps} (must be 0)");
    println!("  different orders in the handler at once: up to {most_at_once} (parallel)");
    println!("  failed requests: {}", failures.len());
    for failure in &failures {
        println!("    {failure}");
    }
    let ok =
        failures.is_empty() && same_order_overlaps == 0 && most_at_once > 1 && spans.len() == total;
    println!(
        "\n{}",
        if ok {
            "OK: the lock serialised each order and let different orders run in parallel."
        } else {
            "FAILED"
        }
    );
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
