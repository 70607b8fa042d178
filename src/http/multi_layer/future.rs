//! The response future of [`MultiLock`](super::MultiLock): take the locks → call (aborted
//! on a loss if the layer says so) → release → respond.

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

use super::start::MultiStart;
use super::MultiConfig;
use crate::backend::BoxFuture;
use crate::engine::MultiLockGuard;
use crate::http::layer::future::log_release;
use crate::http::layer::response_body::{Answer, LockResponseBody};
use crate::http::rejection::LockRejection;

/// Response future of [`MultiLock`](super::MultiLock).
#[pin_project]
pub struct MultiLockResponseFuture<S>
where
    S: Service<Request<Body>>,
{
    #[pin]
    state: State<S::Future, S::Response, S::Error>,
    /// The inner service, while the locks are being taken.
    service: Option<S>,
    config: Arc<MultiConfig>,
}

#[pin_project(project = StateProj)]
enum State<F, R, E> {
    /// Reading the body, then taking the locks.
    Starting {
        start: BoxFuture<MultiStart>,
    },
    /// Answered without calling the inner service.
    Rejected {
        response: Option<Response>,
    },
    /// The inner service runs (the parts' watchdogs renew them); under `abort_on_lost`,
    /// `lost` completes when any part is lost.
    Calling {
        #[pin]
        inner: F,
        guard: Option<MultiLockGuard>,
        lost: Option<BoxFuture<()>>,
    },
    /// Releasing before the response is handed back.
    Releasing {
        release: BoxFuture<()>,
        output: Option<Result<Answer<R>, E>>,
    },
    Done,
}

impl<S> MultiLockResponseFuture<S>
where
    S: Service<Request<Body>>,
{
    /// Calls `service` once `start` is over.
    pub(super) fn later(
        start: BoxFuture<MultiStart>,
        service: S,
        config: Arc<MultiConfig>,
    ) -> Self {
        MultiLockResponseFuture {
            state: State::Starting { start },
            service: Some(service),
            config,
        }
    }

    /// Started at once: the inner service is called (or the request rejected) now.
    pub(super) fn started(start: MultiStart, service: &mut S, config: &Arc<MultiConfig>) -> Self {
        MultiLockResponseFuture {
            state: call(start, service, config),
            service: None,
            config: config.clone(),
        }
    }
}

/// The state once the start is over.
fn call<S>(
    start: MultiStart,
    service: &mut S,
    config: &MultiConfig,
) -> State<S::Future, S::Response, S::Error>
where
    S: Service<Request<Body>>,
{
    match start {
        MultiStart::Locked(request, guard) => State::Calling {
            lost: config.options.abort_on_lost.then(|| {
                let loss = guard.loss();
                Box::pin(async move { loss.lost().await }) as BoxFuture<()>
            }),
            inner: service.call(request),
            guard: Some(guard),
        },
        MultiStart::Unlocked(request) => State::Calling {
            inner: service.call(request),
            guard: None,
            lost: None,
        },
        MultiStart::Rejected(rejection) => State::Rejected {
            response: Some(config.options.respond(rejection)),
        },
    }
}

impl<S, ResBody> Future for MultiLockResponseFuture<S>
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
                StateProj::Starting { start } => {
                    let start = ready!(start.as_mut().poll(cx));
                    let mut service = this
                        .service
                        .take()
                        .expect("the service is called once, after the locks are taken");
                    this.state.set(call(start, &mut service, this.config));
                }
                StateProj::Rejected { response } => {
                    let response = response.take().expect("a rejection is answered once");
                    this.state.set(State::Done);
                    return Poll::Ready(Ok(response.map(LockResponseBody::rejection)));
                }
                StateProj::Calling { inner, guard, lost } => {
                    let output = match inner.poll(cx) {
                        Poll::Ready(output) => output.map(Answer::Inner),
                        Poll::Pending => {
                            let Some(wait) = lost else {
                                return Poll::Pending;
                            };
                            ready!(wait.as_mut().poll(cx));
                            // A part is lost: the handler is dropped and the rest released
                            // (below) before the 503 goes out.
                            let Some(held) = guard.as_ref() else {
                                return Poll::Pending;
                            };
                            let response = this.config.options.respond(lost_rejection(held));
                            Ok(Answer::Rejection(response))
                        }
                    };
                    match guard.take() {
                        Some(guard) => this.state.set(State::Releasing {
                            release: Box::pin(release(guard)),
                            output: Some(output),
                        }),
                        None => {
                            this.state.set(State::Done);
                            return Poll::Ready(output.map(Answer::into_response));
                        }
                    }
                }
                StateProj::Releasing { release, output } => {
                    ready!(release.as_mut().poll(cx));
                    let output = output.take().expect("the output is kept until released");
                    this.state.set(State::Done);
                    return Poll::Ready(output.map(Answer::into_response));
                }
                StateProj::Done => panic!("MultiLockResponseFuture polled after completion"),
            }
        }
    }
}

/// The answer for a multi-lock lost while the handler ran, naming the part that was lost.
fn lost_rejection(guard: &MultiLockGuard) -> LockRejection {
    let parts = guard.parts();
    let lost = parts.iter().find(|part| part.is_lost()).or(parts.first());
    match lost {
        Some(part) => LockRejection::Lost {
            key: part.key().clone(),
        },
        // A multi-lock has at least one part; should that ever change, still a 503.
        None => LockRejection::from_error(
            crate::LockError::Unavailable(crate::BackendError::new("multi-lock lost")),
            "lock keys",
            Default::default(),
        ),
    }
}

/// Releases every part before the response goes out; while the backend cannot be reached,
/// the response goes out at once and the releases go on in the background.
async fn release(guard: MultiLockGuard) {
    for (key, outcome) in guard.release_promptly().await {
        log_release(&key, outcome);
    }
}
