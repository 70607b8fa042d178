//! A request's coalescing key: what makes two requests the same request.

use http::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION};
use http::request::Parts;
use sha2::{Digest, Sha256};

use super::config::CoalesceConfig;
use crate::idempotency::key::braced_hex_name;

/// How much of a key's digest its lock's name carries (128 bits).
const NAME_DIGEST_BYTES: usize = 16;

/// What the layer makes of a request's head.
pub(super) enum Keyed {
    /// The key's lock name and its digest (kept in a shared record, checked on reading it).
    Key { name: String, digest: [u8; 32] },
    /// It carries credentials and the layer has no scope for them: it is never coalesced
    /// with another client's request.
    Private,
    /// The layer's key function gave none: it runs as it is.
    NoKey,
}

/// The key of a request: its method, path and query (or what the layer's key function
/// returns), the values of the headers the layer varies on, and its scope, hashed under
/// the layer's namespace.
pub(super) fn key_of(config: &CoalesceConfig, parts: &Parts) -> Keyed {
    let scope = config.scope.as_ref().and_then(|scope| scope(parts));
    if scope.is_none() && !config.share_credentials && carries_credentials(parts) {
        return Keyed::Private;
    }
    let mut hash = Sha256::new();
    let mut part = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_be_bytes());
        hash.update(bytes);
    };
    part(config.namespace.as_bytes());
    match &scope {
        Some(scope) => {
            part(b"scoped");
            part(scope.as_bytes());
        }
        None => part(b"unscoped"),
    }
    match &config.key {
        Some(key) => match key(parts) {
            Some(key) => part(key.as_bytes()),
            None => return Keyed::NoKey,
        },
        None => {
            part(parts.method.as_str().as_bytes());
            part(parts.uri.path().as_bytes());
            part(parts.uri.query().unwrap_or("").as_bytes());
        }
    }
    for name in &config.vary {
        part(name.as_str().as_bytes());
        let values = parts.headers.get_all(name);
        part(&(values.iter().count() as u64).to_be_bytes());
        for value in values {
            part(value.as_bytes());
        }
    }
    let digest: [u8; 32] = hash.finalize().into();
    // Half the digest names the lock: a name rides in every key and channel of the lock's
    // Redis calls, where each byte costs. Two keys that shared a name would only wait for
    // each other: a shared response carries the whole digest, checked by its readers
    // (`Outcome::from_record`), and this process's flights are keyed by the whole digest.
    let name = braced_hex_name("coalesce:", &digest[..NAME_DIGEST_BYTES]);
    Keyed::Key { name, digest }
}

/// Whether the request says who its client is: its response may be that client's alone.
fn carries_credentials(parts: &Parts) -> bool {
    [AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION]
        .iter()
        .any(|name| parts.headers.contains_key(name))
}

/// Whether a response says it depends on request headers the key does not hold (its `Vary`
/// names one that the layer does not vary on, or is `*`): another request of the key may
/// differ in them, so the response is not for sharing.
pub(super) fn varies_beyond_key(config: &CoalesceConfig, response: &http::HeaderMap) -> bool {
    response.get_all(http::header::VARY).iter().any(|value| {
        let Ok(value) = value.to_str() else {
            return true;
        };
        value.split(',').map(str::trim).any(|name| {
            !name.is_empty()
                && (name == "*"
                    || !config
                        .vary
                        .iter()
                        .any(|kept| kept.as_str().eq_ignore_ascii_case(name)))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_carries_half_the_digest_and_the_digest_is_whole() {
        let layer = super::super::CoalesceLayer::new();
        let config = layer.config();
        let parts = http::Request::get("/reports/7?x=1")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let Keyed::Key { name, digest } = key_of(config, &parts) else {
            panic!("a GET without credentials has a key");
        };
        assert_eq!(name, braced_hex_name("coalesce:", &digest[..16]));
        assert_eq!(name.len(), "coalesce:{}".len() + 32);
        let other = http::Request::get("/reports/7?x=2")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let Keyed::Key { name: other, .. } = key_of(config, &other) else {
            panic!("a GET without credentials has a key");
        };
        assert_ne!(name, other);
    }
}
