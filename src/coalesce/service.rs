//! The service [`CoalesceLayer`](super::CoalesceLayer) makes, and its response
//! future.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use axum::BoxError;
use http::Request;
use tower_service::Service;

use crate::http::layer::BoxedResponseFuture;

use super::config::CoalesceConfig;
use super::run::run;
use crate::telemetry;
use tracing::Instrument;

/// Runs its inner service once for concurrent identical requests (see
/// [`CoalesceLayer`](super::CoalesceLayer)).
#[derive(Clone)]
pub struct Coalesce<S> {
    inner: S,
    config: Arc<CoalesceConfig>,
}

impl<S> Coalesce<S> {
    pub(super) fn new(inner: S, config: Arc<CoalesceConfig>) -> Self {
        Coalesce { inner, config }
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

impl<S> std::fmt::Debug for Coalesce<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalesce")
            .field("namespace", &self.config.namespace)
            .finish_non_exhaustive()
    }
}

/// Any request body is taken; the inner service receives it as axum's [`Body`] (the body
/// is not part of the key).
impl<S, ReqBody, B> Service<Request<ReqBody>> for Coalesce<S>
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
    type Future = CoalesceResponseFuture<S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let request = request.map(Body::new);
        // The service made ready goes with the request; this one stays for the next.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let span = telemetry::coalesce_span(&self.config.namespace);
        BoxedResponseFuture::new(run(self.config.clone(), inner, request).instrument(span))
    }
}

/// The response future of [`Coalesce`]: finds the request's key, then waits for another
/// request's execution or leads one.
pub type CoalesceResponseFuture<E> = BoxedResponseFuture<E>;
