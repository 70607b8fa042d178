//! The body of a request that [`Lock`](super::Lock) hands to its inner service: read in
//! full before the lock was taken, or the client's own body as it arrives.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Bytes, HttpBody};
use http::HeaderMap;
use http_body::{Frame, SizeHint};
use pin_project::pin_project;

use super::either_body::{delegate_to_either_body, EitherBody};

/// Request body that [`Lock`](super::Lock) gives its inner service: the body that was read
/// in full before the lock was taken (the default), or the request's own body `B`
/// untouched, when the layer [streams](super::LockLayer::stream_body) it or it was empty.
///
/// Any service that takes a body generic over [`http_body::Body`] takes it, axum's routers
/// and handlers among them. Its errors are the inner body's, boxed.
#[pin_project]
#[derive(Debug)]
pub struct LockRequestBody<B> {
    #[pin]
    body: EitherBody<Buffered, B>,
}

impl<B> LockRequestBody<B> {
    pub(crate) fn buffered(body: Buffered) -> Self {
        LockRequestBody {
            body: EitherBody::Left(body),
        }
    }

    pub(crate) fn streaming(body: B) -> Self {
        LockRequestBody {
            body: EitherBody::Right(body),
        }
    }
}

delegate_to_either_body!(LockRequestBody);

/// A body read in full: its data, then its trailers.
#[derive(Debug)]
pub(crate) struct Buffered {
    pub(super) data: Option<Bytes>,
    pub(super) trailers: Option<HeaderMap>,
}

impl HttpBody for Buffered {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(
            self.trailers
                .take()
                .map(|trailers| Ok(Frame::trailers(trailers))),
        )
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |data| data.len() as u64))
    }
}
