//! Idempotent requests: [`IdempotencyLayer`] runs a request's handler once per idempotency
//! key, and answers every repetition of the request with the first one's response.
//!
//! It is built on the lock: the first request with a key holds the key's lock while its
//! handler runs (renewed by the watchdog); its response is stored with the lock's release,
//! in one Redis step and only if the lock is still its own. A repetition that arrives while
//! the first runs waits for it by pub/sub and gets its response (or, with
//! [`OnConcurrent::Conflict`], a `409` at once); one that arrives later gets the stored
//! response, byte for byte, marked `Idempotent-Replayed: true`. The same key with a
//! different request is a `422`. Keys follow the IETF `Idempotency-Key` draft (the header,
//! as an sf-string or bare) or come from another header (`X-GitHub-Delivery`, `webhook-id`),
//! the request head or the body (Stripe's event id). See `docs/idempotency.md` for the
//! status codes, what is stored and for how long, and what a crash or a hang-up does.
//!
//! ```
//! use axum::{routing::post, Router};
//! use tower_lock::idempotency::IdempotencyLayer;
//! use tower_lock::LockManager;
//!
//! # async fn pay() -> &'static str { "paid" }
//! # async fn github() -> &'static str { "ok" }
//! let locks = LockManager::memory();
//! let app: Router = Router::new()
//!     // `Idempotency-Key: "…"` required on POST and PATCH.
//!     .route("/payments", post(pay))
//!     .route_layer(IdempotencyLayer::new().namespace("payments").manager(locks.clone()))
//!     // GitHub's delivery id.
//!     .route("/hooks/github", post(github))
//!     .route_layer(
//!         IdempotencyLayer::header("x-github-delivery")
//!             .namespace("github")
//!             .manager(locks),
//!     );
//! # let _ = app;
//! ```

pub(crate) mod capture;
mod config;
pub(crate) mod key;
pub(crate) mod layer;
pub(crate) mod rejection;
pub(crate) mod run;
mod service;
pub(crate) mod stored;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod transaction;

pub use config::OnConcurrent;
pub use key::{DEFAULT_MAX_KEY_LEN, IDEMPOTENCY_KEY};
pub use layer::{IdempotencyLayer, DEFAULT_RETENTION, DEFAULT_STORE_LIMIT};
pub use rejection::IdempotencyRejection;
pub use service::{Idempotency, IdempotencyResponseFuture};
pub use stored::IDEMPOTENT_REPLAYED;
#[cfg(feature = "mysql")]
pub use transaction::IdempotentMySqlTransaction;
#[cfg(feature = "postgres")]
pub use transaction::IdempotentTransaction;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub use transaction::{IdempotentDbTransaction, Transactions};

/// Put in the request extensions for the handler: the idempotency key it runs under, as the
/// layer reads it: a quoted header value (`"8e03…"`, the draft's sf-string) without its
/// quotes and with its escapes undone (`"a\"b"` gives `a"b`), a bare one as sent, or what
/// the layer's key function returned; without the namespace and scope. Two header values
/// that give the same key here are the same key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(pub String);

/// Put in a response's extensions by a handler: this response is not stored (a retry with
/// the same key runs the handler again). A `Cache-Control: no-store` response header does
/// the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoNotStore;
