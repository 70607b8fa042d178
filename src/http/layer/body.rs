//! Reading a request's body before its lock is taken, so that a client cannot hold a lock
//! by sending its body slowly (a trickled upload kept an order locked while a competing
//! request waited 2.6 s).

use std::time::Duration;

use axum::body::{Bytes, HttpBody};
use axum::BoxError;
use http::HeaderMap;

use super::request_body::{Buffered, LockRequestBody};
use crate::http::rejection::LockRejection;

/// Default limit of a body read before the lock: 2 MiB, as axum's `DefaultBodyLimit`.
pub const DEFAULT_BODY_LIMIT: usize = 2 * 1024 * 1024;

/// Default time a body may take to arrive when it is read before the lock.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How the layer treats request bodies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyPolicy {
    /// Hand the body to the handler as it arrives, read under the lock.
    pub(crate) stream: bool,
    pub(crate) limit: usize,
    pub(crate) timeout: Duration,
}

impl Default for BodyPolicy {
    fn default() -> Self {
        BodyPolicy {
            stream: false,
            limit: DEFAULT_BODY_LIMIT,
            timeout: DEFAULT_BODY_TIMEOUT,
        }
    }
}

impl BodyPolicy {
    /// Whether bodies are read before the lock is asked for.
    pub(crate) fn reads_first(&self) -> bool {
        !self.stream
    }
}

/// Reads all of `body` within `policy`'s limit and time: the same body, in memory.
pub(crate) async fn read_body<B>(
    body: B,
    policy: &BodyPolicy,
) -> Result<LockRequestBody<B>, LockRejection>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let too_large = || LockRejection::BodyTooLarge {
        limit: policy.limit,
    };
    // A declared length over the limit is refused before anything is read.
    if body.size_hint().lower() > policy.limit as u64 {
        return Err(too_large());
    }
    match tokio::time::timeout(policy.timeout, collect(body, policy.limit)).await {
        Ok(Ok(Some(buffered))) => Ok(LockRequestBody::buffered(buffered)),
        Ok(Ok(None)) => Err(too_large()),
        Ok(Err(error)) => Err(LockRejection::BodyUnreadable {
            error: error.to_string(),
        }),
        Err(_) => Err(LockRejection::BodyTimeout {
            after: policy.timeout,
        }),
    }
}

/// All of `body`'s data and trailers; `None` once more than `limit` bytes arrived.
async fn collect<B>(body: B, limit: usize) -> Result<Option<Buffered>, BoxError>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut length = 0usize;
    let mut trailers = None;
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame.map_err(Into::into)?;
        match frame.into_data() {
            Ok(data) => {
                length += data.len();
                if length > limit {
                    return Ok(None);
                }
                chunks.push(data);
            }
            Err(frame) => {
                if let Ok(frame_trailers) = frame.into_trailers() {
                    trailers
                        .get_or_insert_with(HeaderMap::new)
                        .extend(frame_trailers);
                }
            }
        }
    }
    // One chunk (the common case) is kept as it is; more are joined.
    let data = match chunks.len() {
        0 => None,
        1 => chunks.pop(),
        _ => Some(chunks.concat().into()),
    };
    Ok(Some(Buffered { data, trailers }))
}

/// A body that arrives in chunks, for tests of what reads bodies.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct ChunkedBody(std::collections::VecDeque<&'static str>);

#[cfg(test)]
impl ChunkedBody {
    pub(crate) fn of(chunks: Vec<&'static str>) -> Self {
        ChunkedBody(chunks.into())
    }
}

#[cfg(test)]
impl HttpBody for ChunkedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let chunk = self.0.pop_front();
        std::task::Poll::Ready(chunk.map(|c| Ok(http_body::Frame::data(Bytes::from(c)))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(limit: usize) -> BodyPolicy {
        BodyPolicy {
            stream: false,
            limit,
            timeout: Duration::from_secs(5),
        }
    }

    async fn bytes<B>(body: LockRequestBody<B>) -> Bytes
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        axum::body::to_bytes(axum::body::Body::new(body), usize::MAX)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_kept_whole() {
        let read = read_body(ChunkedBody::of(vec!["ab", "cd"]), &policy(4))
            .await
            .unwrap();
        assert_eq!(bytes(read).await, "abcd");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_413() {
        let declared = read_body(axum::body::Body::from("abcde"), &policy(4)).await;
        assert!(matches!(
            declared,
            Err(LockRejection::BodyTooLarge { limit: 4 })
        ));
        let streamed = read_body(ChunkedBody::of(vec!["abc", "de"]), &policy(4)).await;
        assert_eq!(
            streamed.unwrap_err().status(),
            http::StatusCode::PAYLOAD_TOO_LARGE
        );
    }
}
