//! Where a [`LockLayer`](super::LockLayer)'s keys come from: one key source; several key
//! sources named under one prefix; or a function returning several names. A request under
//! one key holds one lock, a request under several holds them all as one
//! [multi-lock](crate::LockManager::multi_lock).

use std::fmt;
use std::sync::Arc;

use http::request::Parts;

use super::naming::{escaped, Naming};
use crate::engine::LockManager;
use crate::http::acquire_failure::BusyAnswer;
use crate::http::key_source::KeySource;
use crate::http::rejection::LockRejection;
use crate::key::LockKey;

pub(crate) type NamesFn = dyn Fn(&Parts) -> Option<Vec<String>> + Send + Sync;

/// The most names a [`LockLayer::by_names_fn`](super::LockLayer::by_names_fn) function may
/// return for one request, by default (see
/// [`LockLayer::max_keys`](super::LockLayer::max_keys)).
pub const DEFAULT_MAX_KEYS: usize = 16;

/// The keys of a request's locks.
#[derive(Clone)]
pub(crate) enum LayerKeys {
    /// One source's value: one lock.
    One { source: KeySource, naming: Naming },
    /// Each source's value, named `<prefix><value>` (one prefix for all: the values name
    /// the same kind of thing, so `/transfers/7/9` and `/transfers/9/7` lock the same two).
    Sources {
        sources: Arc<[KeySource]>,
        naming: Naming,
    },
    /// The names a function returns (`%`, `{` and `}` percent-escaped), at most `max`.
    Names { names: Arc<NamesFn>, max: usize },
}

/// What reading the keys found.
pub(crate) enum ReadKeys {
    /// Lock this one key.
    One(LockKey),
    /// Lock these together (not empty; duplicates are dropped by the multi-lock).
    Many(Vec<LockKey>),
    /// Nothing to lock: no route matched, or the keys are missing and missing keys are
    /// allowed.
    None,
}

impl LayerKeys {
    /// Reads the request's keys. A function's names are at most its `max` (counted before
    /// duplicates are dropped, so that a request cannot make the layer name many keys); key
    /// sources give one key each, as many as the layer was built with.
    pub(crate) fn read(
        &self,
        manager: &LockManager,
        parts: &mut Parts,
        allow_missing: bool,
    ) -> Result<ReadKeys, LockRejection> {
        let keys = match self {
            LayerKeys::One { source, naming } => {
                let naming = |raw: &str| naming.key(manager, source, raw);
                return match source.read_routed(parts, naming) {
                    Ok(Some(key)) => key.map(ReadKeys::One),
                    // No route matched: the request is on its way to the fallback.
                    Ok(None) => Ok(ReadKeys::None),
                    Err(LockRejection::MissingKey { .. }) if allow_missing => Ok(ReadKeys::None),
                    Err(rejection) => Err(rejection),
                };
            }
            LayerKeys::Sources { sources, naming } => {
                let mut keys = Vec::with_capacity(sources.len());
                for source in sources.iter() {
                    let naming = |raw: &str| naming.key(manager, source, raw);
                    match source.read_routed(parts, naming) {
                        Ok(Some(key)) => keys.push(key?),
                        Ok(None) => return Ok(ReadKeys::None),
                        Err(LockRejection::MissingKey { .. }) if allow_missing => {}
                        Err(rejection) => return Err(rejection),
                    }
                }
                keys
            }
            LayerKeys::Names { names, max } => {
                let names = match names(parts) {
                    Some(names) if !names.is_empty() => names,
                    _ if allow_missing => return Ok(ReadKeys::None),
                    _ => {
                        let what = self.describe();
                        return Err(LockRejection::MissingKey { what });
                    }
                };
                self.check_count(names.len(), *max)?;
                let rejection =
                    |e| LockRejection::from_error(e, &self.describe(), BusyAnswer::default());
                names
                    .iter()
                    .map(|name| {
                        // As `LockLayer::by_fn`: braces in request input make no hash tag.
                        let escaped = escaped(name);
                        let name = escaped.as_deref().unwrap_or(name);
                        manager.key(name).map_err(rejection)
                    })
                    .collect::<Result<_, _>>()?
            }
        };
        Ok(if keys.is_empty() {
            ReadKeys::None
        } else {
            ReadKeys::Many(keys)
        })
    }

    fn check_count(&self, count: usize, max: usize) -> Result<(), LockRejection> {
        if count <= max {
            return Ok(());
        }
        Err(LockRejection::InvalidKey {
            what: self.describe(),
            reason: format!(
                "the request names {count} locks, more than the {max} this route allows"
            ),
        })
    }

    /// Where the keys come from, for messages: "path parameter `orderId`", "path
    /// parameters `from`, `to`".
    pub(crate) fn describe(&self) -> String {
        match self {
            LayerKeys::One { source, .. } => source.describe(),
            LayerKeys::Sources { sources, .. } => sources
                .iter()
                .map(KeySource::describe)
                .collect::<Vec<_>>()
                .join(", "),
            LayerKeys::Names { .. } => "lock keys".to_owned(),
        }
    }
}

impl fmt::Debug for LayerKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}
