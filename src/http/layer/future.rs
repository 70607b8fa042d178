//! The response future of [`Lock`](super::Lock): acquire → call (watchdog polled alongside)
//! → release → respond.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use axum::BoxError;
use http::Request;
use pin_project::pin_project;
use tower_service::Service;

use super::response_body::{Answer, LockResponseBody};
use super::start::{Acquiring, Later, Start};
use super::Config;
use crate::backend::BoxFuture;
use crate::engine::LockGuard;
use crate::engine::{InlineWatchdog, PendingWatchdog};
use crate::error::{BackendError, Released};
use crate::http::rejection::LockRejection;
use crate::key::LockKey;
use crate::telemetry::throttled;

/// The watchdog of a request's lock, started only once the handler has to wait; for an
/// explicit lease under `abort_on_lost`, the wait for its end.
enum Watchdog {
    /// No lease to renew or watch (none held, an explicit lease kept to the end, or lost).
    Off,
    Unstarted(PendingWatchdog),
    Running(InlineWatchdog),
}

impl Watchdog {
    /// Starts the watchdog if need be and polls it: `true` once the lock is lost.
    fn poll_lost(&mut self, guard: Option<&LockGuard>, cx: &mut Context<'_>) -> bool {
        if let Watchdog::Unstarted(keeper) = self {
            *self = match guard {
                Some(guard) => Watchdog::Running(guard.keep_alive(keeper.clone())),
                None => Watchdog::Off,
            };
        }
        let Watchdog::Running(renewing) = self else {
            return false;
        };
        if renewing.as_mut().poll(cx).is_pending() {
            return false;
        }
        *self = Watchdog::Off;
        true
    }
}

/// Response future of [`Lock`](super::Lock).
#[pin_project]
pub struct ResponseFuture<S>
where
    S: Service<Request<Body>>,
{
    #[pin]
    state: ResponseState<S::Future, S::Response, S::Error>,
    /// The inner service, while the lock is still being taken.
    service: Option<S>,
    /// Kept only where a later step needs it (a lock to wait for, an abort on loss): a
    /// clone per request changes the count of an `Arc` shared by every request.
    config: Option<Arc<Config>>,
}

#[pin_project(project = StateProj)]
enum ResponseState<F, R, E> {
    /// Reading the body, then taking the lock.
    ReadingBody {
        start: BoxFuture<Start>,
    },
    /// Waiting for the lock.
    Acquiring {
        acquiring: Option<Acquiring>,
    },
    /// Answered without calling the inner service.
    Rejected {
        response: Option<Response>,
    },
    /// The inner service runs; the watchdog (declared first: dropped first) renews.
    Calling {
        watchdog: Watchdog,
        #[pin]
        inner: F,
        guard: Option<LockGuard>,
    },
    /// Releasing before the response is handed back.
    Releasing {
        release: BoxFuture<()>,
        output: Option<Result<Answer<R>, E>>,
    },
    Done,
}

impl<S> ResponseFuture<S>
where
    S: Service<Request<Body>>,
{
    /// Calls `service` once the start is over.
    pub(super) fn later(later: Later, service: S, config: Arc<Config>) -> Self {
        let state = match later {
            Later::ReadBody(start) => ResponseState::ReadingBody { start },
            Later::Acquire(acquiring) => ResponseState::Acquiring {
                acquiring: Some(acquiring),
            },
        };
        ResponseFuture {
            state,
            service: Some(service),
            config: Some(config),
        }
    }

    /// Started at once: the inner service is called (or the request rejected) now.
    pub(super) fn started(start: Start, service: &mut S, config: &Arc<Config>) -> Self {
        let state = match start {
            Start::Locked(request, guard, watchdog) => ResponseState::Calling {
                watchdog: match watchdog {
                    Some(keeper) => Watchdog::Unstarted(keeper),
                    // An explicit lease ends on its own: aborting means watching for that
                    // (the loss signal fires a margin before it).
                    None if config.options.abort_on_lost => Watchdog::Running(lease_end(&guard)),
                    None => Watchdog::Off,
                },
                inner: service.call(request),
                guard: Some(guard),
            },
            Start::Unlocked(request) => ResponseState::Calling {
                watchdog: Watchdog::Off,
                inner: service.call(request),
                guard: None,
            },
            Start::Rejected(rejection) => ResponseState::Rejected {
                response: Some(config.options.respond(rejection)),
            },
        };
        ResponseFuture {
            state,
            service: None,
            config: config.options.abort_on_lost.then(|| config.clone()),
        }
    }
}

impl<S, ResBody> Future for ResponseFuture<S>
where
    S: Service<Request<Body>, Response = http::Response<ResBody>>,
    ResBody: HttpBody<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    type Output = Result<http::Response<LockResponseBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::ReadingBody { start } => {
                    let start = ready!(start.as_mut().poll(cx));
                    let config = this.config.as_ref().expect("kept while reading the body");
                    this.state.set(call(start, this.service, config));
                }
                StateProj::Acquiring { acquiring } => {
                    let waiting = acquiring.as_mut().expect("the lock is taken once");
                    let acquired = ready!(waiting.acquire.as_mut().poll(cx));
                    let waiting = acquiring.take().expect("the lock is taken once");
                    let config = this.config.as_ref().expect("kept while acquiring");
                    let start = waiting.finish(config, acquired);
                    this.state.set(call(start, this.service, config));
                }
                StateProj::Rejected { response } => {
                    let response = response.take().expect("a rejection is answered once");
                    this.state.set(ResponseState::Done);
                    return Poll::Ready(Ok(response.map(LockResponseBody::rejection)));
                }
                StateProj::Calling {
                    watchdog,
                    inner,
                    guard,
                } => {
                    // The handler first: one that finishes at once never starts the
                    // watchdog.
                    let output = match inner.poll(cx) {
                        Poll::Ready(output) => output.map(Answer::Inner),
                        Poll::Pending => {
                            if !watchdog.poll_lost(guard.as_ref(), cx) {
                                return Poll::Pending;
                            }
                            // Lost (the watchdog has traced why).
                            let Some(config) =
                                this.config.as_ref().filter(|c| c.options.abort_on_lost)
                            else {
                                return Poll::Pending;
                            };
                            let Some(guard) = guard.take() else {
                                return Poll::Pending;
                            };
                            let key = guard.key().clone();
                            let response = config.options.respond(LockRejection::Lost { key });
                            this.state.set(ResponseState::Releasing {
                                release: release(guard),
                                output: Some(Ok(Answer::Rejection(response))),
                            });
                            continue;
                        }
                    };
                    *watchdog = Watchdog::Off;
                    let pending = match guard.take().map(release_now) {
                        Some(Err(release)) => release,
                        Some(Ok(())) | None => {
                            this.state.set(ResponseState::Done);
                            return Poll::Ready(output.map(Answer::into_response));
                        }
                    };
                    this.state.set(ResponseState::Releasing {
                        release: pending,
                        output: Some(output),
                    });
                }
                StateProj::Releasing { release, output } => {
                    ready!(release.as_mut().poll(cx));
                    let output = output.take().expect("the output is kept until released");
                    this.state.set(ResponseState::Done);
                    return Poll::Ready(output.map(Answer::into_response));
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            }
        }
    }
}

/// Calls the inner service that was polled ready, once the start is over.
fn call<S>(
    start: Start,
    service: &mut Option<S>,
    config: &Arc<Config>,
) -> ResponseState<S::Future, S::Response, S::Error>
where
    S: Service<Request<Body>>,
{
    let mut service = service
        .take()
        .expect("the service is called once, after the lock is taken");
    ResponseFuture::started(start, &mut service, config).state
}

/// Completes when an explicit lease is lost (ended, or found gone).
fn lease_end(guard: &LockGuard) -> InlineWatchdog {
    let loss = guard.loss();
    Box::pin(async move { loss.lost().await })
}

/// Releases at once when the backend can; otherwise the future that releases.
fn release_now(guard: LockGuard) -> Result<(), BoxFuture<()>> {
    match guard.release_now() {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => {
            throttled!(warn, %error, "tower-lock: release failed; the lock ends with its lease");
            Ok(())
        }
        Err(guard) => Err(release(guard)),
    }
}

/// Releases before the response goes out; while the backend cannot be reached, the
/// response goes out at once and the release is retried in the background.
fn release(guard: LockGuard) -> BoxFuture<()> {
    Box::pin(async move {
        let key = guard.key().clone();
        log_release(&key, guard.release_promptly().await);
    })
}

/// Warns of a layer's release (before its response) that failed, or goes on in the
/// background because the backend cannot be reached (`None`).
pub(crate) fn log_release(key: &LockKey, outcome: Option<Result<Released, BackendError>>) {
    match outcome {
        Some(Err(error)) => {
            throttled!(warn, %key, %error, "tower-lock: release failed; the lock ends with its lease");
        }
        None => {
            throttled!(warn, %key, "tower-lock: lock backend unreachable; answering now and releasing in the background");
        }
        Some(Ok(_)) => {}
    }
}
