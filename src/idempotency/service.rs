//! The service [`IdempotencyLayer`](super::IdempotencyLayer) makes, and its response
//! future.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use axum::BoxError;
use http::Request;
use tower_service::Service;

use crate::http::layer::BoxedResponseFuture;

use super::config::IdempotencyConfig;
use super::run::run;
use crate::telemetry;
use tracing::Instrument;

/// Runs its inner service once per idempotency key (see
/// [`IdempotencyLayer`](super::IdempotencyLayer)).
#[derive(Clone)]
pub struct Idempotency<S> {
    inner: S,
    config: Arc<IdempotencyConfig>,
}

impl<S> Idempotency<S> {
    pub(crate) fn new(inner: S, config: Arc<IdempotencyConfig>) -> Self {
        Idempotency { inner, config }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, taken out.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S> std::fmt::Debug for Idempotency<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency")
            .field("namespace", &self.config.namespace)
            .finish_non_exhaustive()
    }
}

/// Any request body is taken (it is read whole before the key is claimed); the inner
/// service receives it, read, as axum's [`Body`].
impl<S, ReqBody, B> Service<Request<ReqBody>> for Idempotency<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: HttpBody<Data = Bytes> + Send + 'static,
    ReqBody::Error: Into<BoxError>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = IdempotencyResponseFuture<S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let request = request.map(Body::new);
        // The service made ready goes with the request; this one stays for the next.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let span = telemetry::idempotency_span(&self.config.namespace);
        BoxedResponseFuture::new(run(self.config.clone(), inner, request).instrument(span))
    }
}

/// The response future of [`Idempotency`]: reads the request, claims its key, then runs
/// the handler or answers the stored response.
pub type IdempotencyResponseFuture<E> = BoxedResponseFuture<E>;
