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

/// `HttpBody` for a public body type `$name<B>` whose pinned field `body` is an
/// [`EitherBody`] of `B` and a body of the layer's own: the type's frames are its field's.
macro_rules! delegate_to_either_body {
    ($name:ident) => {
        impl<B> http_body::Body for $name<B>
        where
            B: http_body::Body<Data = axum::body::Bytes>,
            B::Error: Into<axum::BoxError>,
        {
            type Data = axum::body::Bytes;
            type Error = axum::BoxError;

            fn poll_frame(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<
                Option<Result<http_body::Frame<axum::body::Bytes>, axum::BoxError>>,
            > {
                self.project().body.poll_frame(cx)
            }

            fn is_end_stream(&self) -> bool {
                self.body.is_end_stream()
            }

            fn size_hint(&self) -> http_body::SizeHint {
                self.body.size_hint()
            }
        }
    };
}
pub(super) use delegate_to_either_body;
