//! One request through the idempotency layer: its body and key, the claim of the key's
//! lock (or its stored response), then the handler, and its response stored with the
//! lock's release.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::response::{IntoResponse, Response};
use axum::BoxError;
use http::request::Parts;
use http::Request;
use sha2::{Digest, Sha256};
use tower_service::Service;

use super::capture::{capture, Captured};
use super::config::{IdempotencyConfig, OnConcurrent};
use super::key::lock_name;
use super::rejection::IdempotencyRejection;
use super::stored::{cache_control_says, Fingerprint, StoredResponse};
use super::{DoNotStore, IdempotencyKey};
use crate::engine::{Acquired, DeferredWatchdog, DropSafe, LockManager};
use crate::error::{LockError, Released};
use crate::http::layer::body::read_body;
use crate::http::LockRejection;
use crate::telemetry::{self, throttled, TARGET};

/// How soon to retry after the lock backend was found unreachable.
const UNAVAILABLE_RETRY_AFTER: Duration = Duration::from_secs(1);

pub(super) async fn run<S, B>(
    config: Arc<IdempotencyConfig>,
    service: S,
    request: Request<Body>,
) -> Result<Response, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    if !config.methods.contains(request.method()) {
        return pass_through(service, request).await;
    }
    let (mut parts, body) = request.into_parts();
    let body = match read_whole(body, &config).await {
        Ok(body) => body,
        Err(rejection) => return Ok(answer(rejection)),
    };
    let key = match config.source.key(&parts, Some(&body), config.max_key_len) {
        Ok(Some(key)) => key,
        Ok(None) if config.required => {
            let what = config.source.what();
            return Ok(answer(IdempotencyRejection::MissingKey { what }));
        }
        Ok(None) => {
            telemetry::idempotency("unprotected");
            return pass_through(service, Request::from_parts(parts, Body::from(body))).await;
        }
        Err(rejection) => return Ok(answer(rejection)),
    };
    let Some(manager) = request_manager(config.manager.as_ref(), &parts, "IdempotencyLayer") else {
        return Ok(answer(IdempotencyRejection::NoManager));
    };
    let scope = config.scope.as_ref().and_then(|scope| scope(&parts));
    let name = lock_name(&config.namespace, scope.as_deref(), &key);
    let fingerprint = fingerprint(&config, &parts, &body);
    let claimed = match claim(&config, manager, &name, &fingerprint).await {
        Ok(claimed) => claimed,
        Err(LockError::Recorded { record, .. }) => {
            return Ok(replay(&config, &record, &fingerprint));
        }
        // The first request with the key, another request, still runs: the same answer
        // as once its response is stored, and at once.
        Err(LockError::HeldForOtherWork { .. }) => {
            let what = config.source.what();
            return Ok(answer(IdempotencyRejection::Mismatch { what }));
        }
        Err(LockError::TimedOut { .. }) => {
            let retry_after = config.retry_after;
            return Ok(answer(IdempotencyRejection::InProgress { retry_after }));
        }
        Err(LockError::Unavailable(error)) if config.fail_open => {
            throttled!(warn, %error, "tower-lock: idempotency store unavailable; passing the request through unprotected (fail_open)");
            telemetry::idempotency("unprotected");
            return pass_through(service, Request::from_parts(parts, Body::from(body))).await;
        }
        Err(LockError::Unavailable(error)) => {
            throttled!(warn, %error, "tower-lock: idempotency store unavailable; answering 503");
            let retry_after = UNAVAILABLE_RETRY_AFTER;
            return Ok(answer(IdempotencyRejection::Unavailable {
                error,
                retry_after,
            }));
        }
        Err(LockError::Unsupported { backend, .. }) => {
            throttled!(error, backend, "tower-lock: the idempotency layer's backend has no locks with a record; answering 500");
            return Ok(answer(IdempotencyRejection::NoRecords { backend }));
        }
        Err(error) => {
            // Not reached with a fixed-length name and a plain lock; said plainly if it is.
            tracing::error!(target: TARGET, %error, "tower-lock: the idempotency layer could not claim its key");
            let error = error.to_string();
            return Ok(answer(IdempotencyRejection::UnreadableRecord { error }));
        }
    };
    parts.extensions.insert(IdempotencyKey(key));
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    let slot = config
        .transactions
        .as_ref()
        .map(|transactions| super::transaction::slot(transactions, &mut parts));
    #[cfg(not(any(feature = "postgres", feature = "mysql")))]
    let slot = None;
    let request = Request::from_parts(parts, Body::from(body));
    let finish_on_disconnect = config.finish_on_disconnect;
    // Moved on, not cloned: a clone and its drop would pass the settings' count's cache line
    // between the threads that serve requests.
    let work = execute(config, service, request, claimed, fingerprint, slot);
    if !finish_on_disconnect {
        return work.await;
    }
    // Finished in the background if the request is dropped (its client hung up): the
    // handler is not cancelled, and its response is stored for the client's retry. (No
    // task of its own while the client waits: one per request cost a fifth of the
    // throughput.)
    DropSafe::new(Box::pin(work), |_| None).await
}

/// The request body, read whole within the layer's limit and time.
async fn read_whole(body: Body, config: &IdempotencyConfig) -> Result<Bytes, IdempotencyRejection> {
    if body.is_end_stream() {
        return Ok(Bytes::new());
    }
    let body = read_body(body, &config.body)
        .await
        .map_err(|rejection| match rejection {
            LockRejection::BodyTooLarge { limit } => IdempotencyRejection::BodyTooLarge { limit },
            LockRejection::BodyTimeout { after } => IdempotencyRejection::BodyTimeout { after },
            other => IdempotencyRejection::BodyUnreadable {
                error: other.body_text(),
            },
        })?;
    axum::body::to_bytes(Body::new(body), usize::MAX)
        .await
        .map_err(|error| IdempotencyRejection::BodyUnreadable {
            error: error.to_string(),
        })
}

/// A layer's own manager, else the request's (`layer` names the layer in the error logged
/// when there is neither).
pub(crate) fn request_manager<'a>(
    own: Option<&'a LockManager>,
    parts: &'a Parts,
    layer: &'static str,
) -> Option<&'a LockManager> {
    // Borrowed, not cloned: every request's clone and drop of the manager's count would
    // pass its cache line between the threads that serve requests.
    let manager = own.or_else(|| parts.extensions.get::<LockManager>());
    if manager.is_none() {
        throttled!(
            error,
            layer,
            "tower-lock: no LockManager for this request: give the layer `.manager(..)` or add \
             `.layer(Extension(lock_manager))` outside it; answering 500"
        );
    }
    manager
}

/// What a repeated request must match: a hash of its method, path, query and body, or of
/// what the layer's fingerprint function picks.
fn fingerprint(config: &IdempotencyConfig, parts: &Parts, body: &Bytes) -> Fingerprint {
    let mut hash = Sha256::new();
    match &config.fingerprint {
        Some(pick) => hash.update(pick(parts, body)),
        None => {
            for part in [
                parts.method.as_str().as_bytes(),
                parts.uri.path().as_bytes(),
                parts.uri.query().unwrap_or("").as_bytes(),
                body,
            ] {
                hash.update((part.len() as u64).to_be_bytes());
                hash.update(part);
            }
        }
    }
    hash.finalize().into()
}

/// Takes the key's lock unless a response is stored for it, for this request (its
/// fingerprint, kept with the lock while it runs: another request with the key is refused at
/// once). A repetition that finds the first request running waits for it (counted), or is
/// refused at once. The lock's watchdog comes back unstarted: it starts only if the
/// handler has to wait.
async fn claim(
    config: &IdempotencyConfig,
    manager: &LockManager,
    name: &str,
    fingerprint: &Fingerprint,
) -> Result<Acquired, LockError> {
    let request = || {
        manager
            .lock(name)
            // Owned by the Bytes: its clones (one kept by the backend) share it.
            .unless_recorded_for(Bytes::from_owner(*fingerprint))
    };
    let first = request().wait(Duration::ZERO).acquire_unwatched().await;
    if config.concurrent == OnConcurrent::Conflict
        || !matches!(first, Err(LockError::TimedOut { .. }))
    {
        return first;
    }
    telemetry::idempotency("waited");
    match config.wait {
        Some(wait) => request().wait(wait).acquire_unwatched().await,
        None => request().acquire_unwatched().await,
    }
}

/// The stored response, if the request is the one it answered.
fn replay(config: &IdempotencyConfig, record: &Bytes, fingerprint: &Fingerprint) -> Response {
    let stored = match StoredResponse::decode(record) {
        Ok(stored) => stored,
        Err(error) => {
            tracing::error!(target: TARGET, %error, "tower-lock: a stored idempotent response cannot be read");
            return answer(IdempotencyRejection::UnreadableRecord { error });
        }
    };
    if stored.fingerprint != *fingerprint {
        let what = config.source.what();
        return answer(IdempotencyRejection::Mismatch { what });
    }
    telemetry::idempotency("replayed");
    stored.replay()
}

/// Runs the handler under the key's lock; stores its response with the release when it
/// may be stored.
async fn execute<S, B>(
    config: Arc<IdempotencyConfig>,
    mut service: S,
    request: Request<Body>,
    (guard, keeper): Acquired,
    fingerprint: Fingerprint,
    slot: Option<Slot>,
) -> Result<Response, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    // Renews the lease while the handler, its body or its transaction waits; dropped
    // before the release.
    let mut watchdog = DeferredWatchdog::new(keeper);
    let response = match watchdog.run(&guard, call(&mut service, request)).await {
        Ok(response) => response,
        Err(error) => {
            // Nothing to store: the key is free for a retry (a transaction of the handler's
            // rolls back when dropped).
            drop(watchdog);
            let _ = guard.release().await;
            return Err(error);
        }
    };
    telemetry::idempotency("executed");
    let (mut head, body) = response.into_parts();
    let refused = head.extensions.remove::<DoNotStore>().is_some()
        || cache_control_says(&head.headers, "no-store")
        || !(config.store_if)(head.status, &head.headers);
    let captured = watchdog
        .run(&guard, capture(Box::pin(body), config.store_limit))
        .await;
    let record = match (&captured, refused) {
        (
            Captured::Whole {
                data,
                trailers: None,
            },
            false,
        ) => StoredResponse::record_of(&fingerprint, head.status, &head.headers, data),
        _ => None,
    };
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    if let (Some(slot), Some(transactions)) = (slot, &config.transactions) {
        let record = record.clone();
        let key = guard.key().as_str().to_owned();
        let ending = super::transaction::end(transactions, slot, &key, record, config.retention);
        let ended = watchdog.run(&guard, ending).await;
        // A handler that wrote nothing in the transaction: its response is stored as usual.
        if !matches!(ended, super::transaction::Ended::NotBegun) {
            drop(watchdog);
            let answer = in_transaction(&config, ended, guard, &fingerprint).await;
            return Ok(answer.unwrap_or_else(|| Response::from_parts(head, captured.into_body())));
        }
    }
    #[cfg(not(any(feature = "postgres", feature = "mysql")))]
    let _ = slot;
    drop(watchdog);
    let released = match record {
        Some(record) => guard.release_recording(record, config.retention).await,
        None => {
            telemetry::idempotency("not_stored");
            guard.release().await
        }
    };
    match released {
        Ok(Released::NotHeld) => {
            throttled!(warn, "tower-lock: an idempotency key's lock was lost while its handler ran; its response was not stored");
        }
        Err(error) => {
            throttled!(warn, %error, "tower-lock: an idempotent response could not be stored; the key is claimed until its lease ends");
        }
        Ok(_) => {}
    }
    Ok(Response::from_parts(head, captured.into_body()))
}

/// A handler's transaction slot (PostgreSQL or MySQL).
#[cfg(any(feature = "postgres", feature = "mysql"))]
type Slot = super::transaction::SlotHandle;
#[cfg(not(any(feature = "postgres", feature = "mysql")))]
type Slot = std::convert::Infallible;

/// After a handler's transaction ended: the lock is released (the record, if any, was
/// committed with the transaction), and the answer, if not the handler's own.
#[cfg(any(feature = "postgres", feature = "mysql"))]
async fn in_transaction(
    config: &IdempotencyConfig,
    ended: super::transaction::Ended,
    guard: crate::engine::LockGuard,
    fingerprint: &Fingerprint,
) -> Option<Response> {
    use super::transaction::Ended;
    let answer = match ended {
        Ended::Committed | Ended::NotBegun => None,
        Ended::RolledBack => {
            telemetry::idempotency("not_stored");
            None
        }
        // Another run of the key committed first (this one's lock was lost meanwhile):
        // this run's work was rolled back, and its client gets the first one's answer.
        Ended::Superseded(first) => Some(replay(config, &first, fingerprint)),
        Ended::Failed(answer) => {
            throttled!(warn, "tower-lock: an idempotent request's transaction could not be committed; nothing was applied");
            Some(answer)
        }
    };
    let _ = guard.release().await;
    answer
}

/// The inner service, made ready, called.
pub(crate) async fn call<S>(
    service: &mut S,
    request: Request<Body>,
) -> Result<S::Response, S::Error>
where
    S: Service<Request<Body>>,
{
    std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
    service.call(request).await
}

/// The request, without idempotency.
pub(crate) async fn pass_through<S, B>(
    mut service: S,
    request: Request<Body>,
) -> Result<Response, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let response = call(&mut service, request).await?;
    Ok(response.map(Body::new))
}

/// The layer's own answer (never stored).
fn answer(rejection: IdempotencyRejection) -> Response {
    telemetry::idempotency(rejection.code());
    rejection.into_response()
}
