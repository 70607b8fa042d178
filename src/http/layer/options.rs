//! A [`LockLayer`](super::LockLayer)'s settings apart from its keys and kinds: the manager,
//! the wait and lease, the answers to failures, the body policy; and the builder methods
//! that set them (`layer_options!`).

use std::sync::Arc;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::request::Parts;

use super::body::BodyPolicy;
use crate::engine::LockManager;
use crate::http::acquire_failure::BusyAnswer;
use crate::http::rejection::LockRejection;
use crate::telemetry::throttled;

pub(crate) type RejectionFn = dyn Fn(LockRejection) -> Response + Send + Sync;

/// A layer's settings apart from where its keys come from.
#[derive(Clone, Default)]
pub(crate) struct LayerOptions {
    pub(crate) manager: Option<LockManager>,
    pub(crate) wait: Option<Duration>,
    pub(crate) lease: Option<Duration>,
    pub(crate) busy: BusyAnswer,
    pub(crate) allow_missing_key: bool,
    pub(crate) fail_open: bool,
    pub(crate) abort_on_lost: bool,
    pub(crate) body: BodyPolicy,
    pub(crate) map_rejection: Option<Arc<RejectionFn>>,
}

impl LayerOptions {
    /// The response for a lock failure (the layer's own mapping, if any).
    pub(crate) fn respond(&self, rejection: LockRejection) -> Response {
        match &self.map_rejection {
            Some(map) => map(rejection),
            None => rejection.into_response(),
        }
    }

    /// The manager this request locks with (the layer's own, else the request's
    /// extension). The layer's own is not put in the extensions of requests it locks:
    /// extractors find it through what the layer holds (see
    /// [`unlocked_extensions`](Self::unlocked_extensions)).
    pub(crate) fn manager_for(&self, parts: &Parts) -> Result<LockManager, LockRejection> {
        if let Some(manager) = &self.manager {
            return Ok(manager.clone());
        }
        match parts.extensions.get::<LockManager>() {
            Some(manager) => Ok(manager.clone()),
            None => {
                throttled!(
                    error,
                    "tower-lock: no LockManager for this request: add `.layer(Extension(lock_manager))` \
                     outside the lock layer, or give the layer `.manager(..)`; answering 500"
                );
                Err(LockRejection::NoManager)
            }
        }
    }

    /// A request that runs without a lock carries nothing the layer holds, so the layer's
    /// own manager goes in its extensions for inner extractors (unless one is there).
    pub(crate) fn unlocked_extensions(&self, parts: &mut Parts) {
        if let Some(manager) = &self.manager {
            if parts.extensions.get::<LockManager>().is_none() {
                parts.extensions.insert(manager.clone());
            }
        }
    }
}

/// The builder methods of the options.
impl super::LockLayer {
    /// How long a request waits for a busy lock (for every key, in all) before it is
    /// answered "busy" (default: the manager's wait, 10 s). Zero: try once.
    pub fn wait(mut self, wait: std::time::Duration) -> Self {
        self.options_mut().wait = Some(wait);
        self
    }

    /// A fixed lease (no watchdog): the lock ends after `lease` even if the handler still
    /// runs (with [`abort_on_lost`](Self::abort_on_lost), the handler is stopped first).
    /// Default: the manager's lease, renewed while the handler runs.
    pub fn fixed_lease(mut self, lease: std::time::Duration) -> Self {
        self.options_mut().lease = Some(lease);
        self
    }

    /// The status for "still busy after the wait": 409 by default; 423, 429 and 503 are
    /// common choices.
    pub fn busy_status(mut self, status: http::StatusCode) -> Self {
        self.options_mut().busy.status = status;
        self
    }

    /// The `Retry-After` of a busy answer (default
    /// [`DEFAULT_BUSY_RETRY_AFTER`](crate::rejection::DEFAULT_BUSY_RETRY_AFTER), 1 s; sent in whole
    /// seconds, rounded up). Set it near the time your handler usually holds the lock: the
    /// holder's lease says nothing about that, since the watchdog keeps renewing it.
    pub fn busy_retry_after(mut self, retry_after: std::time::Duration) -> Self {
        self.options_mut().busy.retry_after = retry_after;
        self
    }

    /// Requests without the key (absent parameter or header) run unlocked instead of
    /// getting a 400. Present but invalid keys are still rejected.
    pub fn allow_missing_key(mut self) -> Self {
        self.options_mut().allow_missing_key = true;
        self
    }

    /// When the backend fails, log and run the request without a lock instead of
    /// answering 503. Only for work that tolerates running twice at once.
    pub fn fail_open(mut self) -> Self {
        self.options_mut().fail_open = true;
        self
    }

    /// If the lock is lost while the handler runs, drop the handler's future and answer
    /// 503 (default: keep going; the handler sees the loss through the extension the
    /// layer puts in the request). Lost means: a renewal found the lock gone, no renewal
    /// succeeded by the loss deadline, or an explicit lease is ending. The deadline is a
    /// [`LossMargin`](crate::lock::LossMargin) before the lease could end, so the handler is
    /// stopped before anyone else can take the lock.
    pub fn abort_on_lost(mut self) -> Self {
        self.options_mut().abort_on_lost = true;
        self
    }

    /// The largest body read before the lock is taken (default
    /// [`DEFAULT_BODY_LIMIT`](crate::layer::DEFAULT_BODY_LIMIT), 2 MiB); a larger one is
    /// answered 413 without taking the lock.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.options_mut().body.limit = bytes;
        self
    }

    /// How long a body read before the lock is taken may take to arrive (default
    /// [`DEFAULT_BODY_TIMEOUT`](crate::layer::DEFAULT_BODY_TIMEOUT), 30 s); a slower one
    /// is answered 408 without taking the lock.
    pub fn body_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.options_mut().body.timeout = timeout;
        self
    }

    /// Hands the request body to the handler as it arrives, under the lock, instead of
    /// reading it first. For routes that stream large uploads: a client that sends slowly
    /// then holds the lock as long as it sends, so bound that yourself (a timeout layer).
    pub fn stream_body(mut self) -> Self {
        self.options_mut().body.stream = true;
        self
    }

    /// Replaces the responses for lock failures.
    pub fn map_rejection(
        mut self,
        f: impl Fn(crate::http::LockRejection) -> axum::response::Response + Send + Sync + 'static,
    ) -> Self {
        self.options_mut().map_rejection = Some(std::sync::Arc::new(f));
        self
    }
}
