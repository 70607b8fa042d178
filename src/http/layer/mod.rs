//! `LockLayer`: Tower middleware that runs each request under a lock named by the request.
//!
//! The layer reads a key from the request, waits for its lock, keeps the lease alive while
//! the inner service runs (a watchdog timer polled inside the response future; no task per
//! request), and releases the lock before handing the response back, so a client that
//! retries as soon as it has its answer never finds its own request still holding the lock.
//! If the response future is dropped (client gone, a timeout above), the lock is released
//! at once in the background.
//!
//! # Several keys
//! A request that must hold several locks at once — moving money between two accounts holds
//! both — names them with [`LockLayer::by_path_params`], [`LockLayer::by_sources`] or
//! [`LockLayer::by_names_fn`]. The keys are taken in one canonical order (sorted), so a
//! transfer 7 → 9 and a transfer 9 → 7 never wait for each other in a circle; all or
//! nothing (a busy key after the wait answers 409 and leaves the other keys free); a key
//! named twice (`/transfers/7/7`) is taken once. The request then carries a
//! [`HeldMultiLock`](crate::extract::HeldMultiLock) instead of a [`HeldLock`](crate::extract::HeldLock);
//! everything else (kinds, answers, options) is the same.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use axum::{extract::Path, routing::post, Router};
//! use tower_lock::layer::LockLayer;
//! use tower_lock::LockManager;
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
//!         LockLayer::by_path_params("account:", ["from", "to"]).manager(LockManager::memory()),
//!     );
//! # let response = app.oneshot(http::Request::post("/transfers/7/9").body(axum::body::Body::empty()).unwrap()).await.unwrap();
//! # assert_eq!(response.status(), 200);
//! # }
//! ```
//!
//! # Placement
//! Path parameters exist only after routing: add the layer with `Router::route_layer`, or
//! with `Router::layer` on a router of routes. A layer around the whole app (outside
//! routing) sees no parameters and answers 500 with this explanation.
//!
//! # The manager
//! Give the layer its manager with [`LockLayer::manager`]. Without one, it takes the
//! [`LockManager`] from the request extensions (`.layer(Extension(manager))` outside it),
//! and answers 500 when there is none.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use axum::{routing::post, Router};
//! use tower_lock::layer::LockLayer;
//! use tower_lock::LockManager;
//! # use tower::ServiceExt;
//!
//! async fn pay() -> &'static str {
//!     "paid" // never runs twice at once for the same order
//! }
//!
//! let locks = LockManager::memory(); // or LockManager::redis(url).await?
//! let app = Router::new()
//!     .route("/orders/{orderId}/pay", post(pay))
//!     .route_layer(LockLayer::by_path_param("orderId").manager(locks));
//! # let response = app.oneshot(http::Request::post("/orders/42/pay").body(axum::body::Body::empty()).unwrap()).await.unwrap();
//! # assert_eq!(response.status(), 200);
//! # }
//! ```

pub(crate) mod body;
#[cfg(feature = "idempotency")]
mod boxed_future;
mod either_body;
pub(crate) mod future;
mod keys;
mod kinds;
pub(crate) mod naming;
pub(crate) mod options;
mod request_body;
mod request_guard;
pub(crate) mod response_body;
mod service;
mod start;

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use tower_layer::Layer;

pub use body::{DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT};
#[cfg(feature = "idempotency")]
pub use boxed_future::BoxedResponseFuture;
pub use future::LockResponseFuture;
pub use keys::DEFAULT_MAX_KEYS;
pub use request_body::LockRequestBody;
pub use response_body::LockResponseBody;
pub use service::Lock;

use keys::LayerKeys;
pub(crate) use kinds::LayerKinds;
use naming::Naming;
use options::LayerOptions;

use crate::engine::LockManager;
use crate::http::key_source::KeySource;
use crate::http::locked::Lockable;
use crate::kind::KindSet;
use crate::telemetry::TARGET;

/// Applies [`Lock`] to a service. See the [module docs](crate::layer).
///
/// Defaults: wait 10 s (the manager's), lease 30 s renewed by a watchdog (the manager's),
/// key `<param>:<value>` (e.g. `orderId:42`; `%`, `{`, `}` in the value are
/// percent-escaped) under the manager's prefix, busy → 409, missing
/// key → 400, backend down → 503 (fail closed), lock lost → keep going; a busy answer
/// carries `Retry-After: 1`; at most [`DEFAULT_MAX_KEYS`] names per request from a
/// [`by_names_fn`](LockLayer::by_names_fn) function.
#[derive(Clone)]
pub struct LockLayer {
    config: Arc<LayerConfig>,
}

#[derive(Clone)]
pub(crate) struct LayerConfig {
    /// Where the keys come from, and how a raw value becomes a lock's name.
    pub(crate) keys: LayerKeys,
    /// Which kind of lock a request takes.
    pub(crate) kinds: LayerKinds,
    pub(crate) options: LayerOptions,
}

impl LockLayer {
    fn with_keys(keys: LayerKeys) -> Self {
        LockLayer {
            config: Arc::new(LayerConfig {
                keys,
                kinds: LayerKinds::Plain,
                options: LayerOptions::default(),
            }),
        }
    }

    /// Locks on a key read from `source`, named `<prefix><value>`.
    pub fn new(source: KeySource) -> Self {
        let prefix = source.default_prefix();
        Self::with_keys(LayerKeys::One {
            source,
            naming: Naming::Prefixed(prefix.into()),
        })
    }

    /// Locks on a path parameter of the matched route (key `<param>:<value>`, e.g.
    /// `orderId:42`). A [`Locked<K>`](crate::extract::Locked) extractor locks `K::lock_name()`
    /// instead, a different name: for a route whose lock must exclude an extractor's, use
    /// [`for_key`](Self::for_key).
    pub fn by_path_param(name: impl Into<String>) -> Self {
        Self::new(KeySource::path(name))
    }

    /// Locks on a header, e.g. `Idempotency-Key` (key `<header>:<value>`).
    pub fn by_header(name: impl AsRef<str>) -> Self {
        Self::new(KeySource::header(name))
    }

    /// Locks on a query parameter (key `<param>:<value>`).
    pub fn by_query(name: impl Into<String>) -> Self {
        Self::new(KeySource::query(name))
    }

    /// Locks on a key computed from the request parts; `None` means missing (400). The key
    /// is used as it is (no prefix unless [`key_prefix`](Self::key_prefix) sets one), but
    /// for `%`, `{` and `}`, percent-escaped as in every request value.
    pub fn by_fn(f: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static) -> Self {
        Self::new(KeySource::from_fn(f))
    }

    /// Locks on the same name as the [`Locked<K>`](crate::extract::Locked) extractor,
    /// `K::lock_name()` read from `K::source()`: a route under this layer and a route using
    /// the extractor exclude each other on the same value, and a handler using both enters
    /// the layer's lock again instead of waiting for itself.
    pub fn for_key<K: Lockable>() -> Self {
        Self::with_keys(LayerKeys::One {
            source: K::source(),
            naming: Naming::Parsed(Arc::new(|raw: &str| K::parse(raw).map(|k| k.lock_name()))),
        })
    }

    /// Locks on the values of several key sources together, each named `<prefix><value>`
    /// (`%`, `{` and `}` in a value percent-escaped). One prefix for all: the values name
    /// the same kind of thing, so that `/transfers/7/9` and `/transfers/9/7` lock the same
    /// two keys. See [several keys](crate::layer#several-keys).
    ///
    /// # Panics
    /// When `sources` is empty (a layer that locks nothing is a mistake in the router's
    /// setup, found when it is built).
    pub fn by_sources(
        prefix: impl Into<String>,
        sources: impl IntoIterator<Item = KeySource>,
    ) -> Self {
        let sources: Arc<[KeySource]> = sources.into_iter().collect();
        assert!(
            !sources.is_empty(),
            "LockLayer::by_sources needs at least one key source"
        );
        Self::with_keys(LayerKeys::Sources {
            sources,
            naming: Naming::Prefixed(prefix.into().into()),
        })
    }

    /// Locks on several path parameters of the matched route together, e.g.
    /// `["from", "to"]` for `/transfers/{from}/{to}`, each named `<prefix><value>` (see
    /// [`by_sources`](Self::by_sources)).
    ///
    /// # Panics
    /// When `params` is empty.
    pub fn by_path_params<I>(prefix: impl Into<String>, params: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        Self::by_sources(prefix, params.into_iter().map(KeySource::path))
    }

    /// Locks on the names `f` returns for the request's parts, together, under the
    /// manager's prefix, with `%`, `{` and `}` percent-escaped as [`by_fn`](Self::by_fn)
    /// does (request input never makes a Redis Cluster hash tag); `None` or no names means
    /// missing (400, or unlocked with [`allow_missing_key`](Self::allow_missing_key)). More
    /// than [`max_keys`](Self::max_keys) names is a 400; an invalid name (empty, too long)
    /// too.
    ///
    /// ```
    /// use tower_lock::layer::LockLayer;
    ///
    /// // `POST /orders/merge?into=7&from=9`: both orders are locked.
    /// let layer = LockLayer::by_names_fn(|parts| {
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
    pub fn by_names_fn(f: impl Fn(&Parts) -> Option<Vec<String>> + Send + Sync + 'static) -> Self {
        Self::with_keys(LayerKeys::Names {
            names: Arc::new(f),
            max: DEFAULT_MAX_KEYS,
        })
    }

    pub(super) fn config_mut(&mut self) -> &mut LayerConfig {
        Arc::make_mut(&mut self.config)
    }

    fn options_mut(&mut self) -> &mut LayerOptions {
        &mut self.config_mut().options
    }

    /// Names locks `<prefix><value>` instead of `<param>:<value>`, e.g. the route's name,
    /// so that keys of different routes never collide. (A layer of several key sources has
    /// its prefix from [`by_sources`](Self::by_sources); a names function's names are used
    /// as they are.)
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        let prefix: Arc<str> = prefix.into().into();
        match &mut self.config_mut().keys {
            LayerKeys::One { naming, .. } | LayerKeys::Sources { naming, .. } => {
                *naming = Naming::Prefixed(prefix);
            }
            LayerKeys::Names { .. } => {}
        }
        self
    }

    /// The most names [`by_names_fn`](Self::by_names_fn)'s function may return for one
    /// request (counted before duplicates are dropped; default [`DEFAULT_MAX_KEYS`]); a
    /// request naming more is answered 400 before any lock is asked for. Bounds what a
    /// request can make the layer do. (Key sources give one key each: as many as the layer
    /// has; this limit is for a names function only.)
    pub fn max_keys(mut self, max: usize) -> Self {
        if let LayerKeys::Names { max: limit, .. } = &mut self.config_mut().keys {
            *limit = max;
        }
        self
    }

    /// Locks with this manager instead of one from the request extensions: the
    /// recommended setup, with no `Extension` layer needed for the layer (and none of its
    /// cost per request).
    ///
    /// [`Locked<K>`](crate::extract::Locked) extractors behind the layer find the manager through
    /// the request's [`HeldLock`](crate::extract::HeldLock) or [`HeldMultiLock`](crate::extract::HeldMultiLock)
    /// (and, on a request that runs unlocked, in the extensions). It is not put in the
    /// extensions of the requests it locks: handlers that take `Extension<LockManager>`
    /// need `.layer(Extension(manager))`.
    pub fn manager(mut self, manager: LockManager) -> Self {
        self.options_mut().manager = Some(manager);
        self
    }
}

impl<S> Layer<S> for LockLayer {
    type Service = Lock<S>;

    fn layer(&self, inner: S) -> Self::Service {
        if let Some(manager) = &self.config.options.manager {
            let missing = self
                .config
                .kinds
                .kinds()
                .without_all(manager.capabilities().kinds);
            if missing != KindSet::EMPTY {
                // Said when the app is built; every request will answer 500 saying so.
                tracing::error!(
                    target: TARGET,
                    backend = manager.backend_name(),
                    kinds = ?missing,
                    "tower-lock: this LockLayer takes locks its manager's backend does not have; \
                     its requests will be answered 500: give it a manager on a backend that has \
                     them, or take another kind of lock"
                );
            }
        }
        Lock::new(inner, self.clone())
    }
}

impl fmt::Debug for LockLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockLayer")
            .field("keys", &self.config.keys)
            .field("kinds", &self.config.kinds)
            .field("wait", &self.config.options.wait)
            .field("lease", &self.config.options.lease)
            .field("busy", &self.config.options.busy)
            .finish()
    }
}
