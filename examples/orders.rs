//! A small order service: pay and refund under a per-order lock.
//!
//! ```text
//! cargo run --example orders                 # in memory; REDIS_URL=redis://… for Redis
//! ```
//! Listens on 127.0.0.1:3000 (`PORT` overrides) until Ctrl-C; a graceful shutdown lets
//! running requests finish, and each releases its lock as it completes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Extension, Router};
use tower_lock::extract::{KeySource, Lockable, Locked};
use tower_lock::layer::LockLayer;
use tower_lock::LockManager;

/// Simulated payment work, long enough to see two payments of one order queue up.
const PAYMENT_WORK: Duration = Duration::from_secs(2);

/// An order number from the path; its lock is `order:<n>`.
#[derive(Debug, Clone, Copy)]
struct OrderId(u64);

impl Lockable for OrderId {
    fn source() -> KeySource {
        KeySource::path("orderId")
    }
    fn parse(raw: &str) -> Result<Self, String> {
        raw.parse()
            .map(OrderId)
            .map_err(|_| format!("`{raw}` is not an order number"))
    }
    fn lock_name(&self) -> String {
        format!("order:{}", self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Status {
    Open,
    Paid,
    Refunded,
}

type Orders = Arc<Mutex<HashMap<u64, Status>>>;

fn status_of(orders: &Orders, id: u64) -> Status {
    *orders.lock().unwrap().get(&id).unwrap_or(&Status::Open)
}

/// Runs under `LockLayer::for_key::<OrderId>()`: one payment per order at a time, so the
/// check-then-pay below cannot charge twice.
async fn pay(Path(id): Path<u64>, Extension(orders): Extension<Orders>) -> (StatusCode, String) {
    if status_of(&orders, id) != Status::Open {
        return (
            StatusCode::CONFLICT,
            format!("order {id} is already {:?}\n", status_of(&orders, id)),
        );
    }
    tokio::time::sleep(PAYMENT_WORK).await; // talk to the payment provider
    orders.lock().unwrap().insert(id, Status::Paid);
    (StatusCode::OK, format!("order {id} paid\n"))
}

/// Holds the order's lock through the `Locked` extractor instead of the layer.
async fn refund(
    Locked(order): Locked<OrderId>,
    Extension(orders): Extension<Orders>,
) -> (StatusCode, String) {
    let id = order.0;
    if status_of(&orders, id) != Status::Paid {
        return (
            StatusCode::CONFLICT,
            format!(
                "order {id} is {:?}: nothing to refund\n",
                status_of(&orders, id)
            ),
        );
    }
    orders.lock().unwrap().insert(id, Status::Refunded);
    (
        StatusCode::OK,
        format!("order {id} refunded (lock {})\n", order.key()),
    )
}

async fn show(Path(id): Path<u64>, Extension(orders): Extension<Orders>) -> String {
    format!("order {id}: {:?}\n", status_of(&orders, id))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => LockManager::redis(&url).await?,
        _ => LockManager::memory(),
    };
    let port: u16 = match std::env::var("PORT") {
        Ok(port) => port
            .parse()
            .map_err(|_| format!("PORT must be a port number, not `{port}`"))?,
        Err(_) => 3000,
    };
    let app = Router::new()
        .route("/orders/{orderId}/pay", post(pay))
        .route_layer(
            LockLayer::for_key::<OrderId>()
                .wait(Duration::from_secs(10))
                .manager(locks.clone()),
        )
        .route("/orders/{orderId}/refund", post(refund))
        .route("/orders/{orderId}", get(show))
        .layer(Extension(Orders::default()))
        // For the `Locked<OrderId>` extractor of the refund route (no layer there).
        .layer(Extension(locks.clone()));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let base = format!("http://{}", listener.local_addr()?);
    println!("orders service on {base} (locks: {})", locks.backend_name());
    println!("try, in another terminal:");
    println!("  curl -X POST {base}/orders/1/pay & curl -X POST {base}/orders/1/pay; wait");
    println!("      (the second payment waits for the first, then finds the order paid: 409)");
    println!("  curl -X POST {base}/orders/1/refund");
    println!("  curl {base}/orders/1");
    println!("Ctrl-C stops the service after running requests finish.");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
            println!("\nshutting down: finishing running requests (their locks are released)");
        })
        .await?;
    Ok(())
}
