//! `ReadLocked<K>` and `WriteLocked<K>`: the read and write sides of a read-write lock, as
//! Axum extractors.

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

/// Extracts `K` and holds the **read** side of its read-write lock while the handler runs:
/// requests that read the same key run at once; one that writes it waits (see
/// [`LockManager::read_lock`](crate::LockManager::read_lock)). Otherwise as
/// [`Locked<K>`](crate::extract::Locked): same manager lookup, statuses and release.
///
/// Under a [`LockLayer`](crate::layer::LockLayer) that holds the same key, it takes another hold
/// of the layer's lock: a read hold reenters, a write hold also gives a read hold (a
/// downgrade); a plain lock cannot, and is answered 500 naming the mistake.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use axum::{routing::get, Extension, Router};
/// use tower_lock::extract::{KeySource, Lockable, ReadLocked};
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
/// async fn show(ReadLocked(order): ReadLocked<OrderId>) -> String {
///     // Other reads of this order run now too; no write does.
///     format!("order {}", order.0)
/// }
///
/// let app = Router::new()
///     .route("/orders/{orderId}", get(show))
///     .layer(Extension(LockManager::memory()));
/// # let response = app.oneshot(http::Request::get("/orders/7").body(axum::body::Body::empty()).unwrap()).await.unwrap();
/// # assert_eq!(response.status(), 200);
/// # }
/// ```
pub struct ReadLocked<K>(pub Held<K>);

/// Extracts `K` and holds the **write** side of its read-write lock while the handler
/// runs: no other request reads or writes the same key meanwhile (see
/// [`LockManager::write_lock`](crate::LockManager::write_lock)). Otherwise as
/// [`Locked<K>`](crate::extract::Locked).
///
/// Under a [`LockLayer`](crate::layer::LockLayer) that holds the same key, a write hold reenters;
/// a read hold cannot become a write hold (that would deadlock two readers): the request is
/// answered 500 with [`LockRejection::KindMismatch`], which names the fix (have the layer
/// take the write lock for this route, e.g. with
/// [`read_write_by_method`](crate::layer::LockLayer::read_write_by_method) on a non-GET route).
pub struct WriteLocked<K>(pub Held<K>);

locked_extractor!(ReadLocked, LockKind::Read);
locked_extractor!(WriteLocked, LockKind::Write);
