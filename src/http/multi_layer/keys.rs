//! Where a [`MultiLockLayer`](super::MultiLockLayer)'s keys come from: several key sources
//! named under one prefix, or a function returning several names.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;

use crate::engine::LockManager;
use crate::http::key_source::KeySource;
use crate::http::layer::{escaped, Naming};
use crate::http::rejection::{BusyAnswer, LockRejection};
use crate::key::LockKey;

pub(crate) type NamesFn = dyn Fn(&Parts) -> Option<Vec<String>> + Send + Sync;

/// The keys of a request's locks.
#[derive(Clone)]
pub(crate) enum MultiKeySource {
    /// Each source's value, named `<prefix><value>` (one prefix for all: the values name
    /// the same kind of thing, so `/transfers/7/9` and `/transfers/9/7` lock the same two).
    Sources {
        sources: Arc<[KeySource]>,
        naming: Naming,
    },
    /// The names a function returns (`%`, `{` and `}` percent-escaped).
    Names(Arc<NamesFn>),
}

/// What reading the keys found.
pub(crate) enum Keys {
    /// Lock these (not empty; duplicates are dropped by the multi-lock).
    Lock(Vec<LockKey>),
    /// Nothing to lock: no route matched, or every key is missing and missing keys are
    /// allowed.
    None,
}

impl MultiKeySource {
    /// Reads the request's keys. A function's names are at most `max` (counted before
    /// duplicates are dropped, so that a request cannot make the layer name many keys); key
    /// sources give one key each, as many as the layer was built with.
    pub(crate) fn read(
        &self,
        manager: &LockManager,
        parts: &mut Parts,
        allow_missing: bool,
        max: usize,
    ) -> Result<Keys, LockRejection> {
        let keys = match self {
            MultiKeySource::Sources { sources, naming } => {
                let mut keys = Vec::with_capacity(sources.len());
                for source in sources.iter() {
                    let naming = |raw: &str| naming.key(manager, source, raw);
                    match source.read_routed(parts, naming) {
                        Ok(Some(key)) => keys.push(key?),
                        // No route matched: the request is on its way to the fallback.
                        Ok(None) => return Ok(Keys::None),
                        Err(LockRejection::MissingKey { .. }) if allow_missing => {}
                        Err(rejection) => return Err(rejection),
                    }
                }
                keys
            }
            MultiKeySource::Names(names) => {
                let missing = || LockRejection::MissingKey {
                    what: self.describe(),
                };
                let names = match names(parts) {
                    Some(names) if !names.is_empty() => names,
                    _ if allow_missing => return Ok(Keys::None),
                    _ => return Err(missing()),
                };
                self.check_count(names.len(), max)?;
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
            Keys::None
        } else {
            Keys::Lock(keys)
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

    /// Where the keys come from, for messages: "path parameters `from`, `to`".
    pub(crate) fn describe(&self) -> String {
        match self {
            MultiKeySource::Sources { sources, .. } => sources
                .iter()
                .map(KeySource::describe)
                .collect::<Vec<_>>()
                .join(", "),
            MultiKeySource::Names(_) => "lock keys".to_owned(),
        }
    }
}

impl fmt::Debug for MultiKeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}
