//! Axum extractors: a handler that takes [`Locked<K>`] runs under the lock of the value `K`
//! names (an order id from the path, say); [`ReadLocked`], [`WriteLocked`], [`FairLocked`],
//! [`FencedLocked`] take the other kinds, [`Permit`] a semaphore's permit, [`MultiLocked`]
//! several values at once. What a
//! [`LockLayer`](crate::layer::LockLayer) holds for a request is in its extensions as a
//! [`HeldLock`] (one key) or a [`HeldMultiLock`] (several).
//!
//! ```
//! use axum::{routing::post, Router};
//! use tower_lock::extract::{KeySource, Lockable, Locked};
//! use tower_lock::LockManager;
//!
//! struct OrderId(u64);
//!
//! impl Lockable for OrderId {
//!     fn source() -> KeySource {
//!         KeySource::path("orderId")
//!     }
//!     fn parse(raw: &str) -> Result<Self, String> {
//!         raw.parse().map(OrderId).map_err(|_| format!("`{raw}` is not an order number"))
//!     }
//!     fn lock_name(&self) -> String {
//!         format!("order:{}", self.0)
//!     }
//! }
//!
//! async fn pay(Locked(order): Locked<OrderId>) -> String {
//!     format!("paid order {}", order.0) // no other request for this order runs now
//! }
//!
//! let app: Router = Router::new()
//!     .route("/orders/{orderId}/pay", post(pay))
//!     .layer(axum::Extension(LockManager::memory()));
//! ```

pub use crate::http::{
    FairLocked, FencedLocked, Held, HeldLock, HeldMultiLock, KeySource, Limited, LockManagerState,
    Lockable, Locked, MultiLocked, Permit, ReadLocked, WriteLocked,
};
