//! The `Lock` service.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Bytes, HttpBody};
use axum::BoxError;
use http::Request;
use tower_service::Service;

use super::future::LockResponseFuture;
use super::request_body::LockRequestBody;
use super::response_body::LockResponseBody;
use super::start::begin;
use super::{LayerConfig, LockLayer};
use crate::http::key_source::KeySource;

/// Runs each request under its lock (or its locks). Built by [`LockLayer`].
#[derive(Clone)]
pub struct Lock<S> {
    inner: S,
    config: Arc<LayerConfig>,
}

impl<S> Lock<S> {
    /// Wraps `inner` with the settings of `layer` (as `layer.layer(inner)`).
    pub fn new(inner: S, layer: LockLayer) -> Self {
        Lock {
            inner,
            config: layer.config,
        }
    }

    /// A [`LockLayer`] on the key read from `source` (as [`LockLayer::new`]).
    pub fn layer(source: KeySource) -> LockLayer {
        LockLayer::new(source)
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// The inner service receives the request with a [`LockRequestBody`]: the body read in
/// full before the lock is taken (unless the layer [streams](LockLayer::stream_body) it),
/// or the request's own body as it arrives. Its response body comes back as it is, inside
/// a [`LockResponseBody`] (which otherwise holds a rejection's body).
impl<S, B, ResBody> Service<Request<B>> for Lock<S>
where
    S: Service<Request<LockRequestBody<B>>, Response = http::Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    ResBody: HttpBody<Data = Bytes>,
    ResBody::Error: Into<BoxError>,
{
    type Response = http::Response<LockResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = LockResponseFuture<S, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match begin(&self.config, request) {
            // Nothing to wait for: call the instance that was polled ready right away.
            Ok(start) => LockResponseFuture::started(start, &mut self.inner, &self.config),
            Err(later) => {
                LockResponseFuture::later(later, take_ready(&mut self.inner), self.config.clone())
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
            .field("keys", &self.config.keys)
            .finish()
    }
}
