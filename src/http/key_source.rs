//! Where a request's lock key comes from: a path parameter, a header, a query parameter or
//! a function of the request.

use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{FromRequestParts, MatchedPath, RawPathParams};
use http::request::Parts;
use http::HeaderName;

use crate::http::rejection::LockRejection;

/// Reads the raw key value from a request. Values are percent-decoded (path and query) and
/// must be UTF-8; anything else is a 400.
#[derive(Clone)]
pub struct KeySource {
    kind: Kind,
}

type KeyFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;

#[derive(Clone)]
enum Kind {
    Path(Arc<str>),
    Header(Result<HeaderName, Arc<str>>),
    Query(Arc<str>),
    Fn(Arc<KeyFn>),
}

impl KeySource {
    /// A path parameter of the matched route, e.g. `"orderId"` for `/orders/{orderId}`.
    pub fn path(name: impl Into<String>) -> Self {
        KeySource {
            kind: Kind::Path(name.into().into()),
        }
    }

    /// A request header, e.g. `"idempotency-key"` (case-insensitive).
    pub fn header(name: impl AsRef<str>) -> Self {
        let name = name.as_ref();
        KeySource {
            kind: Kind::Header(HeaderName::try_from(name).map_err(|_| name.into())),
        }
    }

    /// A query-string parameter (the first occurrence), e.g. `"account"` in `?account=7`.
    pub fn query(name: impl Into<String>) -> Self {
        KeySource {
            kind: Kind::Query(name.into().into()),
        }
    }

    /// A function of the request's parts; `None` means the key is missing.
    pub fn from_fn(f: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static) -> Self {
        KeySource {
            kind: Kind::Fn(Arc::new(f)),
        }
    }

    /// Where the value comes from, for messages: "path parameter `orderId`".
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Path(name) => format!("path parameter `{name}`"),
            Kind::Header(Ok(name)) => format!("header `{name}`"),
            Kind::Header(Err(name)) => format!("header `{name}`"),
            Kind::Query(name) => format!("query parameter `{name}`"),
            Kind::Fn(_) => "lock key".to_owned(),
        }
    }

    /// The name the source reads (parameter or header), used as the default key prefix.
    pub(crate) fn default_prefix(&self) -> String {
        match &self.kind {
            Kind::Path(name) | Kind::Query(name) => format!("{name}:"),
            Kind::Header(Ok(name)) => format!("{name}:"),
            Kind::Header(Err(name)) => format!("{name}:"),
            Kind::Fn(_) => String::new(),
        }
    }

    /// Reads the raw value and hands it to `use_value`. `Ok(None)`: no route matched the
    /// request (it is on its way to the router's fallback), so there is nothing to lock.
    pub(crate) fn read_routed<T>(
        &self,
        parts: &mut Parts,
        use_value: impl FnOnce(&str) -> T,
    ) -> Result<Option<T>, LockRejection> {
        match self.read_with(parts, use_value) {
            Err(LockRejection::MissingKey { .. })
                if matches!(self.kind, Kind::Path(_))
                    && parts.extensions.get::<MatchedPath>().is_none() =>
            {
                Ok(None)
            }
            other => other.map(Some),
        }
    }

    /// Reads the raw value.
    pub(crate) fn read(&self, parts: &mut Parts) -> Result<String, LockRejection> {
        self.read_with(parts, str::to_owned)
    }

    /// Reads the raw value and hands it to `use_value`, borrowed where the request has it
    /// as it is (no copy per request).
    fn read_with<T>(
        &self,
        parts: &mut Parts,
        use_value: impl FnOnce(&str) -> T,
    ) -> Result<T, LockRejection> {
        let what = || self.describe();
        let invalid = |reason: &str| LockRejection::InvalidKey {
            what: what(),
            reason: reason.to_owned(),
        };
        let missing = || LockRejection::MissingKey { what: what() };
        let checked = |value: &str| {
            if value.is_empty() {
                Err(invalid("it is empty"))
            } else {
                Ok(use_value(value))
            }
        };
        match &self.kind {
            Kind::Path(name) => match path_params(parts) {
                Some(Ok(params)) => {
                    let value = params
                        .iter()
                        .find(|(key, _)| *key == &**name)
                        .map(|(_, value)| value)
                        .ok_or_else(missing)?;
                    checked(value)
                }
                Some(Err(RawPathParamsRejection::InvalidUtf8InPathParam(_))) => {
                    Err(invalid("it is not valid UTF-8 once percent-decoded"))
                }
                Some(Err(_)) | None => Err(LockRejection::Misplaced {
                    param: name.to_string(),
                }),
            },
            Kind::Header(Ok(name)) => {
                let value = parts.headers.get(name).ok_or_else(missing)?;
                checked(
                    std::str::from_utf8(value.as_bytes())
                        .map_err(|_| invalid("it is not valid UTF-8"))?,
                )
            }
            Kind::Header(Err(name)) => Err(invalid(&format!(
                "`{name}` is not a valid header name (fix the LockLayer's configuration)"
            ))),
            Kind::Query(name) => checked(
                &query_param(parts.uri.query().unwrap_or(""), name)
                    .ok_or_else(missing)?
                    .map_err(|_| invalid("it is not valid UTF-8 once percent-decoded"))?,
            ),
            Kind::Fn(f) => checked(&f(parts).ok_or_else(missing)?),
        }
    }
}

/// The request's path parameters. axum's extractor only reads the request's extensions, so
/// its future is ready when first polled: reading the key never waits. (`None`, should a
/// later axum ever make it wait, is answered as a misplaced layer, never a panic.)
fn path_params(parts: &mut Parts) -> Option<Result<RawPathParams, RawPathParamsRejection>> {
    let extract = pin!(RawPathParams::from_request_parts(parts, &()));
    match extract.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(params) => Some(params),
        Poll::Pending => None,
    }
}

/// The first value of `name` in a query string, percent-decoded (`+` is a space).
fn query_param(query: &str, name: &str) -> Option<Result<String, std::str::Utf8Error>> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(key).ok()? == name).then(|| decode(value))
    })
}

fn decode(text: &str) -> Result<String, std::str::Utf8Error> {
    let spaced = text.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8()
        .map(|s| s.into_owned())
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_decoded() {
        assert_eq!(query_param("a=1&b=x%20y+z", "b"), Some(Ok("x y z".into())));
        assert_eq!(query_param("a=1&a=2", "a"), Some(Ok("1".into())));
        assert_eq!(query_param("flag&b=2", "flag"), Some(Ok(String::new())));
        assert_eq!(query_param("a=1", "b"), None);
        assert!(matches!(query_param("a=%FF", "a"), Some(Err(_))));
        assert_eq!(query_param("", "a"), None);
    }
}
