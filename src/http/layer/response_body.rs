//! The body of a response from [`Lock`](super::Lock): the inner service's own, or the
//! body of the layer's rejection.

use axum::body::Body;
use axum::response::Response;
use pin_project::pin_project;

use super::either_body::{delegate_to_either_body, EitherBody};

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

delegate_to_either_body!(LockResponseBody);

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
