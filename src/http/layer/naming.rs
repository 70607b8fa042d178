//! How a request's raw key value becomes its lock's name.

use std::sync::Arc;

use crate::engine::LockManager;
use crate::http::acquire_failure::BusyAnswer;
use crate::http::key_source::KeySource;
use crate::http::rejection::LockRejection;
use crate::key::LockKey;

pub(crate) type NameFn = dyn Fn(&str) -> Result<String, String> + Send + Sync;

/// How a request's raw key value becomes its lock's name.
#[derive(Clone)]
pub(crate) enum Naming {
    /// `<prefix><value>`, with `%`, `{` and `}` in the value percent-escaped (braces
    /// would make a Redis Cluster hash tag of the value).
    Prefixed(Arc<str>),
    /// A [`Lockable`](crate::extract::Lockable)'s parse and name.
    Parsed(Arc<NameFn>),
}

impl Naming {
    /// The key of `raw`'s lock, or the rejection of a value that names none.
    pub(crate) fn key(
        &self,
        manager: &LockManager,
        source: &KeySource,
        raw: &str,
    ) -> Result<LockKey, LockRejection> {
        let key = match self {
            Naming::Prefixed(prefix) => match escaped(raw) {
                Some(escaped) => manager.joined_key(&[prefix, &escaped]),
                None => manager.joined_key(&[prefix, raw]),
            },
            Naming::Parsed(name) => match name(raw) {
                Ok(name) => manager.key(&name),
                Err(reason) => {
                    let what = source.describe();
                    return Err(LockRejection::InvalidKey { what, reason });
                }
            },
        };
        // Naming only fails with `InvalidName` (a 400), so the busy answer is not used.
        key.map_err(|error| {
            LockRejection::from_error(error, &source.describe(), BusyAnswer::default())
        })
    }
}

/// `raw` with `%`, `{` and `}` percent-escaped, or `None` when it has none of them.
pub(crate) fn escaped(raw: &str) -> Option<String> {
    if !raw.bytes().any(|byte| matches!(byte, b'%' | b'{' | b'}')) {
        return None;
    }
    let mut name = String::with_capacity(raw.len() + 8);
    for c in raw.chars() {
        match c {
            '%' => name.push_str("%25"),
            '{' => name.push_str("%7B"),
            '}' => name.push_str("%7D"),
            c => name.push(c),
        }
    }
    Some(name)
}
