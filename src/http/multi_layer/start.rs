//! Before the inner service runs: find the manager, read the keys, read the body, take
//! the locks.

use std::sync::Arc;

use axum::body::{Body, Bytes, HttpBody};
use axum::BoxError;
use http::request::Parts;
use http::Request;

use super::keys::Keys;
use super::MultiConfig;
use crate::backend::BoxFuture;
use crate::engine::{LockManager, MultiLockGuard};
use crate::error::LockError;
use crate::http::held_multi::HeldMultiLock;
use crate::http::layer::body::read_body;
use crate::http::rejection::LockRejection;
use crate::telemetry::throttled;

/// What happened before the inner service is called.
pub(super) enum MultiStart {
    Locked(Request<Body>, MultiLockGuard),
    Unlocked(Request<Body>),
    Rejected(LockRejection),
}

/// Starts a request: done (`Ok`: rejected, or unlocked), or the future that reads the body
/// and takes the locks.
#[allow(clippy::result_large_err)] // as large as `MultiStart`, which holds the request
pub(super) fn begin<B>(
    config: &Arc<MultiConfig>,
    request: Request<B>,
) -> Result<MultiStart, BoxFuture<MultiStart>>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (mut parts, body) = request.into_parts();
    let options = &config.options;
    let manager = match options.manager_for(&parts) {
        Ok(manager) => manager,
        Err(rejection) => return Ok(MultiStart::Rejected(rejection)),
    };
    let read = config.keys.read(
        &manager,
        &mut parts,
        options.allow_missing_key,
        config.max_keys,
    );
    let keys = match read {
        Ok(Keys::Lock(keys)) => keys,
        Ok(Keys::None) => return Ok(unlocked(config, parts, Body::new(body))),
        Err(rejection) => {
            if let LockRejection::Misplaced { .. } = rejection {
                throttled!(error, "tower-lock: {rejection}");
            }
            return Ok(MultiStart::Rejected(rejection));
        }
    };
    let mut lock = manager.multi_lock_keys(keys, crate::kind::LockKind::Plain);
    if let Some(wait) = options.wait {
        lock = lock.wait(wait);
    }
    if let Some(lease) = options.lease {
        lock = lock.fixed_lease(lease);
    }
    // A client must not hold locks by sending its body slowly: read it all first (unless
    // the layer streams it, or there is none).
    let read_first = options.body.reads_first() && !body.is_end_stream();
    let config = config.clone();
    Err(Box::pin(async move {
        let mut body = Body::new(body);
        if read_first {
            body = match read_body(body, &config.options.body).await {
                Ok(body) => body,
                Err(rejection) => return MultiStart::Rejected(rejection),
            };
        }
        let acquired = lock.acquire().await;
        finish(&config, manager, parts, body, acquired)
    }))
}

/// A request that runs without the locks.
fn unlocked(config: &MultiConfig, mut parts: Parts, body: Body) -> MultiStart {
    config.options.unlocked_extensions(&mut parts);
    MultiStart::Unlocked(Request::from_parts(parts, body))
}

/// The request with its locks, or what to answer instead.
fn finish(
    config: &MultiConfig,
    manager: LockManager,
    mut parts: Parts,
    body: Body,
    acquired: Result<MultiLockGuard, LockError>,
) -> MultiStart {
    match acquired {
        Ok(guard) => {
            parts.extensions.insert(HeldMultiLock::of(&guard, manager));
            MultiStart::Locked(Request::from_parts(parts, body), guard)
        }
        Err(LockError::Unavailable(error)) if config.options.fail_open => {
            throttled!(warn, %error, "tower-lock: backend unavailable; running without the locks (fail open)");
            unlocked(config, parts, body)
        }
        Err(error) => {
            let what = config.keys.describe();
            MultiStart::Rejected(LockRejection::from_error(error, &what, config.options.busy))
        }
    }
}
