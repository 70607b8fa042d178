//! The body of a request that [`Lock`](super::Lock) hands to its inner service: read in
//! full before the lock was taken, or the client's own body as it arrives.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Bytes, HttpBody};
use axum::BoxError;
use http_body::{Frame, SizeHint};
use pin_project::pin_project;

use super::body::Buffered;

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
    body: Which<B>,
}

#[pin_project(project = WhichProj)]
#[derive(Debug)]
enum Which<B> {
    Buffered(Buffered),
    Streaming(#[pin] B),
}

impl<B> LockRequestBody<B> {
    pub(crate) fn buffered(body: Buffered) -> Self {
        LockRequestBody {
            body: Which::Buffered(body),
        }
    }

    pub(crate) fn streaming(body: B) -> Self {
        LockRequestBody {
            body: Which::Streaming(body),
        }
    }
}

impl<B> HttpBody for LockRequestBody<B>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.project().body.project() {
            WhichProj::Buffered(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map_err(Into::into))),
            WhichProj::Streaming(body) => body
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map_err(Into::into))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.body {
            Which::Buffered(body) => body.is_end_stream(),
            Which::Streaming(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.body {
            Which::Buffered(body) => body.size_hint(),
            Which::Streaming(body) => body.size_hint(),
        }
    }
}
