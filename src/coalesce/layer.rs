//! [`CoalesceLayer`] and its settings.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderName;
use http::request::Parts;
use http::{HeaderMap, Method, StatusCode};
use tower_layer::Layer;

use super::config::{CoalesceConfig, OnUnavailable, OnWaitEnd};
use super::service::Coalesce;
use crate::engine::LockManager;
use crate::http::DEFAULT_BUSY_RETRY_AFTER;
use crate::idempotency::layer::stored_by_default;

/// How long a request waits for another's execution by default: 5 s (nginx's
/// `proxy_cache_lock_timeout`); then it runs the handler itself.
pub const DEFAULT_COALESCE_WAIT: Duration = Duration::from_secs(5);

/// A leader's lease by default: 30 s. A leader whose handler runs longer (or whose process
/// died) loses the key's lock, and the next waiter leads.
pub const DEFAULT_COALESCE_LEASE: Duration = Duration::from_secs(30);

/// The largest response body shared by default: 1 MiB. A larger one is sent on unshared.
pub const DEFAULT_SHARE_LIMIT: usize = 1024 * 1024;

/// One execution for concurrent identical requests, across every process on the backend
/// (see the [module docs](super)).
///
/// Put it on the routes it covers with `route_layer`, with a manager of its own
/// ([`manager`](Self::manager)) or an `Extension(LockManager)` outside it. It covers `GET`
/// and `HEAD` by default ([`methods`](Self::methods)); other requests pass through.
#[derive(Clone)]
#[must_use]
pub struct CoalesceLayer {
    /// Shared with the services it makes (and cheap to clone: axum may clone a route's
    /// layer per request).
    config: Arc<CoalesceConfig>,
}

impl fmt::Debug for CoalesceLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoalesceLayer")
            .field("namespace", &self.config.namespace)
            .field("methods", &self.config.methods)
            .field("vary", &self.config.vary)
            .field("window", &self.config.window)
            .field("wait", &self.config.wait)
            .field("lease", &self.config.lease)
            .finish_non_exhaustive()
    }
}

impl Default for CoalesceLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl CoalesceLayer {
    /// Requests coalesced by method, path and query; `GET` and `HEAD`; responses shared
    /// only with the requests that overlap their execution.
    pub fn new() -> Self {
        CoalesceLayer {
            config: Arc::new(CoalesceConfig {
                namespace: "default".to_owned(),
                methods: vec![Method::GET, Method::HEAD],
                vary: Vec::new(),
                key: None,
                scope: None,
                share_credentials: false,
                window: Duration::ZERO,
                wait: DEFAULT_COALESCE_WAIT,
                on_wait_end: OnWaitEnd::Run,
                on_unavailable: OnUnavailable::Run,
                lease: DEFAULT_COALESCE_LEASE,
                share_limit: DEFAULT_SHARE_LIMIT,
                share_if: Arc::new(stored_by_default),
                retry_after: DEFAULT_BUSY_RETRY_AFTER,
                manager: None,
                flights: Arc::default(),
            }),
        }
    }

    /// The settings (for this module's tests).
    #[cfg(test)]
    pub(super) fn config(&self) -> &CoalesceConfig {
        &self.config
    }

    /// The settings, to change (copied first if a service made from this layer shares them:
    /// the copy keeps the flights, which belong to the layer).
    fn config_mut(&mut self) -> &mut CoalesceConfig {
        Arc::make_mut(&mut self.config)
    }

    /// The namespace of this layer's keys (default `"default"`): layers with different
    /// namespaces never share a response.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.config_mut().namespace = namespace.into();
        self
    }

    /// The methods covered (default `GET` and `HEAD`); requests of other methods pass
    /// through. Cover only methods whose requests are safe to answer with another's
    /// response.
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.config_mut().methods = methods.into_iter().collect();
        self
    }

    /// Request headers whose values are part of the key (`Accept`, `Accept-Language`):
    /// requests that differ in them are not the same request.
    ///
    /// # Panics
    /// If a name is not a valid header name (a programming error, caught at startup).
    pub fn vary<'a>(mut self, headers: impl IntoIterator<Item = &'a str>) -> Self {
        for name in headers {
            let header = HeaderName::try_from(name)
                .unwrap_or_else(|_| panic!("`{name}` is not a valid header name"));
            self.config_mut().vary.push(header);
        }
        self
    }

    /// The key from a function of the request head, in place of its method, path and query
    /// (`None`: the request is not coalesced). [`vary`](Self::vary) and
    /// [`scope`](Self::scope) still apply.
    pub fn key_fn<F>(mut self, key: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        self.config_mut().key = Some(Arc::new(key));
        self
    }

    /// Responses per client: the scope (a tenant, an authenticated subject) is part of the
    /// key, so that requests with credentials (`Authorization`, `Cookie`) share responses
    /// with their own scope's requests alone. Put the layer inside the authentication
    /// layer. Without a scope, a request with credentials is never coalesced; `None`: this
    /// request has no scope.
    pub fn scope<F>(mut self, scope: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        self.config_mut().scope = Some(Arc::new(scope));
        self
    }

    /// Requests with credentials (`Authorization`, `Cookie`, `Proxy-Authorization`) are
    /// coalesced like any other, without a scope: one client may get a response computed
    /// for another's request. Only for routes whose responses do not depend on who asks.
    pub fn share_across_credentials(mut self) -> Self {
        self.config_mut().share_credentials = true;
        self
    }

    /// How long a response is kept for requests that arrive after it completed (default
    /// 0: only requests that overlap its execution share it; when requests of other
    /// processes waited for it, it is kept a second while they read it, and those that come
    /// in that second get it too).
    pub fn window(mut self, window: Duration) -> Self {
        self.config_mut().window = window;
        self
    }

    /// How long a request waits for another's execution (default
    /// [`DEFAULT_COALESCE_WAIT`], 5 s); then it does what [`on_wait_end`](Self::on_wait_end)
    /// says.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config_mut().wait = wait;
        self
    }

    /// What a request does when its wait ends first (default [`OnWaitEnd::Run`]).
    pub fn on_wait_end(mut self, on_wait_end: OnWaitEnd) -> Self {
        self.config_mut().on_wait_end = on_wait_end;
        self
    }

    /// What a request does when the lock backend cannot be reached (default
    /// [`OnUnavailable::Run`]).
    pub fn on_unavailable(mut self, on_unavailable: OnUnavailable) -> Self {
        self.config_mut().on_unavailable = on_unavailable;
        self
    }

    /// The lease of the lock a leading request holds while its handler runs (default
    /// [`DEFAULT_COALESCE_LEASE`], 30 s; fixed, not renewed): after it, the next waiter
    /// leads. Values under 1 ms are raised to 1 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config_mut().lease = lease.max(Duration::from_millis(1));
        self
    }

    /// The largest response body shared (default [`DEFAULT_SHARE_LIMIT`], 1 MiB). A larger
    /// response is sent on as it comes, and the waiters run the handler themselves.
    pub fn share_limit(mut self, limit: usize) -> Self {
        self.config_mut().share_limit = limit;
        self
    }

    /// Which responses are shared, by status and headers (default: all but `408`, `425`,
    /// `429` and `5xx`, which say "try again": after one, the next waiter runs the handler).
    /// A response is never shared when it says `Cache-Control: private` or `no-store`, sets
    /// a cookie, or has a `Vary` naming a request header that [`vary`](Self::vary) does not.
    pub fn share_if<F>(mut self, share: F) -> Self
    where
        F: Fn(StatusCode, &HeaderMap) -> bool + Send + Sync + 'static,
    {
        self.config_mut().share_if = Arc::new(share);
        self
    }

    /// The `Retry-After` of the layer's `503` answers (default 1 s).
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.config_mut().retry_after = retry_after;
        self
    }

    /// The lock manager (default: an `Extension(LockManager)` of the request).
    pub fn manager(mut self, manager: LockManager) -> Self {
        self.config_mut().manager = Some(manager);
        self
    }

    /// How many keys have a request in flight through this layer in this process (0 once
    /// they are answered).
    pub fn in_flight(&self) -> usize {
        self.config.flights.open()
    }

    /// How many requests through this layer in this process wait for another request's
    /// execution (the followers of [`in_flight`](Self::in_flight) keys; a key's leader
    /// waiting for another process's is not counted).
    pub fn waiting(&self) -> usize {
        self.config.flights.followers()
    }
}

impl<S> Layer<S> for CoalesceLayer {
    type Service = Coalesce<S>;

    fn layer(&self, inner: S) -> Self::Service {
        if let Some(manager) = self.config.manager.as_ref() {
            if !manager.capabilities().records {
                tracing::error!(
                    target: crate::telemetry::TARGET,
                    backend = manager.backend_name(),
                    "tower-lock: this CoalesceLayer's manager is on a backend without locks \
                     with a record, which it needs to share responses; its requests will run \
                     uncoalesced: give it a manager on Redis, PostgreSQL or in memory"
                );
            }
        }
        Coalesce::new(inner, self.config.clone())
    }
}
