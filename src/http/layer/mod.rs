//! `LockLayer`: Tower middleware that runs each request under a lock named by the request.
//!
//! The layer reads a key from the request, waits for its lock, keeps the lease alive while
//! the inner service runs (a watchdog timer polled inside the response future; no task per
//! request), and releases the lock before handing the response back, so a client that
//! retries as soon as it has its answer never finds its own request still holding the lock.
//! If the response future is dropped (client gone, a timeout above), the lock is released
//! at once in the background.
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
//! use tower_lock::{LockLayer, LockManager};
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
pub(crate) mod future;
mod kinds;
pub(crate) mod options;
pub(crate) mod response_body;
pub(crate) mod service;
mod start;

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

pub use body::{DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT};
pub use future::ResponseFuture;
pub use response_body::LockResponseBody;
pub use service::Lock;

pub(crate) use kinds::LayerKinds;
use options::{layer_options, LayerOptions};

use crate::engine::LockManager;
use crate::http::extract::Lockable;
use crate::http::key_source::KeySource;
use crate::http::rejection::{BusyAnswer, LockRejection};
use crate::key::LockKey;

/// Applies [`Lock`] to a service. See the [module docs](crate::layer).
///
/// Defaults: wait 10 s (the manager's), lease 30 s renewed by a watchdog (the manager's),
/// key `<param>:<value>` (e.g. `orderId:42`; `%`, `{`, `}` in the value are
/// percent-escaped) under the manager's prefix, busy → 409, missing
/// key → 400, backend down → 503 (fail closed), lock lost → keep going; a busy answer
/// carries `Retry-After: 1`.
#[derive(Clone)]
pub struct LockLayer {
    config: Arc<Config>,
}

type NameFn = dyn Fn(&str) -> Result<String, String> + Send + Sync;

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) source: KeySource,
    /// Raw value → lock name.
    pub(crate) naming: Naming,
    /// Which kind of lock a request takes.
    pub(crate) kinds: LayerKinds,
    pub(crate) options: LayerOptions,
}

impl LockLayer {
    /// Locks on a key read from `source`, named `<prefix><value>`.
    pub fn new(source: KeySource) -> Self {
        let prefix = source.default_prefix();
        LockLayer {
            config: Arc::new(Config {
                source,
                naming: Naming::Prefixed(prefix.into()),
                kinds: LayerKinds::Plain,
                options: LayerOptions::default(),
            }),
        }
    }

    /// Locks on a path parameter of the matched route (key `<param>:<value>`, e.g.
    /// `orderId:42`). A [`Locked<K>`](crate::Locked) extractor locks `K::lock_name()`
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
    pub fn by_fn(
        f: impl Fn(&http::request::Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        Self::new(KeySource::from_fn(f))
    }

    /// Locks on the same name as the [`Locked<K>`](crate::Locked) extractor,
    /// `K::lock_name()` read from `K::source()`: a route under this layer and a route using
    /// the extractor exclude each other on the same value, and a handler using both enters
    /// the layer's lock again instead of waiting for itself.
    pub fn for_key<K: Lockable>() -> Self {
        let mut layer = Self::new(K::source());
        layer.config_mut().naming =
            Naming::Parsed(Arc::new(|raw: &str| K::parse(raw).map(|k| k.lock_name())));
        layer
    }

    pub(super) fn config_mut(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    fn options_mut(&mut self) -> &mut LayerOptions {
        &mut self.config_mut().options
    }

    /// Names locks `<prefix><value>` instead of `<param>:<value>`, e.g. the route's name,
    /// so that keys of different routes never collide.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config_mut().naming = Naming::Prefixed(prefix.into().into());
        self
    }

    /// Locks with this manager instead of one from the request extensions: the
    /// recommended setup, with no `Extension` layer needed for the layer (and none of its
    /// cost per request).
    ///
    /// [`Locked<K>`](crate::Locked) extractors behind the layer find the manager through
    /// the request's [`HeldLock`](crate::HeldLock) (and, on a request that runs unlocked,
    /// in the extensions). It is not put in the extensions of the requests it locks:
    /// handlers that take `Extension<LockManager>` need `.layer(Extension(manager))`.
    pub fn manager(mut self, manager: LockManager) -> Self {
        self.options_mut().manager = Some(manager);
        self
    }

    layer_options!();
}

/// How a request's raw key value becomes its lock's name.
#[derive(Clone)]
pub(crate) enum Naming {
    /// `<prefix><value>`, with `%`, `{` and `}` in the value percent-escaped (braces
    /// would make a Redis Cluster hash tag of the value).
    Prefixed(Arc<str>),
    /// A [`Lockable`]'s parse and name.
    Parsed(Arc<NameFn>),
}

impl Naming {
    /// The key of `raw`'s lock, or the rejection of a value that names none.
    pub(crate) fn key(
        &self,
        manager: &LockManager,
        source: &KeySource,
        raw: &str,
    ) -> Result<LockKey, LockRejection> {
        let key = match self {
            Naming::Prefixed(prefix) => match escaped(raw) {
                Some(escaped) => manager.joined_key(&[prefix, &escaped]),
                None => manager.joined_key(&[prefix, raw]),
            },
            Naming::Parsed(name) => match name(raw) {
                Ok(name) => manager.key(&name),
                Err(reason) => {
                    let what = source.describe();
                    return Err(LockRejection::InvalidKey { what, reason });
                }
            },
        };
        // Naming only fails with `InvalidName` (a 400), so the busy answer is not used.
        key.map_err(|error| {
            LockRejection::from_error(error, &source.describe(), BusyAnswer::default())
        })
    }
}

/// `raw` with `%`, `{` and `}` percent-escaped, or `None` when it has none of them.
pub(crate) fn escaped(raw: &str) -> Option<String> {
    if !raw.bytes().any(|byte| matches!(byte, b'%' | b'{' | b'}')) {
        return None;
    }
    let mut name = String::with_capacity(raw.len() + 8);
    for c in raw.chars() {
        match c {
            '%' => name.push_str("%25"),
            '{' => name.push_str("%7B"),
            '}' => name.push_str("%7D"),
            c => name.push(c),
        }
    }
    Some(name)
}

impl<S> Layer<S> for LockLayer {
    type Service = Lock<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Lock::new(inner, self.config.clone())
    }
}

impl fmt::Debug for LockLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockLayer")
            .field("source", &self.config.source)
            .field("wait", &self.config.options.wait)
            .field("lease", &self.config.options.lease)
            .field("busy", &self.config.options.busy)
            .finish()
    }
}
