//! `FairLocked<K>`: the fair lock as an Axum extractor.

use std::fmt;
use std::ops::Deref;

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use http::request::Parts;

use crate::engine::{LockGuard, LossSignal};
use crate::http::locked::{lock_value, locked_extractor, Held, Lockable};
use crate::http::manager_state::LockManagerState;
use crate::http::rejection::LockRejection;
use crate::key::LockKey;
use crate::kind::LockKind;

/// Extracts `K` and holds its **fair** lock while the handler runs: requests for the same
/// key get in one at a time, in the order they arrived, across every process (see
/// [`LockManager::fair_lock`](crate::LockManager::fair_lock)). Otherwise as
/// [`Locked<K>`](crate::extract::Locked): same manager lookup, statuses and release; a request
/// whose wait ends, or that is dropped, leaves the queue.
///
/// Under a [`LockLayer`](crate::layer::LockLayer) that holds the same key with
/// [`fair`](crate::layer::LockLayer::fair), it reenters the layer's hold; under a layer that holds
/// another kind of lock on the key, the request is answered 500 with
/// [`LockRejection::KindMismatch`], which names the fix.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use axum::{routing::post, Extension, Router};
/// use tower_lock::extract::{FairLocked, KeySource, Lockable};
/// use tower_lock::LockManager;
/// # use tower::ServiceExt;
///
/// struct OrderId(u64);
/// impl Lockable for OrderId {
///     fn source() -> KeySource { KeySource::path("orderId") }
///     fn parse(raw: &str) -> Result<Self, String> {
///         raw.parse().map(OrderId).map_err(|_| format!("`{raw}` is not an order number"))
///     }
///     fn lock_name(&self) -> String { format!("order:{}", self.0) }
/// }
///
/// async fn pay(FairLocked(order): FairLocked<OrderId>) -> String {
///     // Payments of this order run one at a time, first come first served.
///     format!("paid order {}", order.0)
/// }
///
/// let app = Router::new()
///     .route("/orders/{orderId}/payments", post(pay))
///     .layer(Extension(LockManager::memory()));
/// # let response = app.oneshot(http::Request::post("/orders/7/payments").body(axum::body::Body::empty()).unwrap()).await.unwrap();
/// # assert_eq!(response.status(), 200);
/// # }
/// ```
pub struct FairLocked<K>(pub Held<K>);

locked_extractor!(FairLocked, LockKind::Fair);
