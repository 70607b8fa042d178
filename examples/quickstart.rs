use axum::{routing::post, Extension, Router};
use tower_lock::extract::{KeySource, Lockable, Locked};
use tower_lock::layer::LockLayer;
use tower_lock::LockManager;

/// An order number from the path; its lock is `order:<n>`.
pub struct OrderId(u64);

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

/// Runs under the layer's lock.
async fn pay() -> &'static str {
    "paid"
}

/// Holds `order:<n>` through the extractor until it returns.
async fn refund(Locked(order): Locked<OrderId>) -> String {
    format!("refunded {}", order.0)
}

/// Both routes lock `order:<n>`: the layer names its locks like the extractor
/// (`for_key::<OrderId>()`), so a payment and a refund of one order never run at once.
pub fn app(locks: LockManager) -> Router {
    Router::new()
        .route("/orders/{orderId}/pay", post(pay))
        .route_layer(LockLayer::for_key::<OrderId>().manager(locks.clone()))
        .route("/orders/{orderId}/refund", post(refund))
        .layer(Extension(locks)) // the manager, for the extractor
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = match std::env::var("REDIS_URL") {
        Ok(url) => LockManager::redis(&url).await?,
        Err(_) => LockManager::memory(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    axum::serve(listener, app(locks)).await?;
    Ok(())
}
