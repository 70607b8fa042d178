//! A coalescing layer's settings, shared by its services.

use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::{HeaderMap, HeaderName, Method, StatusCode};

use super::flight::Flights;
use crate::engine::LockManager;

/// What a request does when its wait for another request's execution ends first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnWaitEnd {
    /// Run the handler itself (as nginx's `proxy_cache_lock_timeout` lets a request go to
    /// the upstream): the layer is an optimisation, and a slow leader should not fail the
    /// others. The default.
    #[default]
    Run,
    /// Answer `503 Service Unavailable` with `Retry-After`.
    Reject,
}

/// What a request does when the lock backend cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnUnavailable {
    /// Run the handler without coalescing. The default: the layer is an optimisation.
    #[default]
    Run,
    /// Answer `503 Service Unavailable` with `Retry-After`.
    Reject,
}

pub(super) type KeyFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;
pub(super) type ShareFn = dyn Fn(StatusCode, &HeaderMap) -> bool + Send + Sync;

/// A layer's settings, shared by its services (and its clones: one layer's flights are
/// shared by every route it is on).
#[derive(Clone)]
pub(super) struct CoalesceConfig {
    pub(super) namespace: String,
    pub(super) methods: Vec<Method>,
    pub(super) vary: Vec<HeaderName>,
    pub(super) key: Option<Arc<KeyFn>>,
    pub(super) scope: Option<Arc<KeyFn>>,
    pub(super) share_credentials: bool,
    pub(super) window: Duration,
    pub(super) wait: Duration,
    pub(super) on_wait_end: OnWaitEnd,
    pub(super) on_unavailable: OnUnavailable,
    pub(super) lease: Duration,
    pub(super) share_limit: usize,
    pub(super) share_if: Arc<ShareFn>,
    pub(super) retry_after: Duration,
    pub(super) manager: Option<LockManager>,
    /// This layer's requests in this process, by key.
    pub(super) flights: Arc<Flights>,
}
