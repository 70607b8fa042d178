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

mod body;
mod future;
mod kinds;
mod response_body;
mod service;
mod start;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use tower_layer::Layer;

pub use body::{DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT};
pub use future::ResponseFuture;
pub use response_body::LockResponseBody;
pub use service::Lock;

use body::BodyPolicy;
pub(crate) use kinds::LayerKinds;

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
type RejectionFn = dyn Fn(LockRejection) -> Response + Send + Sync;

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) source: KeySource,
    /// Raw value → lock name.
    pub(crate) naming: Naming,
    pub(crate) manager: Option<LockManager>,
    pub(crate) wait: Option<Duration>,
    pub(crate) lease: Option<Duration>,
    pub(crate) busy: BusyAnswer,
    pub(crate) allow_missing_key: bool,
    pub(crate) fail_open: bool,
    pub(crate) abort_on_lost: bool,
    pub(crate) body: BodyPolicy,
    pub(crate) map_rejection: Option<Arc<RejectionFn>>,
    /// Which kind of lock a request takes.
    pub(crate) kinds: LayerKinds,
}

impl Config {
    pub(crate) fn respond(&self, rejection: LockRejection) -> Response {
        match &self.map_rejection {
            Some(map) => map(rejection),
            None => rejection.into_response(),
        }
    }
}

impl LockLayer {
    /// Locks on a key read from `source`, named `<prefix><value>`.
    pub fn new(source: KeySource) -> Self {
        let prefix = source.default_prefix();
        LockLayer {
            config: Arc::new(Config {
                source,
                naming: Naming::Prefixed(prefix.into()),
                manager: None,
                wait: None,
                lease: None,
                busy: BusyAnswer::default(),
                allow_missing_key: false,
                fail_open: false,
                abort_on_lost: false,
                body: BodyPolicy::default(),
                map_rejection: None,
                kinds: LayerKinds::Exclusive,
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
    /// is used as it is (no prefix unless [`key_prefix`](Self::key_prefix) sets one).
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
        self.config_mut().manager = Some(manager);
        self
    }

    /// How long a request waits for a busy lock before it is answered "busy"
    /// (default: the manager's wait, 10 s). Zero: try once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config_mut().wait = Some(wait);
        self
    }

    /// A fixed lease (no watchdog): the lock ends after `lease` even if the handler still
    /// runs (with [`abort_on_lost`](Self::abort_on_lost), the handler is stopped first).
    /// Default: the manager's lease, renewed while the handler runs.
    pub fn fixed_lease(mut self, lease: Duration) -> Self {
        self.config_mut().lease = Some(lease);
        self
    }

    /// The status for "still busy after the wait": 409 by default; 423, 429 and 503 are
    /// common choices.
    pub fn busy_status(mut self, status: StatusCode) -> Self {
        self.config_mut().busy.status = status;
        self
    }

    /// The `Retry-After` of a busy answer (default
    /// [`DEFAULT_BUSY_RETRY_AFTER`](crate::DEFAULT_BUSY_RETRY_AFTER), 1 s; sent in whole
    /// seconds, rounded up). Set it near the time your handler usually holds the lock: the
    /// holder's lease says nothing about that, since the watchdog keeps renewing it.
    pub fn busy_retry_after(mut self, retry_after: Duration) -> Self {
        self.config_mut().busy.retry_after = retry_after;
        self
    }

    /// Requests without the key (absent parameter or header) run unlocked instead of
    /// getting a 400. Present but invalid keys are still rejected.
    pub fn allow_missing_key(mut self) -> Self {
        self.config_mut().allow_missing_key = true;
        self
    }

    /// When the backend fails, log and run the request without a lock instead of
    /// answering 503. Only for work that tolerates running twice at once.
    pub fn fail_open(mut self) -> Self {
        self.config_mut().fail_open = true;
        self
    }

    /// If the lock is lost while the handler runs, drop the handler's future and answer
    /// 503 (default: keep going; the loss is visible through [`HeldLock`](crate::HeldLock)).
    /// Lost means: a renewal found the lock gone, no renewal succeeded by the loss
    /// deadline, or an explicit lease is ending. The deadline is a
    /// [`LossMargin`](crate::LossMargin) before the lease could end, so the handler is
    /// stopped before anyone else can take the lock.
    pub fn abort_on_lost(mut self) -> Self {
        self.config_mut().abort_on_lost = true;
        self
    }

    /// The largest body read before the lock is taken (default [`DEFAULT_BODY_LIMIT`],
    /// 2 MiB); a larger one is answered 413 without taking the lock.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.config_mut().body.limit = bytes;
        self
    }

    /// How long a body read before the lock is taken may take to arrive (default
    /// [`DEFAULT_BODY_TIMEOUT`], 30 s); a slower one is answered 408 without taking the
    /// lock.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.config_mut().body.timeout = timeout;
        self
    }

    /// Hands the request body to the handler as it arrives, under the lock, instead of
    /// reading it first. For routes that stream large uploads: a client that sends slowly
    /// then holds the lock as long as it sends, so bound that yourself (a timeout layer).
    pub fn stream_body(mut self) -> Self {
        self.config_mut().body.stream = true;
        self
    }

    /// Replaces the responses for lock failures.
    pub fn map_rejection(
        mut self,
        f: impl Fn(LockRejection) -> Response + Send + Sync + 'static,
    ) -> Self {
        self.config_mut().map_rejection = Some(Arc::new(f));
        self
    }
}

/// `<prefix><value>`, with `%`, `{` and `}` of the request's value percent-escaped so that
/// request input can never introduce a Redis Cluster hash tag (or collide with a name that
/// has one).
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
fn escaped(raw: &str) -> Option<String> {
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
            .field("wait", &self.config.wait)
            .field("lease", &self.config.lease)
            .field("busy", &self.config.busy)
            .finish()
    }
}
