//! One request through the coalescing layer: its key, its flight in this process, then
//! the key's lock across processes (or the response another execution left), the handler,
//! and its response shared with the release.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::response::{IntoResponse, Response};
use axum::BoxError;
use http::header::SET_COOKIE;
use http::Request;
use tokio::time::Instant;
use tower_service::Service;

use super::config::{CoalesceConfig, OnUnavailable, OnWaitEnd};
use super::flight::{FlightLead, Seat};
use super::key::{key_of, varies_beyond_key, Keyed};
use super::outcome::{shared_response, Outcome};
use super::rejection::CoalesceRejection;
use crate::backend::LockRecord;
use crate::engine::{DropSafe, LockGuard, LockManager};
use crate::error::LockError;
use crate::idempotency::capture::{capture, Captured};
use crate::idempotency::run::{call, pass_through, request_manager};
use crate::idempotency::stored::{cache_control_says, StoredResponse};
use crate::telemetry::{self, throttled, TARGET};

/// How long a shared response (or word that it is not for sharing) is kept at least, for
/// the waiting requests of other processes to read it after they are woken.
pub(super) const HANDOFF: Duration = Duration::from_secs(1);

pub(super) async fn run<S, B>(
    config: Arc<CoalesceConfig>,
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
    let (parts, body) = request.into_parts();
    let (name, digest) = match key_of(&config, &parts) {
        Keyed::Key { name, digest } => (name, digest),
        Keyed::Private => {
            telemetry::coalesce("private");
            return pass_through(service, Request::from_parts(parts, body)).await;
        }
        Keyed::NoKey => {
            telemetry::coalesce("no_key");
            return pass_through(service, Request::from_parts(parts, body)).await;
        }
    };
    let Some(manager) = request_manager(config.manager.as_ref(), &parts, "CoalesceLayer") else {
        return Ok(answer(CoalesceRejection::NoManager));
    };
    let manager = manager.clone();
    let request = Request::from_parts(parts, body);
    // When the wait ends: read from the clock once this request first waits (a leader
    // that never followed has all of it).
    let mut deadline: Option<Instant> = None;
    loop {
        let mut hear = match config.flights.board(&digest) {
            Seat::Leader(lead) => {
                let wait = match deadline {
                    None => config.wait,
                    Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                };
                let led = Led {
                    config,
                    manager,
                    name,
                    digest,
                    wait,
                    lead,
                };
                return led.run(service, request).await;
            }
            Seat::Follower(hear) => hear,
        };
        let deadline = *deadline.get_or_insert_with(|| Instant::now() + config.wait);
        let heard = tokio::time::timeout_at(deadline, async {
            match hear.wait_for(Option::is_some).await {
                Ok(outcome) => outcome.clone().unwrap_or(Outcome::LeadNext),
                // The leader goes away with a word; none heard is the same as its absence.
                Err(_) => Outcome::LeadNext,
            }
        })
        .await;
        let Ok(outcome) = heard else {
            return run_or_refuse(wait_ended(&config), service, request).await;
        };
        match outcome {
            Outcome::Shared(stored) => {
                telemetry::coalesce("joined");
                return Ok(shared_response(&stored));
            }
            Outcome::RunYourselves => {
                telemetry::coalesce("not_shared");
                return pass_through(service, request).await;
            }
            Outcome::Unavailable => {
                return run_or_refuse(unavailable(&config), service, request).await
            }
            // One of this flight's requests leads the next (one at a time across the fleet:
            // a handler that asked for a retry is not run by every waiter at once).
            Outcome::LeadNext => continue,
        }
    }
}

/// The request that leads its flight in this process.
struct Led {
    config: Arc<CoalesceConfig>,
    manager: LockManager,
    name: String,
    digest: [u8; 32],
    /// How long it may wait for the key's lock.
    wait: Duration,
    lead: FlightLead,
}

impl Led {
    /// Takes the key's lock (or finds what another execution left) and tells its flight.
    async fn run<S, B>(self, service: S, request: Request<Body>) -> Result<Response, S::Error>
    where
        S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Send + 'static,
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let acquisition = self
            .manager
            .lock(&self.name)
            .unless_recorded()
            .fixed_lease(self.config.lease);
        let taken = if self.wait.is_zero() {
            acquisition.try_acquire().await
        } else {
            acquisition.wait(self.wait).acquire().await
        };
        let Led {
            config,
            digest,
            lead,
            ..
        } = self;
        match taken {
            Ok(guard) => {
                // Finished even if this request's client goes away: other requests wait
                // for its response.
                let work = execute(config, service, request, guard, digest, lead);
                DropSafe::new(Box::pin(work), |_| None).await
            }
            Err(LockError::Recorded { record, .. }) => {
                let outcome = Outcome::from_record(&record, &digest);
                lead.tell(outcome.clone());
                match outcome {
                    Outcome::Shared(stored) => {
                        telemetry::coalesce("joined");
                        Ok(shared_response(&stored))
                    }
                    _ => {
                        telemetry::coalesce("not_shared");
                        pass_through(service, request).await
                    }
                }
            }
            Err(LockError::TimedOut { .. }) => {
                lead.tell(Outcome::LeadNext);
                run_or_refuse(wait_ended(&config), service, request).await
            }
            Err(LockError::Unavailable(error)) => {
                throttled!(warn, %error, "tower-lock: the coalescing layer's backend is unavailable");
                lead.tell(Outcome::Unavailable);
                run_or_refuse(unavailable(&config), service, request).await
            }
            Err(error) => {
                // A backend without locks with a record (said when the layer was built).
                throttled!(error, %error, "tower-lock: the coalescing layer cannot take its key's lock; running the handler without coalescing");
                lead.tell(Outcome::RunYourselves);
                telemetry::coalesce("unprotected");
                pass_through(service, request).await
            }
        }
    }
}

/// Runs the handler under the key's lock, tells the flight what came of it, and leaves it
/// for other processes with the release.
async fn execute<S, B>(
    config: Arc<CoalesceConfig>,
    mut service: S,
    request: Request<Body>,
    guard: LockGuard,
    digest: [u8; 32],
    lead: FlightLead,
) -> Result<Response, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let response = match call(&mut service, request).await {
        Ok(response) => response,
        Err(error) => {
            lead.tell(Outcome::LeadNext);
            let _ = guard.release().await;
            return Err(error);
        }
    };
    let (head, body) = response.into_parts();
    let captured = capture(Box::pin(body), config.share_limit).await;
    // The record for other processes is written from the response's parts; its copy for
    // this process's followers is made only if the flight has some (on distinct keys
    // nobody waits).
    let shared = sharing(&config, &head, &captured).and_then(|data| {
        StoredResponse::record_of(&digest, head.status, &head.headers, data)
            .map(|record| (data, record))
            .ok_or(Outcome::RunYourselves)
    });
    telemetry::coalesce(if shared.is_ok() {
        "led"
    } else {
        "led_not_shared"
    });
    // The flight first (it is answered from memory), then the other processes.
    lead.tell_with(|| match &shared {
        Ok((data, _)) => StoredResponse::new(digest, head.status, &head.headers, (*data).clone())
            .map_or(Outcome::RunYourselves, |stored| {
                Outcome::Shared(Arc::new(stored))
            }),
        Err(outcome) => outcome.clone(),
    });
    let (record, retention) = match shared {
        Ok((_, record)) => (Some(record), config.window.max(HANDOFF)),
        Err(outcome) => (outcome.record(), HANDOFF),
    };
    let released = match record {
        Some(record) => {
            let mut record = LockRecord::new(record, retention);
            // Without a window, only the requests that wait now are to have it: when none
            // does, nothing is stored (the backend tells, in the release's step).
            if config.window.is_zero() {
                record = record.only_if_awaited();
            }
            guard.release_with_record(record).await
        }
        None => guard.release().await,
    };
    if let Err(error) = released {
        throttled!(warn, %error, "tower-lock: a coalesced response could not be left for other processes; their waiters lead when the lease ends");
    }
    Ok(http::Response::from_parts(head, captured.into_body()))
}

/// Whether the handler's response is for the requests that wait for it: `Ok`, its body;
/// else what they do.
fn sharing<'a, B>(
    config: &CoalesceConfig,
    head: &http::response::Parts,
    captured: &'a Captured<B>,
) -> Result<&'a Bytes, Outcome> {
    if !(config.share_if)(head.status, &head.headers) {
        return Err(Outcome::LeadNext);
    }
    let private = cache_control_says(&head.headers, "private")
        || cache_control_says(&head.headers, "no-store")
        || head.headers.contains_key(SET_COOKIE)
        || varies_beyond_key(config, &head.headers);
    match captured {
        Captured::Whole {
            data,
            trailers: None,
        } if !private => Ok(data),
        _ => Err(Outcome::RunYourselves),
    }
}

/// A request whose wait for another's execution ended first runs the handler itself, or is
/// answered `503`.
fn wait_ended(config: &CoalesceConfig) -> (Option<CoalesceRejection>, Option<&'static str>) {
    telemetry::coalesce("timed_out");
    let refusal =
        (config.on_wait_end == OnWaitEnd::Reject).then_some(CoalesceRejection::WaitEnded {
            retry_after: config.retry_after,
        });
    (refusal, None)
}

/// A request that found the backend unreachable runs the handler uncoalesced, or is
/// answered `503`.
fn unavailable(config: &CoalesceConfig) -> (Option<CoalesceRejection>, Option<&'static str>) {
    let refusal = (config.on_unavailable == OnUnavailable::Reject).then_some(
        CoalesceRejection::Unavailable {
            retry_after: config.retry_after,
        },
    );
    (refusal, Some("unprotected"))
}

/// Answers `refusal`, or without one runs the handler (counted as `outcome`, if any).
async fn run_or_refuse<S, B>(
    (refusal, outcome): (Option<CoalesceRejection>, Option<&'static str>),
    service: S,
    request: Request<Body>,
) -> Result<Response, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    match refusal {
        Some(refusal) => Ok(answer(refusal)),
        None => {
            if let Some(outcome) = outcome {
                telemetry::coalesce(outcome);
            }
            pass_through(service, request).await
        }
    }
}

/// The layer's own answer.
fn answer(rejection: CoalesceRejection) -> Response {
    telemetry::coalesce(rejection.code());
    tracing::debug!(target: TARGET, code = rejection.code(), "tower-lock: coalescing layer answered");
    rejection.into_response()
}
