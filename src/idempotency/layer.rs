//! [`IdempotencyLayer`] and its settings.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use http::header::HeaderName;
use http::request::Parts;
use http::{HeaderMap, Method, StatusCode};
use tower_layer::Layer;

use super::config::{IdempotencyConfig, OnConcurrent};
use super::key::{IdempotencyKeySource, DEFAULT_MAX_KEY_LEN, IDEMPOTENCY_KEY};
use super::service::Idempotency;
use crate::engine::LockManager;
use crate::http::layer::body::BodyPolicy;
use crate::http::DEFAULT_BUSY_RETRY_AFTER;

/// How long a stored response is kept by default: 24 hours (Stripe's minimum).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// The largest response body stored by default: 1 MiB. A larger one is sent on unstored.
pub const DEFAULT_STORE_LIMIT: usize = 1024 * 1024;

/// The statuses stored by default: the handler's answers, except those that say "try
/// again" (`408`, `425`, `429`, and every `5xx`): a retry after one of those runs the
/// handler again, as a webhook sender expects.
pub(crate) fn stored_by_default(status: StatusCode, _: &HeaderMap) -> bool {
    !(status.is_server_error()
        || status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_EARLY
        || status == StatusCode::TOO_MANY_REQUESTS)
}

/// Runs a request's handler once per idempotency key: duplicates get the first response
/// (see the [module docs](super)).
///
/// Put it on the routes it protects with `route_layer`, with a manager of its own
/// ([`manager`](Self::manager)) or an `Extension(LockManager)` outside it. It protects
/// `POST` and `PATCH` by default ([`methods`](Self::methods)); other requests pass through.
#[derive(Clone)]
#[must_use]
pub struct IdempotencyLayer {
    /// Shared with the services it makes (and cheap to clone: axum may clone a route's
    /// layer per request).
    config: Arc<IdempotencyConfig>,
}

impl fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyLayer")
            .field("key", &self.config.source)
            .field("namespace", &self.config.namespace)
            .field("required", &self.config.required)
            .field("retention", &self.config.retention)
            .field("on_concurrent", &self.config.concurrent)
            .finish_non_exhaustive()
    }
}

impl Default for IdempotencyLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl IdempotencyLayer {
    /// Keys from the `Idempotency-Key` header, as the draft's sf-string (`"…"`) or bare.
    pub fn new() -> Self {
        Self::with_source(IdempotencyKeySource::Header(IDEMPOTENCY_KEY))
    }

    /// Keys from another header (`X-GitHub-Delivery`, `webhook-id`,
    /// `X-Shopify-Webhook-Id`), quoted or bare.
    ///
    /// # Panics
    /// If `name` is not a valid header name (a programming error, caught at startup).
    pub fn header(name: &str) -> Self {
        let name = HeaderName::try_from(name)
            .unwrap_or_else(|_| panic!("`{name}` is not a valid header name"));
        Self::with_source(IdempotencyKeySource::Header(name))
    }

    /// Keys from a function of the request head; `None`: the request has none.
    pub fn by_fn<F>(key: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        Self::with_source(IdempotencyKeySource::Head(Arc::new(key)))
    }

    /// Keys from a function of the request head and its body, read whole first (within
    /// [`body_limit`](Self::body_limit)): Stripe's events carry their id in the JSON body.
    pub fn by_body_fn<F>(key: F) -> Self
    where
        F: Fn(&Parts, &Bytes) -> Option<String> + Send + Sync + 'static,
    {
        Self::with_source(IdempotencyKeySource::Body(Arc::new(key)))
    }

    fn with_source(source: IdempotencyKeySource) -> Self {
        IdempotencyLayer {
            config: Arc::new(IdempotencyConfig {
                source,
                required: true,
                namespace: "default".to_owned(),
                scope: None,
                fingerprint: None,
                retention: DEFAULT_RETENTION,
                wait: None,
                concurrent: OnConcurrent::Wait,
                retry_after: DEFAULT_BUSY_RETRY_AFTER,
                max_key_len: DEFAULT_MAX_KEY_LEN,
                body: BodyPolicy::default(),
                store_limit: DEFAULT_STORE_LIMIT,
                store_if: Arc::new(stored_by_default),
                methods: vec![Method::POST, Method::PATCH],
                finish_on_disconnect: true,
                fail_open: false,
                manager: None,
                #[cfg(any(feature = "postgres", feature = "mysql"))]
                transactions: None,
            }),
        }
    }

    /// The settings, to change (copied first if a service made from this layer shares them).
    fn config_mut(&mut self) -> &mut IdempotencyConfig {
        Arc::make_mut(&mut self.config)
    }

    /// A request without a key passes through unprotected (default: it is a `400`).
    pub fn optional(mut self) -> Self {
        self.config_mut().required = false;
        self
    }

    /// The namespace of this layer's keys (default `"default"`): layers with different
    /// namespaces never share a key, so give each route that takes keys of its own a
    /// namespace of its own. (A key reused on another route with the same namespace is a
    /// `422`: its fingerprint differs.)
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.config_mut().namespace = namespace.into();
        self
    }

    /// Keys per client: the scope (a tenant, an authenticated subject) is part of the key,
    /// so that one client can neither read another's response nor block its key (the
    /// draft's security advice). Put the layer inside the authentication layer, which
    /// leaves what the scope reads in the request. `None`: the request has no scope.
    pub fn scope<F>(mut self, scope: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        self.config_mut().scope = Some(Arc::new(scope));
        self
    }

    /// What a repeated request must match (default: its method, path, query and body): the
    /// bytes `fingerprint` returns (hashed), for example selected fields of the body.
    pub fn fingerprint<F>(mut self, fingerprint: F) -> Self
    where
        F: Fn(&Parts, &Bytes) -> Vec<u8> + Send + Sync + 'static,
    {
        self.config_mut().fingerprint = Some(Arc::new(fingerprint));
        self
    }

    /// How long a response is stored (default [`DEFAULT_RETENTION`], 24 hours). After it,
    /// the key is new again.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.config_mut().retention = retention.max(Duration::from_millis(1));
        self
    }

    /// How long a repetition waits for the first request (default: the manager's wait).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config_mut().wait = Some(wait);
        self
    }

    /// What a repetition does while the first request runs (default
    /// [`OnConcurrent::Wait`]).
    pub fn on_concurrent(mut self, on_concurrent: OnConcurrent) -> Self {
        self.config_mut().concurrent = on_concurrent;
        self
    }

    /// The `Retry-After` of a `409` (default 1 s).
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.config_mut().retry_after = retry_after;
        self
    }

    /// The longest key accepted, in bytes (default [`DEFAULT_MAX_KEY_LEN`], 255).
    pub fn max_key_len(mut self, max: usize) -> Self {
        self.config_mut().max_key_len = max;
        self
    }

    /// The largest request body read (default 2 MiB; larger is a `413`). The body is read
    /// whole before anything else: it is fingerprinted, and may hold the key.
    pub fn body_limit(mut self, limit: usize) -> Self {
        self.config_mut().body.limit = limit;
        self
    }

    /// How long a request body may take to arrive (default 30 s; longer is a `408`).
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.config_mut().body.timeout = timeout;
        self
    }

    /// The largest response body stored (default [`DEFAULT_STORE_LIMIT`], 1 MiB). A
    /// larger response is sent on as it comes and not stored: its key is released, and a
    /// retry runs the handler again.
    pub fn store_limit(mut self, limit: usize) -> Self {
        self.config_mut().store_limit = limit;
        self
    }

    /// Which of the handler's responses are stored, by status and headers (default: all
    /// but `408`, `425`, `429` and `5xx`, which say "try again"). A response is never
    /// stored when it carries `Cache-Control: no-store` or the [`DoNotStore`](super::DoNotStore)
    /// extension, and the layer's own answers (400, 409, 413, 422, 503) never are.
    pub fn store_if<F>(mut self, store: F) -> Self
    where
        F: Fn(StatusCode, &HeaderMap) -> bool + Send + Sync + 'static,
    {
        self.config_mut().store_if = Arc::new(store);
        self
    }

    /// The methods protected (default `POST` and `PATCH`); requests of other methods pass
    /// through.
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.config_mut().methods = methods.into_iter().collect();
        self
    }

    /// Whether the handler of a first request runs to the end, and its response is stored,
    /// when its client hangs up (default `true`: the retry gets the answer instead of
    /// running the handler again). `false`: the handler is dropped with the request, and
    /// its key released.
    pub fn finish_on_disconnect(mut self, finish: bool) -> Self {
        self.config_mut().finish_on_disconnect = finish;
        self
    }

    /// When the lock backend cannot be reached, pass requests through unprotected
    /// (default: a `503` with `Retry-After`, at once).
    pub fn fail_open(mut self) -> Self {
        self.config_mut().fail_open = true;
        self
    }

    /// The lock manager (default: an `Extension(LockManager)` of the request).
    pub fn manager(mut self, manager: LockManager) -> Self {
        self.config_mut().manager = Some(manager);
        self
    }

    /// Handlers may write in their request's transaction (`IdempotentTransaction` on
    /// PostgreSQL, `IdempotentMySqlTransaction` on MySQL): the layer commits it together
    /// with the stored response, or rolls both back (a response that is not stored, a
    /// failed commit), so that the handler's database effects happen exactly once per key.
    /// The layer's manager must be on the same PostgreSQL or MySQL backend.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub fn transactions(mut self, transactions: super::Transactions) -> Self {
        self.config_mut().transactions = Some(transactions);
        self
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = Idempotency<S>;

    fn layer(&self, inner: S) -> Self::Service {
        if let Some(manager) = self.config.manager.as_ref() {
            if !manager.capabilities().records {
                // Said when the app is built; every request will answer 500 saying so.
                tracing::error!(
                    target: crate::telemetry::TARGET,
                    backend = manager.backend_name(),
                    "tower-lock: this IdempotencyLayer's manager is on a backend without locks \
                     with a record, which it needs to store responses; its requests will be \
                     answered 500: give it a manager on Redis or in memory"
                );
            }
        }
        Idempotency::new(inner, self.config.clone())
    }
}
