//! Before the inner service runs: find the manager, read the keys, read the body, take the
//! lock (or the locks).
//!
//! The keys are read at once inside `Lock::call` (every key source reads what the request
//! already carries). When nothing else has to wait (one key, the body empty or streamed,
//! and the backend answering in-process; or the request is rejected or runs unlocked) the
//! inner service is called right there; a body to read first, or a lock to wait for,
//! becomes a boxed future.

use std::sync::Arc;

use axum::body::{Bytes, HttpBody};
use axum::BoxError;
use http::request::Parts;
use http::Request;

use super::body::read_body;
use super::keys::ReadKeys;
use super::request_body::LockRequestBody;
use super::request_guard::RequestGuard;
use super::LayerConfig;
use crate::backend::BoxFuture;
use crate::engine::{Acquired, LockManager, LockRequest, MultiLockGuard, PendingWatchdog};
use crate::error::LockError;
use crate::http::held::HeldLock;
use crate::http::held_multi::HeldMultiLock;
use crate::http::rejection::LockRejection;
use crate::key::LockKey;
use crate::telemetry::throttled;

/// What happened before the inner service is called.
pub(super) enum Start<B> {
    Locked(
        Request<LockRequestBody<B>>,
        RequestGuard,
        Option<PendingWatchdog>,
    ),
    Unlocked(Request<LockRequestBody<B>>),
    Rejected(LockRejection),
}

/// A start that has to wait.
// The request's parts are moved once, into the response future, which has room for them
// anyway (its other states hold a request or the inner service's future).
#[allow(clippy::large_enum_variant)]
pub(super) enum Later<B> {
    /// The body is read first (or several locks taken): one future.
    Boxed(BoxFuture<Start<B>>),
    /// One lock has to be waited for. Only the acquisition is boxed; the request waits
    /// beside it (a box over 1 KiB misses the allocator's per-thread cache).
    Acquire(Acquiring<B>),
}

/// A request waiting for its lock.
pub(super) struct Acquiring<B> {
    pub(super) acquire: BoxFuture<Result<Acquired, LockError>>,
    pub(super) key: Option<LockKey>,
    pub(super) parts: Parts,
    /// The body, unread (an empty or a streamed one: a body read first is read in the
    /// boxed start).
    pub(super) body: B,
}

impl<B> Acquiring<B> {
    /// The request with its lock, or what to answer instead.
    pub(super) fn finish(
        self,
        config: &LayerConfig,
        acquired: Result<Acquired, LockError>,
    ) -> Start<B> {
        let body = LockRequestBody::streaming(self.body);
        finish(config, self.parts, body, acquired, self.key.as_ref())
    }
}

/// Starts a request: done (`Ok`), or what it waits for.
#[allow(clippy::result_large_err)] // as large as `Start`, which holds the request too
pub(super) fn begin<B>(config: &Arc<LayerConfig>, request: Request<B>) -> Result<Start<B>, Later<B>>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (mut parts, body) = request.into_parts();
    let options = &config.options;
    let manager = match options.manager_for(&parts) {
        Ok(manager) => manager,
        Err(rejection) => return Ok(Start::Rejected(rejection)),
    };
    // The parts stay here until the request is put together again (each move of them is
    // a copy of some 200 bytes).
    let keys = match config
        .keys
        .read(&manager, &mut parts, options.allow_missing_key)
    {
        Ok(keys) => keys,
        Err(rejection) => {
            if let LockRejection::Misplaced { .. } = rejection {
                throttled!(error, "tower-lock: {rejection}");
            }
            return Ok(Start::Rejected(rejection));
        }
    };
    let kind = match config.kinds.for_method(&parts.method) {
        Ok(kind) => kind,
        Err(error) => {
            throttled!(error, "tower-lock: {error}; answering 500");
            let rejection = LockRejection::from_error(error, "", options.busy);
            return Ok(Start::Rejected(rejection));
        }
    };
    let key = match keys {
        ReadKeys::One(key) => key,
        ReadKeys::None => return Ok(unlocked(config, parts, LockRequestBody::streaming(body))),
        ReadKeys::Many(keys) => {
            let mut lock = manager.multi_lock_keys(keys, kind);
            if let Some(wait) = options.wait {
                lock = lock.wait(wait);
            }
            if let Some(lease) = options.lease {
                lock = lock.fixed_lease(lease);
            }
            let read_first = reads_first(config, &body);
            let config = config.clone();
            return Err(Later::Boxed(Box::pin(async move {
                let body = match read_first {
                    true => match read_body(body, &config.options.body).await {
                        Ok(body) => body,
                        Err(rejection) => return Start::Rejected(rejection),
                    },
                    false => LockRequestBody::streaming(body),
                };
                let acquired = lock.acquire().await;
                finish_many(&config, manager, parts, body, acquired)
            })));
        }
    };
    let mut lock = manager.into_lock(key, kind);
    if let Some(wait) = options.wait {
        lock = lock.wait(wait);
    }
    if let Some(lease) = options.lease {
        lock = lock.fixed_lease(lease);
    }
    if reads_first(config, &body) {
        // A client must not hold a lock by sending its body slowly: read it all first.
        return Err(Later::Boxed(Box::pin(read_then_lock(
            config.clone(),
            lock,
            parts,
            body,
        ))));
    }
    match lock.acquire_now(false) {
        Ok(acquired) => {
            let body = LockRequestBody::streaming(body);
            Ok(finish(config, parts, body, acquired, None))
        }
        Err(lock) => Err(Later::Acquire(Acquiring {
            key: lock.key().cloned(),
            acquire: Box::pin(lock.acquire_parts(false)),
            parts,
            body,
        })),
    }
}

/// Whether the body is read before the lock is asked for: unless the layer streams it, and
/// unless it is empty already (no read to wait for).
fn reads_first<B: HttpBody>(config: &LayerConfig, body: &B) -> bool {
    config.options.body.reads_first() && !body.is_end_stream()
}

/// Reads the whole body within the layer's limits, then takes the lock.
async fn read_then_lock<B>(
    config: Arc<LayerConfig>,
    lock: LockRequest,
    parts: Parts,
    body: B,
) -> Start<B>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let body = match read_body(body, &config.options.body).await {
        Ok(body) => body,
        Err(rejection) => return Start::Rejected(rejection),
    };
    let key = lock.key().cloned();
    // Its waiting path inline (not `acquire_unwatched`, which boxes it apart): this future
    // is boxed already.
    let acquired = match lock.acquire_now(false) {
        Ok(acquired) => acquired,
        Err(lock) => lock.acquire_parts(false).await,
    };
    finish(&config, parts, body, acquired, key.as_ref())
}

/// A request that runs without a lock (it carries no [`HeldLock`]).
fn unlocked<B>(config: &LayerConfig, mut parts: Parts, body: LockRequestBody<B>) -> Start<B> {
    config.options.unlocked_extensions(&mut parts);
    Start::Unlocked(Request::from_parts(parts, body))
}

/// What operators see of the request a hold was taken for.
fn request_label(parts: &Parts) -> crate::engine::RequestLabel {
    crate::engine::RequestLabel::new(parts.method.as_str(), parts.uri.path())
}

/// The request with its lock, or what to answer instead.
fn finish<B>(
    config: &LayerConfig,
    mut parts: Parts,
    body: LockRequestBody<B>,
    acquired: Result<Acquired, LockError>,
    key: Option<&LockKey>,
) -> Start<B> {
    match acquired {
        Ok((guard, watchdog)) => {
            guard.label(request_label(&parts));
            parts.extensions.insert(HeldLock::of(&guard));
            let request = Request::from_parts(parts, body);
            Start::Locked(request, RequestGuard::One(guard), watchdog)
        }
        Err(error) => not_acquired(config, parts, body, error, key),
    }
}

/// The request with its locks, or what to answer instead.
fn finish_many<B>(
    config: &LayerConfig,
    manager: LockManager,
    mut parts: Parts,
    body: LockRequestBody<B>,
    acquired: Result<MultiLockGuard, LockError>,
) -> Start<B> {
    match acquired {
        Ok(guard) => {
            guard.label(request_label(&parts));
            parts.extensions.insert(HeldMultiLock::of(&guard, manager));
            let request = Request::from_parts(parts, body);
            Start::Locked(request, RequestGuard::Many(guard), None)
        }
        Err(error) => not_acquired(config, parts, body, error, None),
    }
}

/// A request whose lock was not taken: unlocked when the backend is down and the layer
/// fails open, else the rejection.
fn not_acquired<B>(
    config: &LayerConfig,
    parts: Parts,
    body: LockRequestBody<B>,
    error: LockError,
    key: Option<&LockKey>,
) -> Start<B> {
    match error {
        LockError::Unavailable(error) if config.options.fail_open => {
            let key = key.map_or("", LockKey::as_str);
            throttled!(warn, %error, key, "tower-lock: backend unavailable; running without the lock (fail open)");
            unlocked(config, parts, body)
        }
        error => {
            let what = config.keys.describe();
            Start::Rejected(LockRejection::from_error(error, &what, config.options.busy))
        }
    }
}
