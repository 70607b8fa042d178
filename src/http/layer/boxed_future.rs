//! The response future of the layers that run a request as one boxed future (the
//! idempotency and coalescing layers).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::response::Response;

/// A layer's response future, boxed: each request makes one allocation for it, small beside
/// the backend round trips it waits for.
pub struct BoxedResponseFuture<E> {
    inner: Pin<Box<dyn Future<Output = Result<Response, E>> + Send>>,
}

impl<E> BoxedResponseFuture<E> {
    pub(crate) fn new(future: impl Future<Output = Result<Response, E>> + Send + 'static) -> Self {
        BoxedResponseFuture {
            inner: Box::pin(future),
        }
    }
}

impl<E> Future for BoxedResponseFuture<E> {
    type Output = Result<Response, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<E> std::fmt::Debug for BoxedResponseFuture<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoxedResponseFuture")
            .finish_non_exhaustive()
    }
}
