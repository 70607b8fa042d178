//! The body of a response from [`Lock`](super::Lock): the inner service's own, or the
//! body of the layer's rejection.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use axum::BoxError;
use http_body::{Frame, SizeHint};
use pin_project::pin_project;

use super::either_body::EitherBody;

/// Response body of [`Lock`](super::Lock): the inner service's body as it is (no
/// conversion, no extra allocation), or the body of a rejection the layer answered with
/// (its own, or one made by [`map_rejection`](super::LockLayer::map_rejection)).
///
/// Its errors are the inner body's, boxed.
#[pin_project]
#[derive(Debug)]
pub struct LockResponseBody<B> {
    #[pin]
    body: EitherBody<B, Body>,
}

impl<B> LockResponseBody<B> {
    pub(crate) fn inner(body: B) -> Self {
        LockResponseBody {
            body: EitherBody::Left(body),
        }
    }

    pub(crate) fn rejection(body: Body) -> Self {
        LockResponseBody {
            body: EitherBody::Right(body),
        }
    }
}

impl<B> HttpBody for LockResponseBody<B>
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
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// What a lock layer's response future answers with: the inner service's response, or a
/// rejection.
pub(crate) enum Answer<R> {
    Inner(R),
    Rejection(Response),
}

impl<B> Answer<http::Response<B>> {
    pub(crate) fn into_response(self) -> http::Response<LockResponseBody<B>> {
        match self {
            Answer::Inner(response) => response.map(LockResponseBody::inner),
            Answer::Rejection(response) => response.map(LockResponseBody::rejection),
        }
    }
}
