//! A stored response: what the first request's handler answered, kept as the record of the
//! key's lock, and replayed byte for byte to the requests that repeat it.
//!
//! The record is `TLIR`, a version byte (1), the request's 32-byte fingerprint, the status
//! (2 bytes, big-endian), the number of headers (2 bytes), each header's name and value
//! (each a 2-byte length and the bytes), then the body (the rest).

use axum::body::{Body, Bytes};
use axum::response::Response;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, StatusCode};

/// The header a replayed response carries (Stripe's; the draft has none yet).
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

const MAGIC: &[u8; 4] = b"TLIR";
const VERSION: u8 = 1;

/// A request's fingerprint: what a repeated request must match.
pub(crate) type Fingerprint = [u8; 32];

/// A response as stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredResponse {
    pub(crate) fingerprint: Fingerprint,
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// Whether a response header is kept with a stored response: not the hop-by-hop headers
/// (they concern one connection), not `Date` (a replay is answered now) and not
/// `Content-Length` (the replay's is its own).
fn kept(name: &HeaderName) -> bool {
    !matches!(
        *name,
        header::CONNECTION
            | header::PROXY_AUTHENTICATE
            | header::PROXY_AUTHORIZATION
            | header::TE
            | header::TRAILER
            | header::TRANSFER_ENCODING
            | header::UPGRADE
            | header::DATE
            | header::CONTENT_LENGTH
    ) && name.as_str() != "keep-alive"
}

impl StoredResponse {
    /// The response to store: `headers` without those a replay must not repeat. `None` when
    /// a header is too long for the record (over 64 KiB). (The coalescing layer's, for the
    /// requests of its process; the idempotency layer writes records with `record_of`.)
    #[cfg(any(feature = "coalesce", test))]
    pub(crate) fn new(
        fingerprint: Fingerprint,
        status: StatusCode,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Option<Self> {
        let mut kept_headers = HeaderMap::with_capacity(headers.len());
        for (name, value) in headers.iter().filter(|(name, _)| kept(name)) {
            if value.len() > usize::from(u16::MAX) {
                return None;
            }
            kept_headers.append(name.clone(), value.clone());
        }
        if kept_headers.len() > usize::from(u16::MAX) {
            return None;
        }
        Some(StoredResponse {
            fingerprint,
            status,
            headers: kept_headers,
            body,
        })
    }

    /// The record's bytes.
    #[cfg(any(feature = "coalesce", test))]
    pub(crate) fn encode(&self) -> Bytes {
        write_record(
            &self.fingerprint,
            self.status,
            || self.headers.iter(),
            &self.body,
        )
    }

    /// The record of the response [`new`](Self::new) would keep, written from its parts
    /// (without a copy of its headers first); `None` when `new` answers `None`.
    pub(crate) fn record_of(
        fingerprint: &Fingerprint,
        status: StatusCode,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Option<Bytes> {
        let kept_headers = || headers.iter().filter(|(name, _)| kept(name));
        let (count, too_long) = kept_headers().fold((0usize, false), |(n, long), (_, value)| {
            (n + 1, long || value.len() > usize::from(u16::MAX))
        });
        if too_long || count > usize::from(u16::MAX) {
            return None;
        }
        Some(write_record(fingerprint, status, kept_headers, body))
    }

    /// A record read back (`Err`: what is wrong with it).
    pub(crate) fn decode(record: &Bytes) -> Result<Self, String> {
        let mut reader = RecordReader { record, at: 0 };
        if reader.take(4)? != MAGIC {
            return Err("it is not a stored response".to_owned());
        }
        let version = reader.take(1)?[0];
        if version != VERSION {
            return Err(format!(
                "it is of version {version}, this layer reads {VERSION}"
            ));
        }
        let mut fingerprint = [0; 32];
        fingerprint.copy_from_slice(reader.take(32)?);
        let status = StatusCode::from_u16(reader.u16()?)
            .map_err(|_| "its status is not an HTTP status".to_owned())?;
        let count = reader.u16()?;
        let mut headers = HeaderMap::with_capacity(usize::from(count));
        for _ in 0..count {
            let name = reader.part()?;
            let value = reader.part()?;
            let name = HeaderName::from_bytes(name).map_err(|e| format!("a header name: {e}"))?;
            let value =
                HeaderValue::from_bytes(value).map_err(|e| format!("a header value: {e}"))?;
            headers.append(name, value);
        }
        let body = record.slice(reader.at..);
        Ok(StoredResponse {
            fingerprint,
            status,
            headers,
            body,
        })
    }

    /// The stored status, headers and body, as a response.
    pub(crate) fn into_response(self) -> Response {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        response
    }

    /// The replay: the stored status, headers and body, marked `Idempotent-Replayed: true`.
    pub(crate) fn replay(self) -> Response {
        let mut response = self.into_response();
        response
            .headers_mut()
            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        response
    }
}

/// Writes a record: the headers `headers` gives (each time alike) are those kept, at most `u16::MAX` of them, none
/// longer than that.
fn write_record<'a, I>(
    fingerprint: &Fingerprint,
    status: StatusCode,
    headers: impl Fn() -> I,
    body: &Bytes,
) -> Bytes
where
    I: Iterator<Item = (&'a HeaderName, &'a HeaderValue)>,
{
    let (count, length) = headers().fold((0usize, 0usize), |(n, len), (name, value)| {
        (n + 1, len + 4 + name.as_str().len() + value.len())
    });
    let mut out = Vec::with_capacity(4 + 1 + 32 + 2 + 2 + length + body.len());
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(fingerprint);
    out.extend_from_slice(&status.as_u16().to_be_bytes());
    out.extend_from_slice(&(count as u16).to_be_bytes());
    for (name, value) in headers() {
        for part in [name.as_str().as_bytes(), value.as_bytes()] {
            out.extend_from_slice(&(part.len() as u16).to_be_bytes());
            out.extend_from_slice(part);
        }
    }
    out.extend_from_slice(body);
    out.into()
}

/// Whether a response's `Cache-Control` has `directive` (`no-store`, `private`), with or
/// without an argument.
pub(crate) fn cache_control_says(headers: &HeaderMap, directive: &str) -> bool {
    headers.get_all(header::CACHE_CONTROL).iter().any(|value| {
        value.to_str().is_ok_and(|value| {
            value.split(',').any(|part| {
                let name = part.split('=').next().unwrap_or("").trim();
                name.eq_ignore_ascii_case(directive)
            })
        })
    })
}

/// Reads a record from the front.
struct RecordReader<'a> {
    record: &'a Bytes,
    at: usize,
}

impl<'a> RecordReader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.record.len())
            .ok_or_else(|| "it is cut short".to_owned())?;
        let part = &self.record[self.at..end];
        self.at = end;
        Ok(part)
    }

    fn u16(&mut self) -> Result<u16, String> {
        let bytes = self.take(2)?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn part(&mut self) -> Result<&'a [u8], String> {
        let len = self.u16()?;
        self.take(usize::from(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StoredResponse {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.append("x-multi", HeaderValue::from_static("1"));
        headers.append("x-multi", HeaderValue::from_static("2"));
        headers.insert(
            header::DATE,
            HeaderValue::from_static("Wed, 25 Nov 2026 10:00:00 GMT"),
        );
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("4"));
        StoredResponse::new(
            [7; 32],
            StatusCode::CREATED,
            &headers,
            Bytes::from_static(b"\x00\xffok"),
        )
        .unwrap()
    }

    #[test]
    fn a_stored_response_reads_back_as_it_was_without_hop_by_hop_headers() {
        let stored = sample();
        assert_eq!(stored.headers.len(), 3, "{:?}", stored.headers);
        assert!(stored.headers.get(header::DATE).is_none());
        let read = StoredResponse::decode(&stored.encode()).unwrap();
        assert_eq!(read, stored);
        let replay = read.replay();
        assert_eq!(replay.status(), StatusCode::CREATED);
        assert_eq!(replay.headers()[IDEMPOTENT_REPLAYED], "true");
        assert_eq!(
            replay.headers().get_all("x-multi").iter().count(),
            2,
            "repeated headers are kept"
        );
    }

    #[test]
    fn a_record_written_from_parts_is_the_stored_response_s() {
        let stored = sample();
        let mut headers = stored.headers.clone();
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        let record = StoredResponse::record_of(&[7; 32], stored.status, &headers, &stored.body);
        assert_eq!(record, Some(stored.encode()));
        let mut long = HeaderMap::new();
        long.insert(
            "x-long",
            HeaderValue::from_bytes(&vec![b'a'; 70_000]).unwrap(),
        );
        assert_eq!(
            StoredResponse::record_of(&[7; 32], StatusCode::OK, &long, &Bytes::new()),
            None
        );
        assert!(StoredResponse::new([7; 32], StatusCode::OK, &long, Bytes::new()).is_none());
    }

    #[test]
    fn damaged_records_are_errors_never_panics() {
        let stored = sample();
        let record = stored.encode();
        let head = record.len() - stored.body.len();
        for end in 0..head {
            assert!(
                StoredResponse::decode(&record.slice(..end)).is_err(),
                "cut at {end} of {head}"
            );
        }
        // Cut inside the body: a shorter body, never a panic.
        let cut = StoredResponse::decode(&record.slice(..head + 1)).unwrap();
        assert_eq!(cut.body.len(), 1);
        assert!(StoredResponse::decode(&Bytes::from_static(b"TLIR")).is_err());
        assert!(StoredResponse::decode(&Bytes::from_static(b"nope and more")).is_err());
        let mut other_version = record.to_vec();
        other_version[4] = 9;
        let error = StoredResponse::decode(&other_version.into()).unwrap_err();
        assert!(error.contains("version 9"), "{error}");
    }
}
