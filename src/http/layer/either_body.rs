//! One of two bodies: what the layer's request and response bodies are made of (the body
//! read first or the client's own; the inner service's or a rejection's).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Bytes, HttpBody};
use axum::BoxError;
use http_body::{Frame, SizeHint};
use pin_project::pin_project;

/// One of two bodies, each with its errors boxed.
#[pin_project(project = EitherBodyProj)]
#[derive(Debug)]
pub(super) enum EitherBody<L, R> {
    Left(#[pin] L),
    Right(#[pin] R),
}

impl<L, R> HttpBody for EitherBody<L, R>
where
    L: HttpBody<Data = Bytes>,
    L::Error: Into<BoxError>,
    R: HttpBody<Data = Bytes>,
    R::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.project() {
            EitherBodyProj::Left(body) => body.poll_frame(cx).map_err(Into::into),
            EitherBodyProj::Right(body) => body.poll_frame(cx).map_err(Into::into),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            EitherBody::Left(body) => body.is_end_stream(),
            EitherBody::Right(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            EitherBody::Left(body) => body.size_hint(),
            EitherBody::Right(body) => body.size_hint(),
        }
    }
}
