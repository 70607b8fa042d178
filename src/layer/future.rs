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
use crate::request::{InlineWatchdog, PendingWatchdog};
use crate::LockError;

/// What happened before the inner service is called.
enum Start<B> {
    Locked(Request<B>, LockGuard, Option<PendingWatchdog>),
    Unlocked(Request<B>),
    Rejected(LockRejection),
}

/// The watchdog of a request's lock, started only once the handler has to wait.
enum Watchdog {
    /// No lease to renew (none held, an explicit lease, or lost).
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
        watchdog: Watchdog,
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
                        Start::Locked(request, guard, watchdog) => {
                            let watchdog = watchdog.map_or(Watchdog::Off, Watchdog::Unstarted);
                            (request, Some(guard), watchdog)
                        }
                        Start::Unlocked(request) => (request, None, Watchdog::Off),
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
                    // The handler first: one that finishes at once never starts the
                    // watchdog.
                    let output = match inner.poll(cx) {
                        Poll::Ready(output) => output.map(|response| response.map(Body::new)),
                        Poll::Pending => {
                            if !watchdog.poll_lost(guard.as_ref(), cx) {
                                return Poll::Pending;
                            }
                            // Lost (the watchdog has traced why).
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
                    *watchdog = Watchdog::Off;
                    let pending = match guard.take().map(release_now) {
                        Some(Err(release)) => release,
                        Some(Ok(())) | None => {
                            this.state.set(State::Done);
                            return Poll::Ready(output);
                        }
                    };
                    this.state.set(State::Releasing {
                        release: pending,
                        output: Some(output),
                    });
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

/// Releases at once when the backend can; otherwise the future that releases.
fn release_now(guard: LockGuard) -> Result<(), BoxFuture<()>> {
    match guard.release_now() {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => {
            tracing::warn!(%error, "tower-lock: release failed; the lock ends with its lease");
            Ok(())
        }
        Err(guard) => Err(release(guard)),
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
    let acquired = match lock.acquire_now(false) {
        Ok(acquired) => acquired,
        Err(lock) => lock.acquire_parts(false).await,
    };
    match acquired {
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
