//! An idempotency layer's settings, shared by its services.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use http::request::Parts;
use http::{HeaderMap, Method, StatusCode};

use super::key::IdempotencyKeySource;
use crate::engine::LockManager;
use crate::http::layer::body::BodyPolicy;

/// What a request does when another request with its key is still being processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnConcurrent {
    /// Wait for it (by pub/sub, within the layer's wait) and answer its response; a wait
    /// that ends first is a `409` with `Retry-After`. The default.
    #[default]
    Wait,
    /// Answer `409 Conflict` with `Retry-After` at once (the draft's letter).
    Conflict,
}

pub(crate) type ScopeFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;
pub(crate) type FingerprintFn = dyn Fn(&Parts, &Bytes) -> Vec<u8> + Send + Sync;
pub(crate) type StoreFn = dyn Fn(StatusCode, &HeaderMap) -> bool + Send + Sync;

/// A layer's settings, shared by its services.
#[derive(Clone)]
pub(crate) struct IdempotencyConfig {
    pub(crate) source: IdempotencyKeySource,
    pub(crate) required: bool,
    pub(crate) namespace: String,
    pub(crate) scope: Option<Arc<ScopeFn>>,
    pub(crate) fingerprint: Option<Arc<FingerprintFn>>,
    pub(crate) retention: Duration,
    pub(crate) wait: Option<Duration>,
    pub(crate) concurrent: OnConcurrent,
    pub(crate) retry_after: Duration,
    pub(crate) max_key_len: usize,
    pub(crate) body: BodyPolicy,
    pub(crate) store_limit: usize,
    pub(crate) store_if: Arc<StoreFn>,
    pub(crate) methods: Vec<Method>,
    pub(crate) finish_on_disconnect: bool,
    pub(crate) fail_open: bool,
    pub(crate) manager: Option<LockManager>,
    /// Handlers' transactions, committed with their responses (PostgreSQL).
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) transactions: Option<super::transaction::Transactions>,
}
