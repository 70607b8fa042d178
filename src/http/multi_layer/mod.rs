//! `MultiLockLayer`: Tower middleware that runs each request under several locks named by
//! the request, held together as one [multi-lock](crate::LockManager::multi_lock).
//!
//! Moving money between two accounts must hold both: `/transfers/{from}/{to}` locks
//! `account:<from>` and `account:<to>`. The keys are taken in one canonical order (sorted),
//! so a transfer 7 → 9 and a transfer 9 → 7 never wait for each other in a circle; all or
//! nothing (a busy key after the wait answers 409 and leaves the other keys free); a key
//! named twice (`/transfers/7/7`) is taken once. While the handler runs, every key is kept
//! alive, and the request carries a [`HeldMultiLock`](crate::HeldMultiLock); when the
//! response is ready (or the request is dropped) all are released.
//!
//! Everything else is as [`LockLayer`](crate::LockLayer): the same failure answers (busy
//! 409 with `Retry-After`, missing or bad key 400, backend down 503, no manager 500), the
//! body read before the locks are taken, the same options. Add it with
//! `Router::route_layer` (path parameters exist only after routing).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use axum::{extract::Path, routing::post, Router};
//! use tower_lock::{LockManager, MultiLockLayer};
//! # use tower::ServiceExt;
//!
//! async fn transfer(Path((from, to)): Path<(u64, u64)>) -> String {
//!     // No other transfer touching account `from` or account `to` runs now.
//!     format!("moved money from {from} to {to}")
//! }
//!
//! let app = Router::new()
//!     .route("/transfers/{from}/{to}", post(transfer))
//!     .route_layer(
//!         MultiLockLayer::by_path_params("account:", ["from", "to"]).manager(LockManager::memory()),
//!     );
//! # let response = app.oneshot(http::Request::post("/transfers/7/9").body(axum::body::Body::empty()).unwrap()).await.unwrap();
//! # assert_eq!(response.status(), 200);
//! # }
//! ```

mod future;
mod keys;
mod service;
mod start;

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use tower_layer::Layer;

pub use future::MultiLockResponseFuture;
pub use service::MultiLock;

use crate::engine::LockManager;
use crate::http::key_source::KeySource;
use crate::http::layer::options::{layer_options, LayerOptions};
use crate::http::layer::Naming;
use keys::MultiKeySource;

/// The most names a [`MultiLockLayer::by_fn`] function may return for one request, by
/// default (see [`MultiLockLayer::max_keys`]).
pub const DEFAULT_MAX_KEYS: usize = 16;

/// Applies [`MultiLock`] to a service. See the [module docs](crate::multi_layer).
///
/// Defaults as [`LockLayer`](crate::LockLayer)'s: wait 10 s in all (the manager's), lease
/// 30 s renewed while the handler runs (the manager's), busy → 409 with `Retry-After: 1`,
/// missing key → 400, backend down → 503 (fail closed), lock lost → keep going; at most
/// [`DEFAULT_MAX_KEYS`] names per request from a [`by_fn`](MultiLockLayer::by_fn) function. The locks are plain locks (Redisson's `RLock`
/// layout), one per key.
#[derive(Clone)]
pub struct MultiLockLayer {
    config: Arc<MultiConfig>,
}

#[derive(Clone)]
pub(crate) struct MultiConfig {
    pub(crate) keys: MultiKeySource,
    pub(crate) max_keys: usize,
    pub(crate) options: LayerOptions,
}

impl MultiLockLayer {
    fn with_keys(keys: MultiKeySource) -> Self {
        MultiLockLayer {
            config: Arc::new(MultiConfig {
                keys,
                max_keys: DEFAULT_MAX_KEYS,
                options: LayerOptions::default(),
            }),
        }
    }

    /// Locks on the values of several key sources, each named `<prefix><value>` (`%`, `{`
    /// and `}` in a value percent-escaped, as `LockLayer` does). One prefix for all: the
    /// values name the same kind of thing, so that `/transfers/7/9` and `/transfers/9/7`
    /// lock the same two keys.
    ///
    /// # Panics
    /// When `sources` is empty (a layer that locks nothing is a mistake in the router's
    /// setup, found when it is built).
    pub fn new(prefix: impl Into<String>, sources: impl IntoIterator<Item = KeySource>) -> Self {
        let sources: Arc<[KeySource]> = sources.into_iter().collect();
        assert!(
            !sources.is_empty(),
            "MultiLockLayer::new needs at least one key source"
        );
        Self::with_keys(MultiKeySource::Sources {
            sources,
            naming: Naming::Prefixed(prefix.into().into()),
        })
    }

    /// Locks on several path parameters of the matched route, e.g. `["from", "to"]` for
    /// `/transfers/{from}/{to}`, each named `<prefix><value>` (see [`new`](Self::new)).
    ///
    /// # Panics
    /// When `params` is empty.
    pub fn by_path_params<I>(prefix: impl Into<String>, params: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        Self::new(prefix, params.into_iter().map(KeySource::path))
    }

    /// Locks on the names `f` returns for the request's parts, under the manager's prefix,
    /// with `%`, `{` and `}` percent-escaped as [`LockLayer::by_fn`](crate::LockLayer::by_fn)
    /// does (request input never makes a Redis Cluster hash tag); `None` or no names means missing (400, or unlocked with
    /// [`allow_missing_key`](Self::allow_missing_key)). More than
    /// [`max_keys`](Self::max_keys) names is a 400; an invalid name (empty, too long) too.
    ///
    /// ```
    /// use tower_lock::MultiLockLayer;
    ///
    /// // `POST /orders/merge?into=7&from=9`: both orders are locked.
    /// let layer = MultiLockLayer::by_fn(|parts| {
    ///     let query = parts.uri.query()?;
    ///     let names = query
    ///         .split('&')
    ///         .filter_map(|pair| pair.split_once('='))
    ///         .filter(|(key, _)| *key == "into" || *key == "from")
    ///         .map(|(_, id)| format!("order:{id}"))
    ///         .collect();
    ///     Some(names)
    /// });
    /// # let _ = layer;
    /// ```
    pub fn by_fn(f: impl Fn(&Parts) -> Option<Vec<String>> + Send + Sync + 'static) -> Self {
        Self::with_keys(MultiKeySource::Names(Arc::new(f)))
    }

    fn options_mut(&mut self) -> &mut LayerOptions {
        &mut Arc::make_mut(&mut self.config).options
    }

    /// The most names [`by_fn`](Self::by_fn)'s function may return for one request
    /// (counted before duplicates are dropped; default [`DEFAULT_MAX_KEYS`]); a request
    /// naming more is answered 400 before any lock is asked for. Bounds what a request can
    /// make the layer do. (Key sources give one key each: as many as the layer has.)
    pub fn max_keys(mut self, max: usize) -> Self {
        Arc::make_mut(&mut self.config).max_keys = max;
        self
    }

    /// Locks with this manager instead of one from the request extensions (no `Extension`
    /// layer needed). Extractors behind the layer ([`Locked<K>`](crate::Locked) entering
    /// one of its keys, for instance) find it through the request's
    /// [`HeldMultiLock`](crate::HeldMultiLock).
    pub fn manager(mut self, manager: LockManager) -> Self {
        self.options_mut().manager = Some(manager);
        self
    }

    layer_options!();
}

impl<S> Layer<S> for MultiLockLayer {
    type Service = MultiLock<S>;

    fn layer(&self, inner: S) -> Self::Service {
        MultiLock::new(inner, self.config.clone())
    }
}

impl fmt::Debug for MultiLockLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLockLayer")
            .field("keys", &self.config.keys)
            .field("max_keys", &self.config.max_keys)
            .field("wait", &self.config.options.wait)
            .field("lease", &self.config.options.lease)
            .finish()
    }
}
