//! Where a request's idempotency key comes from, what a valid key is, and the lock name a
//! key maps to.

use std::fmt;
use std::sync::Arc;

use axum::body::Bytes;
use http::header::HeaderName;
use http::request::Parts;
use sha2::{Digest, Sha256};

use super::rejection::IdempotencyRejection;

/// The header the IETF draft names: `Idempotency-Key`.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// Default longest key, in bytes (Stripe's limit).
pub const DEFAULT_MAX_KEY_LEN: usize = 255;

type HeadFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;
type BodyFn = dyn Fn(&Parts, &Bytes) -> Option<String> + Send + Sync;

/// Where the key of a request is read.
#[derive(Clone)]
pub(crate) enum IdempotencyKeySource {
    /// A header, as an sf-string (`"…"`, the draft's form) or bare.
    Header(HeaderName),
    /// A function of the request head.
    Head(Arc<HeadFn>),
    /// A function of the request head and its buffered body (within the body limit).
    Body(Arc<BodyFn>),
}

impl fmt::Debug for IdempotencyKeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdempotencyKeySource::Header(name) => write!(f, "header {name}"),
            IdempotencyKeySource::Head(_) => f.write_str("a function of the request head"),
            IdempotencyKeySource::Body(_) => f.write_str("a function of the request body"),
        }
    }
}

impl IdempotencyKeySource {
    /// What the key is called in messages.
    pub(crate) fn what(&self) -> String {
        match self {
            IdempotencyKeySource::Header(name) => format!("the `{name}` header"),
            IdempotencyKeySource::Head(_) | IdempotencyKeySource::Body(_) => {
                "the idempotency key".to_owned()
            }
        }
    }

    /// The raw key of a request (`None`: it has none); a header that is not text is
    /// invalid.
    pub(crate) fn raw(
        &self,
        parts: &Parts,
        body: Option<&Bytes>,
    ) -> Result<Option<String>, IdempotencyRejection> {
        match self {
            IdempotencyKeySource::Header(name) => {
                let mut values = parts.headers.get_all(name).iter();
                let Some(value) = values.next() else {
                    return Ok(None);
                };
                if values.next().is_some() {
                    return Err(self.invalid("it is given more than once"));
                }
                let text = value
                    .to_str()
                    .map_err(|_| self.invalid("it is not visible ASCII"))?;
                unquote(text)
                    .map(Some)
                    .map_err(|reason| self.invalid(&reason))
            }
            IdempotencyKeySource::Head(key) => Ok(key(parts)),
            IdempotencyKeySource::Body(key) => Ok(body.and_then(|body| key(parts, body))),
        }
    }

    /// The key of a request, validated: at most `max_len` bytes of visible ASCII.
    pub(crate) fn key(
        &self,
        parts: &Parts,
        body: Option<&Bytes>,
        max_len: usize,
    ) -> Result<Option<String>, IdempotencyRejection> {
        let Some(key) = self.raw(parts, body)? else {
            return Ok(None);
        };
        if key.is_empty() {
            return Err(self.invalid("it is empty"));
        }
        if key.len() > max_len {
            return Err(self.invalid(&format!(
                "it is {} bytes long; at most {max_len} are accepted",
                key.len()
            )));
        }
        if let Some(at) = key.bytes().position(|b| !b.is_ascii_graphic()) {
            return Err(self.invalid(&format!(
                "it has a character that is not visible ASCII at byte {at} (spaces and control \
                 characters are refused)"
            )));
        }
        Ok(Some(key))
    }

    fn invalid(&self, reason: &str) -> IdempotencyRejection {
        IdempotencyRejection::InvalidKey {
            what: self.what(),
            reason: reason.to_owned(),
        }
    }
}

/// A header value as the draft sends it, an sf-string (`"…"`, with `\"` and `\\`
/// escapes), or bare: the string inside, or the value as it is. A value that starts with a
/// quote is a quoted string or an error (`"abc` and `"abc"` must not be two keys).
fn unquote(value: &str) -> Result<String, String> {
    if !value.starts_with('"') {
        return Ok(value.to_owned());
    }
    // The usual key, quoted with nothing to unescape, is what is inside the quotes (as the
    // parser would read it, without its allocations); anything else goes to the parser.
    if let Some(inner) = value[1..].strip_suffix('"') {
        if inner
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
        {
            return Ok(inner.to_owned());
        }
    }
    parse_quoted(value)
}

/// An sf-string read by the parser: its escapes, or the reason it is not one.
fn parse_quoted(value: &str) -> Result<String, String> {
    let item = sfv::Parser::new(value)
        .parse::<sfv::Item>()
        .map_err(|error| {
            format!(
                "it starts with `\"` but is not a quoted string ({error}): send `\"<key>\"` with \
             `\\\"` and `\\\\` as the only escapes, or the key without quotes"
            )
        })?;
    if !item.params.is_empty() {
        return Err("it has parameters after the quoted string (`;…`): send the key alone".into());
    }
    match item.bare_item.as_string() {
        Some(string) => Ok(string.as_str().to_owned()),
        None => Err("it starts with `\"` but is not a quoted string".to_owned()),
    }
}

/// The lock name of `key` under `namespace` and `scope`: a hash of the three, so that
/// nothing a client sends can reach another namespace or scope, or be read as another lock's
/// name (lock layers escape braces, and these names always have them), and so that the name
/// has a fixed length. The braces make the lock, its record and its channel share a cluster
/// slot.
pub(crate) fn lock_name(namespace: &str, scope: Option<&str>, key: &str) -> String {
    let mut hash = Sha256::new();
    for part in [namespace, scope.unwrap_or(""), key] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hash.update([u8::from(scope.is_some())]);
    braced_hex_name("idempotency:", &hash.finalize())
}

/// `prefix{<digest in hex>}`: the braces make the lock, its record and its channel share
/// a cluster slot.
pub(crate) fn braced_hex_name(prefix: &str, digest: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = prefix.len() + 1;
    let mut name = vec![b'}'; digits + 2 * digest.len() + 1];
    name[..prefix.len()].copy_from_slice(prefix.as_bytes());
    name[prefix.len()] = b'{';
    // Written in place: a `String::push` per digit cost a thousand instructions a name.
    for (pair, byte) in name[digits..].chunks_exact_mut(2).zip(digest) {
        pair[0] = HEX[usize::from(byte >> 4)];
        pair[1] = HEX[usize::from(byte & 0xf)];
    }
    String::from_utf8(name).expect("a prefix, braces and hex digits are UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(headers: &[(&str, &[u8])]) -> Parts {
        let mut request = http::Request::post("/x");
        for (name, value) in headers {
            request = request.header(*name, http::HeaderValue::from_bytes(value).unwrap());
        }
        request.body(()).unwrap().into_parts().0
    }

    fn header_key(value: &[u8]) -> Result<Option<String>, IdempotencyRejection> {
        IdempotencyKeySource::Header(IDEMPOTENCY_KEY).key(
            &parts(&[("idempotency-key", value)]),
            None,
            DEFAULT_MAX_KEY_LEN,
        )
    }

    #[test]
    fn the_key_is_read_quoted_or_bare() {
        let uuid = "8e03978e-40d5-43e8-bc93-6894a57f9324";
        assert_eq!(
            header_key(format!("\"{uuid}\"").as_bytes())
                .unwrap()
                .unwrap(),
            uuid
        );
        assert_eq!(header_key(uuid.as_bytes()).unwrap().unwrap(), uuid);
        assert_eq!(header_key(br#""a\"b""#).unwrap().unwrap(), "a\"b");
        assert_eq!(header_key(b"evt_123").unwrap().unwrap(), "evt_123");
        let none = IdempotencyKeySource::Header(IDEMPOTENCY_KEY).key(&parts(&[]), None, 255);
        assert!(none.unwrap().is_none());
    }

    proptest::proptest! {
        /// The quick read of a plain quoted key agrees with the parser's, whatever the
        /// characters (quotes, escapes, spaces and parameters among them).
        #[test]
        fn quoted_keys_read_as_the_parser_reads_them(inner in "[ -~]{0,12}") {
            let value = format!("\"{inner}\"");
            proptest::prop_assert_eq!(unquote(&value), parse_quoted(&value));
        }
    }

    #[test]
    fn bad_keys_are_refused_with_the_reason() {
        for (value, reason) in [
            (&b"\"\""[..], "empty"),
            (b"a b", "visible ASCII"),
            (b"\"a b\"", "visible ASCII"),
            (&[0xff, b'a'][..], "visible ASCII"),
            (b"\"abc", "not a quoted string (unterminated string"),
            (br#""a\qb""#, "not a quoted string (invalid escape sequence"),
            (b"\"abc\"x", "not a quoted string (trailing characters"),
            (b"\"abc\";p=1", "parameters"),
        ] {
            let error = header_key(value).unwrap_err();
            assert!(error.body_text().contains(reason), "{value:?}: {error}");
            assert_eq!(error.status(), http::StatusCode::BAD_REQUEST);
        }
        let long = "k".repeat(256);
        let error = header_key(long.as_bytes()).unwrap_err();
        assert!(error.body_text().contains("at most 255"), "{error}");
        let twice = IdempotencyKeySource::Header(IDEMPOTENCY_KEY).key(
            &parts(&[("idempotency-key", b"a"), ("idempotency-key", b"b")]),
            None,
            255,
        );
        assert!(twice.unwrap_err().body_text().contains("more than once"));
    }

    #[test]
    fn names_keep_namespaces_scopes_and_keys_apart() {
        let base = lock_name("orders", None, "k1");
        assert!(base.starts_with("idempotency:{") && base.ends_with('}'));
        assert_eq!(base.len(), 13 + 64 + 1);
        assert_eq!(base, lock_name("orders", None, "k1"), "stable");
        // Pinned: processes of two versions during a rolling deploy must name a key alike
        // (SHA-256 of the length-prefixed parts and the scope flag, in hex).
        assert_eq!(
            base,
            "idempotency:{9e926f89b2825b5201b6bd7dacbc74667ffb2ea0c510a8cb97e81937d18da066}"
        );
        for other in [
            lock_name("payments", None, "k1"),
            lock_name("orders", Some(""), "k1"),
            lock_name("orders", Some("tenant-7"), "k1"),
            lock_name("orders", None, "k2"),
            lock_name("order", Some("s"), "k1"),
            lock_name("orders:", None, "k1"),
        ] {
            assert_ne!(base, other);
        }
    }
}
