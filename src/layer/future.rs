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
use tower::Service;

use super::Config;
use crate::backend::BoxFuture;
use crate::guard::LockGuard;
use crate::manager::LockManager;
use crate::rejection::LockRejection;
use crate::request::InlineWatchdog;
use crate::LockError;

/// What happened before the inner service is called.
enum Start<B> {
    Locked(Request<B>, LockGuard, Option<InlineWatchdog>),
    Unlocked(Request<B>),
    Rejected(LockRejection),
}

/// Response future of [`Lock`](super::Lock).
#[pin_project]
pub struct ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    #[pin]
    state: State<S::Future, B, S::Error>,
    service: Option<S>,
    config: Arc<Config>,
}

#[pin_project(project = StateProj)]
enum State<F, B, E> {
    /// Reading the key and waiting for the lock.
    Starting {
        start: BoxFuture<Start<B>>,
    },
    /// The inner service runs; the watchdog (declared first: dropped first) renews.
    Calling {
        watchdog: Option<InlineWatchdog>,
        #[pin]
        inner: F,
        guard: Option<LockGuard>,
    },
    /// Releasing before the response is handed back.
    Releasing {
        release: BoxFuture<()>,
        output: Option<Result<Response, E>>,
    },
    Done,
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
    B: Send + 'static,
{
    pub(crate) fn new(service: S, config: Arc<Config>, request: Request<B>) -> Self {
        ResponseFuture {
            state: State::Starting {
                start: Box::pin(start(config.clone(), request)),
            },
            service: Some(service),
            config,
        }
    }
}

impl<S, B, ResBody> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = http::Response<ResBody>>,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Output = Result<Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Starting { start } => {
                    let (request, guard, watchdog) = match ready!(start.as_mut().poll(cx)) {
                        Start::Locked(request, guard, watchdog) => (request, Some(guard), watchdog),
                        Start::Unlocked(request) => (request, None, None),
                        Start::Rejected(rejection) => {
                            this.state.set(State::Done);
                            return Poll::Ready(Ok(this.config.respond(rejection)));
                        }
                    };
                    let mut service = this
                        .service
                        .take()
                        .expect("the service is called once, after the lock is taken");
                    let inner = service.call(request);
                    this.state.set(State::Calling {
                        watchdog,
                        inner,
                        guard,
                    });
                }
                StateProj::Calling {
                    watchdog,
                    inner,
                    guard,
                } => {
                    // The handler first: one that finishes at once never sets up the
                    // watchdog's timer.
                    let output = match inner.poll(cx) {
                        Poll::Ready(output) => output.map(|response| response.map(Body::new)),
                        Poll::Pending => {
                            let lost = watchdog
                                .as_mut()
                                .is_some_and(|renewing| renewing.as_mut().poll(cx).is_ready());
                            if !lost {
                                return Poll::Pending;
                            }
                            // Lost (the watchdog has traced why).
                            *watchdog = None;
                            if !this.config.abort_on_lost {
                                return Poll::Pending;
                            }
                            let Some(guard) = guard.take() else {
                                return Poll::Pending;
                            };
                            let key = guard.key().clone();
                            let response = this.config.respond(LockRejection::Lost { key });
                            this.state.set(State::Releasing {
                                release: release(guard),
                                output: Some(Ok(response)),
                            });
                            continue;
                        }
                    };
                    *watchdog = None;
                    match guard.take() {
                        Some(guard) => this.state.set(State::Releasing {
                            release: release(guard),
                            output: Some(output),
                        }),
                        None => {
                            this.state.set(State::Done);
                            return Poll::Ready(output);
                        }
                    }
                }
                StateProj::Releasing { release, output } => {
                    ready!(release.as_mut().poll(cx));
                    let output = output.take().expect("the output is kept until released");
                    this.state.set(State::Done);
                    return Poll::Ready(output);
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            }
        }
    }
}

fn release(guard: LockGuard) -> BoxFuture<()> {
    Box::pin(async move {
        let key = guard.key().clone();
        if let Err(error) = guard.release().await {
            tracing::warn!(%key, %error, "tower-lock: release failed; the lock ends with its lease");
        }
    })
}

/// Finds the manager, reads the key and takes the lock.
async fn start<B>(config: Arc<Config>, request: Request<B>) -> Start<B> {
    let (mut parts, body) = request.into_parts();
    let manager = match (&config.manager, parts.extensions.get::<LockManager>()) {
        (Some(manager), None) => {
            parts.extensions.insert(manager.clone());
            manager.clone()
        }
        (Some(manager), Some(_)) => manager.clone(),
        (None, Some(manager)) => manager.clone(),
        (None, None) => {
            tracing::error!(
                "tower-lock: no LockManager for this request: add `.layer(Extension(lock_manager))` \
                 outside the LockLayer, or `LockLayer::manager(..)`; answering 500"
            );
            return Start::Rejected(LockRejection::NoManager);
        }
    };
    let raw = match config.source.read_routed(&mut parts).await {
        Ok(Some(raw)) => raw,
        Ok(None) => return Start::Unlocked(Request::from_parts(parts, body)),
        Err(LockRejection::MissingKey { .. }) if config.allow_missing_key => {
            return Start::Unlocked(Request::from_parts(parts, body))
        }
        Err(rejection) => {
            if let LockRejection::Misplaced { .. } = rejection {
                tracing::error!("tower-lock: {rejection}");
            }
            return Start::Rejected(rejection);
        }
    };
    let name = match (config.name)(&raw) {
        Ok(name) => name,
        Err(reason) => {
            let what = config.source.describe();
            return Start::Rejected(LockRejection::InvalidKey { what, reason });
        }
    };
    let mut lock = manager.lock(&name);
    if let Some(wait) = config.wait {
        lock = lock.wait(wait);
    }
    if let Some(lease) = config.lease {
        lock = lock.lease(lease);
    }
    match lock.acquire_parts(false).await {
        Ok((guard, watchdog)) => {
            parts.extensions.insert(guard.held());
            Start::Locked(Request::from_parts(parts, body), guard, watchdog)
        }
        Err(LockError::Unavailable(error)) if config.fail_open => {
            tracing::warn!(%error, key = %name, "tower-lock: backend unavailable; running without the lock (fail open)");
            Start::Unlocked(Request::from_parts(parts, body))
        }
        Err(error) => {
            let what = config.source.describe();
            Start::Rejected(LockRejection::from_error(error, &what, config.busy_status))
        }
    }
}
