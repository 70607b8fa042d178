//! The `MultiLock` service.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::BoxError;
use http::Request;
use tower_service::Service;

use super::future::MultiLockResponseFuture;
use super::start::begin;
use super::MultiConfig;
use crate::http::layer::service::take_ready;
use crate::http::layer::LockResponseBody;

/// Runs each request under its locks. Built by [`MultiLockLayer`](super::MultiLockLayer).
#[derive(Clone)]
pub struct MultiLock<S> {
    inner: S,
    config: Arc<MultiConfig>,
}

impl<S> MultiLock<S> {
    pub(crate) fn new(inner: S, config: Arc<MultiConfig>) -> Self {
        MultiLock { inner, config }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

/// As [`Lock`](crate::layer::Lock): the inner service receives axum's [`Body`] (read in
/// full before the locks are taken unless the layer streams it) and its response body
/// comes back as it is, inside a [`LockResponseBody`].
impl<S, B, ResBody> Service<Request<B>> for MultiLock<S>
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
    type Future = MultiLockResponseFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match begin(&self.config, request) {
            // Nothing to wait for: call the instance that was polled ready right away.
            Ok(start) => MultiLockResponseFuture::started(start, &mut self.inner, &self.config),
            Err(start) => MultiLockResponseFuture::later(
                start,
                take_ready(&mut self.inner),
                self.config.clone(),
            ),
        }
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for MultiLock<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field("inner", &self.inner)
            .field("keys", &self.config.keys)
            .finish()
    }
}
