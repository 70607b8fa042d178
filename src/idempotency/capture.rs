//! Reading a handler's response body to store it, without holding more than the store
//! limit: a larger body is passed on as it comes, unstored.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::BoxError;
use http::HeaderMap;
use http_body::Frame;

/// A response body, read up to the store limit.
pub(crate) enum Captured<B> {
    /// All of it, within the limit (with its trailers, if it had any).
    Whole {
        data: Bytes,
        trailers: Option<HeaderMap>,
    },
    /// More than the limit: what was read, and the body it came from, to be sent on.
    TooLarge { read: VecDeque<Bytes>, rest: B },
    /// The body failed after `read`.
    Broken {
        read: VecDeque<Bytes>,
        error: BoxError,
    },
}

/// Reads `body` until its end or until more than `limit` bytes arrived.
pub(crate) async fn capture<B>(mut body: B, limit: usize) -> Captured<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let mut read = VecDeque::new();
    let mut length = 0usize;
    let mut trailers: Option<HeaderMap> = None;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(error) => {
                return Captured::Broken {
                    read,
                    error: error.into(),
                }
            }
        };
        match frame.into_data() {
            Ok(data) => {
                length = length.saturating_add(data.len());
                read.push_back(data);
                if length > limit {
                    return Captured::TooLarge { read, rest: body };
                }
            }
            Err(frame) => {
                if let Ok(more) = frame.into_trailers() {
                    trailers.get_or_insert_with(HeaderMap::new).extend(more);
                }
            }
        }
    }
    let data = match read.len() {
        0 => Bytes::new(),
        1 => read.pop_front().unwrap_or_default(),
        _ => read.into_iter().collect::<Vec<_>>().concat().into(),
    };
    Captured::Whole { data, trailers }
}

impl<B> Captured<B>
where
    B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    /// The body to send on: what was read, then the rest, as the handler gave it.
    pub(crate) fn into_body(self) -> Body {
        match self {
            Captured::Whole { data, trailers } => match trailers {
                None => Body::from(data),
                Some(trailers) => Body::new(Resumed {
                    read: VecDeque::from([data]),
                    rest: Rest::<B>::Trailers(Some(trailers)),
                }),
            },
            Captured::TooLarge { read, rest } => Body::new(Resumed {
                read,
                rest: Rest::Body(rest),
            }),
            Captured::Broken { read, error } => Body::new(Resumed::<B> {
                read,
                rest: Rest::Error(Some(error)),
            }),
        }
    }
}

/// What follows the part of a body read already.
enum Rest<B> {
    Body(B),
    Trailers(Option<HeaderMap>),
    Error(Option<BoxError>),
}

/// A body sent on after part of it was read: the part, then the rest.
struct Resumed<B> {
    read: VecDeque<Bytes>,
    rest: Rest<B>,
}

impl<B> HttpBody for Resumed<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(data) = self.read.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        match &mut self.rest {
            Rest::Body(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map_err(Into::into))),
            Rest::Trailers(trailers) => Poll::Ready(
                trailers
                    .take()
                    .map(|trailers| Ok(Frame::trailers(trailers))),
            ),
            Rest::Error(error) => Poll::Ready(error.take().map(Err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_whole() {
        match capture(Body::from("hello"), 5).await {
            Captured::Whole { data, trailers } => {
                assert_eq!(data, "hello");
                assert!(trailers.is_none());
            }
            _ => panic!("read whole"),
        }
    }

    #[tokio::test]
    async fn a_larger_body_is_sent_on_whole_but_not_kept() {
        let stream = futures_lite_stream(vec!["ab", "cd", "ef"]);
        let captured = capture(stream, 3).await;
        assert!(matches!(captured, Captured::TooLarge { .. }));
        let body = captured.into_body();
        let all = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        assert_eq!(all, "abcdef");
    }

    /// A body of several chunks.
    fn futures_lite_stream(chunks: Vec<&'static str>) -> Body {
        Body::new(crate::http::layer::body::ChunkedBody::of(chunks))
    }
}
