//! The response future of [`Lock`](super::Lock): acquire → call (watchdog polled alongside)
//! → release → respond.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use axum::body::{Bytes, HttpBody};
use axum::response::Response;
use axum::BoxError;
use http::Request;
use pin_project::pin_project;
use tower_service::Service;

use super::request_body::LockRequestBody;
use super::request_guard::RequestGuard;
use super::response_body::{Answer, LockResponseBody};
use super::start::{Acquiring, Later, Start};
use super::LayerConfig;
use crate::backend::BoxFuture;
use crate::engine::DeferredWatchdog;

/// Response future of [`Lock`](super::Lock).
#[pin_project]
pub struct LockResponseFuture<S, B>
where
    S: Service<Request<LockRequestBody<B>>>,
{
    #[pin]
    state: ResponseState<S::Future, S::Response, S::Error, B>,
    /// The inner service, while the lock is still being taken.
    service: Option<S>,
    /// Kept only where a later step needs it (a lock to wait for, an abort on loss): a
    /// clone per request changes the count of an `Arc` shared by every request.
    config: Option<Arc<LayerConfig>>,
}

#[pin_project(project = StateProj)]
enum ResponseState<F, R, E, B> {
    /// Reading the body, then taking the lock; or taking several.
    Starting {
        start: BoxFuture<Start<B>>,
    },
    /// Waiting for the lock.
    Acquiring {
        acquiring: Option<Acquiring<B>>,
    },
    /// Answered without calling the inner service.
    Rejected {
        response: Option<Response>,
    },
    /// The inner service runs; the watchdog (declared first: dropped first) renews.
    Calling {
        watchdog: DeferredWatchdog,
        #[pin]
        inner: F,
        guard: Option<RequestGuard>,
    },
    /// Releasing before the response is handed back.
    Releasing {
        release: BoxFuture<()>,
        output: Option<Result<Answer<R>, E>>,
    },
    Done,
}

impl<S, B> LockResponseFuture<S, B>
where
    S: Service<Request<LockRequestBody<B>>>,
{
    /// Calls `service` once the start is over.
    pub(super) fn later(later: Later<B>, service: S, config: Arc<LayerConfig>) -> Self {
        let state = match later {
            Later::Boxed(start) => ResponseState::Starting { start },
            Later::Acquire(acquiring) => ResponseState::Acquiring {
                acquiring: Some(acquiring),
            },
        };
        LockResponseFuture {
            state,
            service: Some(service),
            config: Some(config),
        }
    }

    /// Started at once: the inner service is called (or the request rejected) now.
    pub(super) fn started(start: Start<B>, service: &mut S, config: &Arc<LayerConfig>) -> Self {
        let state = match start {
            Start::Locked(request, guard, watchdog) => ResponseState::Calling {
                watchdog: match watchdog {
                    Some(keeper) => DeferredWatchdog::Unstarted(keeper),
                    // An explicit lease ends on its own, a multi-lock's parts renew
                    // themselves: aborting means watching for the loss (the loss signal
                    // fires a margin before a lease ends).
                    None if config.options.abort_on_lost => DeferredWatchdog::Running(guard.lost()),
                    None => DeferredWatchdog::Off,
                },
                inner: service.call(request),
                guard: Some(guard),
            },
            Start::Unlocked(request) => ResponseState::Calling {
                watchdog: DeferredWatchdog::Off,
                inner: service.call(request),
                guard: None,
            },
            Start::Rejected(rejection) => ResponseState::Rejected {
                response: Some(config.options.respond(rejection)),
            },
        };
        LockResponseFuture {
            state,
            service: None,
            config: config.options.abort_on_lost.then(|| config.clone()),
        }
    }
}

impl<S, B, ResBody> Future for LockResponseFuture<S, B>
where
    S: Service<Request<LockRequestBody<B>>, Response = http::Response<ResBody>>,
    ResBody: HttpBody<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    type Output = Result<http::Response<LockResponseBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Starting { start } => {
                    let start = ready!(start.as_mut().poll(cx));
                    let config = this.config.as_ref().expect("kept while starting");
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
                            let start =
                                |keeper| guard.as_ref().and_then(|guard| guard.keep_alive(keeper));
                            if !watchdog.poll_lost(start, cx) {
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
                            let response = config.options.respond(guard.lost_rejection());
                            this.state.set(ResponseState::Releasing {
                                release: guard.release(),
                                output: Some(Ok(Answer::Rejection(response))),
                            });
                            continue;
                        }
                    };
                    *watchdog = DeferredWatchdog::Off;
                    let pending = match guard.take().map(RequestGuard::release_now) {
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
                StateProj::Done => panic!("LockResponseFuture polled after completion"),
            }
        }
    }
}

/// Calls the inner service that was polled ready, once the start is over.
fn call<S, B>(
    start: Start<B>,
    service: &mut Option<S>,
    config: &Arc<LayerConfig>,
) -> ResponseState<S::Future, S::Response, S::Error, B>
where
    S: Service<Request<LockRequestBody<B>>>,
{
    let mut service = service
        .take()
        .expect("the service is called once, after the lock is taken");
    LockResponseFuture::started(start, &mut service, config).state
}
