//! The `Lock` service.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::BoxError;
use http::Request;
use tower_service::Service;

use super::future::ResponseFuture;
use super::response_body::LockResponseBody;
use super::start::begin;
use super::Config;

/// Runs each request under its lock. Built by [`LockLayer`](super::LockLayer).
#[derive(Clone)]
pub struct Lock<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> Lock<S> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        Lock { inner, config }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// The inner service receives axum's [`Body`]: read in full before the lock is taken
/// (unless the layer [streams](super::LockLayer::stream_body) it), or the request's own
/// body as it arrives. Its response body comes back as it is, inside a
/// [`LockResponseBody`] (which otherwise holds a rejection's body).
impl<S, B, ResBody> Service<Request<B>> for Lock<S>
where
    S: Service<Request<Body>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    ResBody: HttpBody<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    type Response = http::Response<LockResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match begin(&self.config, request) {
            // Nothing to wait for: call the instance that was polled ready right away.
            Ok(start) => ResponseFuture::started(start, &mut self.inner, &self.config),
            Err(later) => {
                ResponseFuture::later(later, take_ready(&mut self.inner), self.config.clone())
            }
        }
    }
}

/// The instance that was polled ready, for a response future that calls it later (the
/// instance polled ready is the one to call); a fresh clone takes its place.
pub(crate) fn take_ready<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}

impl<S: std::fmt::Debug> std::fmt::Debug for Lock<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("inner", &self.inner)
            .field("source", &self.config.source)
            .finish()
    }
}
