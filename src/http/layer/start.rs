//! Before the inner service runs: find the manager, read the key, read the body, take the
//! lock.
//!
//! The key is read at once inside `Lock::call` (every key source reads what the request
//! already carries). When nothing else has to wait (the body is empty or streamed, and the
//! backend answers in-process; or the request is rejected or runs unlocked) the inner
//! service is called right there; a body to read first, or a lock to wait for, becomes a
//! boxed future.

use std::sync::Arc;

use axum::body::{Body, Bytes, HttpBody};
use axum::BoxError;
use http::request::Parts;
use http::Request;

use super::body::read_body;
use super::Config;
use crate::backend::BoxFuture;
use crate::engine::LockGuard;
use crate::engine::LockManager;
use crate::engine::{Acquired, LockRequest, PendingWatchdog};
use crate::error::LockError;
use crate::http::held::HeldLock;
use crate::http::rejection::LockRejection;
use crate::key::LockKey;
use crate::telemetry::throttled;

/// What happened before the inner service is called.
pub(super) enum Start {
    Locked(Request<Body>, LockGuard, Option<PendingWatchdog>),
    Unlocked(Request<Body>),
    Rejected(LockRejection),
}

/// A start that has to wait.
// The request's parts are moved once, into the response future, which has room for them
// anyway (its other states hold a request or the inner service's future).
#[allow(clippy::large_enum_variant)]
pub(super) enum Later {
    /// The body is read first, then the lock taken: one future.
    ReadBody(BoxFuture<Start>),
    /// The lock has to be waited for. Only the acquisition is boxed; the request waits
    /// beside it (a box over 1 KiB misses the allocator's per-thread cache).
    Acquire(Acquiring),
}

/// A request waiting for its lock.
pub(super) struct Acquiring {
    pub(super) acquire: BoxFuture<Result<Acquired, LockError>>,
    pub(super) key: Option<LockKey>,
    pub(super) parts: Parts,
    pub(super) body: Body,
}

impl Acquiring {
    /// The request with its lock, or what to answer instead.
    pub(super) fn finish(self, config: &Config, acquired: Result<Acquired, LockError>) -> Start {
        finish(config, self.parts, self.body, acquired, self.key.as_ref())
    }
}

/// Starts a request: done (`Ok`), or what it waits for.
#[allow(clippy::result_large_err)] // as large as `Start`, which holds the request too
pub(super) fn begin<B>(config: &Arc<Config>, request: Request<B>) -> Result<Start, Later>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (mut parts, body) = request.into_parts();
    let manager = match config.options.manager_for(&parts) {
        Ok(manager) => manager,
        Err(rejection) => return Ok(Start::Rejected(rejection)),
    };
    let key = read_key(config, &manager, &mut parts);
    // The parts stay here until the request is put together again (each move of them is
    // a copy of some 200 bytes).
    let lock = match lock_request(config, manager, &parts.method, key) {
        Ok(lock) => lock,
        Err(Some(rejection)) => return Ok(Start::Rejected(rejection)),
        Err(None) => return Ok(unlocked(config, parts, Body::new(body))),
    };
    if reads_first(config, &body) {
        // A client must not hold a lock by sending its body slowly: read it all first.
        return Err(Later::ReadBody(Box::pin(read_then_lock(
            config.clone(),
            lock,
            parts,
            Body::new(body),
        ))));
    }
    let body = Body::new(body);
    match lock.acquire_now(false) {
        Ok(acquired) => Ok(finish(config, parts, body, acquired, None)),
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
fn reads_first<B: HttpBody>(config: &Config, body: &B) -> bool {
    config.options.body.reads_first() && !body.is_end_stream()
}

/// Reads the whole body within the layer's limits, then takes the lock.
async fn read_then_lock(config: Arc<Config>, lock: LockRequest, parts: Parts, body: Body) -> Start {
    let body = match read_body(body, &config.options.body).await {
        Ok(body) => body,
        Err(rejection) => return Start::Rejected(rejection),
    };
    let key = lock.key().cloned();
    let acquired = match lock.acquire_now(false) {
        Ok(acquired) => acquired,
        Err(lock) => lock.acquire_parts(false).await,
    };
    finish(&config, parts, body, acquired, key.as_ref())
}

/// A request that runs without a lock (it carries no [`HeldLock`](crate::HeldLock)).
fn unlocked(config: &Config, mut parts: Parts, body: Body) -> Start {
    config.options.unlocked_extensions(&mut parts);
    Start::Unlocked(Request::from_parts(parts, body))
}

/// The key of the request's lock; `Ok(None)`: no route matched, nothing to lock.
fn read_key(
    config: &Config,
    manager: &LockManager,
    parts: &mut Parts,
) -> Result<Option<LockKey>, LockRejection> {
    let naming = |raw: &str| config.naming.key(manager, &config.source, raw);
    let key = config.source.read_routed(parts, naming)?;
    key.transpose()
}

/// The lock request for the key read, or why there is none: `Err(None)` runs the request
/// without a lock, `Err(Some(_))` answers it with the rejection.
fn lock_request(
    config: &Config,
    manager: LockManager,
    method: &http::Method,
    key: Result<Option<LockKey>, LockRejection>,
) -> Result<LockRequest, Option<LockRejection>> {
    let key = match key {
        Ok(Some(key)) => key,
        Ok(None) => return Err(None),
        Err(LockRejection::MissingKey { .. }) if config.options.allow_missing_key => {
            return Err(None)
        }
        Err(rejection) => {
            if let LockRejection::Misplaced { .. } = rejection {
                throttled!(error, "tower-lock: {rejection}");
            }
            return Err(Some(rejection));
        }
    };
    let mut lock = manager.into_lock(key, config.kinds.for_method(method));
    if let Some(wait) = config.options.wait {
        lock = lock.wait(wait);
    }
    if let Some(lease) = config.options.lease {
        lock = lock.fixed_lease(lease);
    }
    Ok(lock)
}

/// The request with its lock, or what to answer instead.
fn finish(
    config: &Config,
    mut parts: Parts,
    body: Body,
    acquired: Result<Acquired, LockError>,
    key: Option<&LockKey>,
) -> Start {
    match acquired {
        Ok((guard, watchdog)) => {
            parts.extensions.insert(HeldLock::of(&guard));
            Start::Locked(Request::from_parts(parts, body), guard, watchdog)
        }
        Err(LockError::Unavailable(error)) if config.options.fail_open => {
            let key = key.map_or("", LockKey::as_str);
            throttled!(warn, %error, key, "tower-lock: backend unavailable; running without the lock (fail open)");
            unlocked(config, parts, body)
        }
        Err(error) => {
            let what = config.source.describe();
            Start::Rejected(LockRejection::from_error(error, &what, config.options.busy))
        }
    }
}
