//! Request coalescing: [`CoalesceLayer`] runs a handler once for concurrent identical
//! requests, across every process that shares the lock backend, and answers them all with
//! its response.
//!
//! When a popular resource is requested by many clients at once (a cache entry expired, a
//! report polled by a hundred dashboards), every instance of a service would run the same
//! expensive handler. With this layer, the first request with a key leads: it holds the
//! key's lock while the handler runs. The requests of the same key in its process wait for
//! it in memory; those of other processes wait for the lock, woken by pub/sub. The
//! leader's response is handed to its process's waiters and left with the lock's release
//! (one backend step) for the others', marked `Cache-Status: tower-lock; fwd=miss;
//! collapsed` (RFC 9211).
//!
//! It is not a cache and not a lock: a response is kept only for the requests that
//! overlapped its execution (or a [`window`](CoalesceLayer::window) you choose), and a
//! request whose wait ends runs the handler itself. Requests with credentials are not
//! coalesced unless the layer has a [`scope`](CoalesceLayer::scope); responses that say
//! `private` or `no-store`, set a cookie, are too large, or say "try again" (`5xx`, `429`)
//! are not shared. See `docs/coalescing.md` for the rules and how they compare with nginx,
//! Varnish, Fastly and singleflight.
//!
//! ```
//! use axum::{routing::get, Router};
//! use tower_lock::coalesce::CoalesceLayer;
//! use tower_lock::LockManager;
//!
//! # async fn report() -> &'static str { "the report" }
//! let locks = LockManager::memory();
//! let app: Router = Router::new()
//!     .route("/reports/daily", get(report))
//!     .route_layer(CoalesceLayer::new().namespace("reports").manager(locks));
//! # let _ = app;
//! ```

mod config;
mod flight;
mod key;
mod layer;
mod outcome;
mod rejection;
mod run;
mod service;

pub use config::{OnUnavailable, OnWaitEnd};
pub use layer::{
    CoalesceLayer, DEFAULT_COALESCE_LEASE, DEFAULT_COALESCE_WAIT, DEFAULT_SHARE_LIMIT,
};
pub use outcome::{CACHE_STATUS, SHARED_CACHE_STATUS};
pub use rejection::CoalesceRejection;
pub use service::{Coalesce, CoalesceResponseFuture};
