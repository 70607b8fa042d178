//! Lock keys (the manager's prefix and the lock's name) and owner ids.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Keys up to this many bytes are put together on the stack.
const SHORT_KEY: usize = 256;

/// Default longest accepted lock name, in bytes (prefix excluded).
pub const DEFAULT_MAX_NAME_LEN: usize = 1024;

/// A validated lock key: the manager's prefix followed by the lock name.
///
/// Cheap to clone. Any bytes are allowed except an empty name; they only ever reach Redis
/// as data (`KEYS`/`ARGV`), never as script text.
#[derive(Clone)]
pub struct LockKey(Arc<str>, u64);

impl PartialEq for LockKey {
    fn eq(&self, other: &Self) -> bool {
        self.1 == other.1 && self.0 == other.0
    }
}

impl Eq for LockKey {}

impl Hash for LockKey {
    /// Writes the key's hash, computed once when the key was made (a key is looked up in
    /// several maps per acquisition).
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.1);
    }
}

/// Hashes a key's text with a per-process random SipHash key (lock names come from
/// requests: a keyed hash keeps colliding names from being chosen on purpose).
fn key_hash(text: &str) -> u64 {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    let mut hasher = KEYS.get_or_init(RandomState::new).build_hasher();
    // The bytes alone (`str`'s `Hash` adds a terminator, for strings hashed one after
    // another; a key's text is hashed alone).
    hasher.write(text.as_bytes());
    hasher.finish()
}

/// For maps keyed by [`LockKey`]: uses the hash the key carries instead of hashing again.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only keys are hashed with it, and they write a single u64; fold anything else.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

/// A map keyed by lock keys.
pub(crate) type KeyMap<V> = HashMap<LockKey, V, BuildHasherDefault<KeyHasher>>;
/// A set of lock keys.
pub(crate) type KeySet = HashSet<LockKey, BuildHasherDefault<KeyHasher>>;

impl LockKey {
    fn from_text(text: Arc<str>) -> Self {
        let hash = key_hash(&text);
        LockKey(text, hash)
    }

    /// Builds `prefix + name`, rejecting an empty name or one longer than `max_len` bytes.
    #[cfg(test)]
    pub(crate) fn new(prefix: &str, name: &str, max_len: usize) -> Result<Self, String> {
        Self::joined(prefix, &[name], max_len)
    }

    /// Builds `prefix` followed by the parts of the name, with the checks of
    /// [`new`](Self::new); `Err` says what is wrong with the name. A short key takes one
    /// allocation (its own).
    pub(crate) fn joined(prefix: &str, name: &[&str], max_len: usize) -> Result<Self, String> {
        let name_len: usize = name.iter().map(|part| part.len()).sum();
        if name_len == 0 {
            return Err("the lock name is empty".into());
        }
        if name_len > max_len {
            return Err(format!(
                "the lock name is {name_len} bytes long; the limit is {max_len} bytes"
            ));
        }
        if let ([part], true) = (name, prefix.is_empty()) {
            // One part and no prefix: the name is the key (no copy to join it in).
            return Ok(LockKey::from_text(Arc::from(*part)));
        }
        let parts = std::iter::once(&prefix).chain(name);
        let len = prefix.len() + name_len;
        let mut short = [0u8; SHORT_KEY];
        let text: Arc<str> = if len <= SHORT_KEY {
            let mut at = 0;
            for part in parts {
                short[at..at + part.len()].copy_from_slice(part.as_bytes());
                at += part.len();
            }
            std::str::from_utf8(&short[..len])
                .expect("joined from whole strings")
                .into()
        } else {
            parts.copied().collect::<String>().into()
        };
        Ok(LockKey::from_text(text))
    }

    /// Which of `shards` parts of a table keyed by lock keys holds this key. Uses hash
    /// bits that the table's own buckets do not (hashbrown takes the low bits for the
    /// bucket and the top seven for its tags).
    pub(crate) fn shard(&self, shards: usize) -> usize {
        (self.1 >> 32) as usize % shards
    }

    /// The full key as stored in Redis (the hash that holds the lock).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A key from its full text (prefix included), as a backend reads it back.
    #[cfg(feature = "redis")]
    pub(crate) fn from_stored(text: &str) -> LockKey {
        LockKey::from_text(text.into())
    }
}

impl fmt::Debug for LockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for LockKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Identifies one holder of a lock: `<manager UUID>:<holder number>`.
///
/// Redisson uses `<client UUID>:<thread id>`; async tasks have no threads, so every
/// acquisition that is not a reentry gets a holder number of its own. The UUID is random
/// (version 4, 122 random bits) so other processes cannot guess it.
///
/// Ids up to 57 bytes (every id a manager makes) are kept inline: one is made per
/// acquisition, and an allocation of its own would cost more than copying it.
#[derive(Clone)]
pub struct OwnerId(OwnerText);

#[derive(Clone)]
enum OwnerText {
    Inline { len: u8, bytes: [u8; OWNER_ID_MAX] },
    Shared(Arc<str>),
}

impl OwnerId {
    /// An owner id from its text, for code that speaks to a [`Backend`](crate::backend::Backend)
    /// directly. Owner ids made by a manager are unguessable; one made here is only as
    /// unguessable as its text.
    pub fn from_raw(id: &str) -> Self {
        match Self::inline(&[id.as_bytes()]) {
            Some(owner) => owner,
            None => OwnerId(OwnerText::Shared(id.into())),
        }
    }

    /// The concatenation of `parts` (whole UTF-8 strings), if it fits inline.
    fn inline(parts: &[&[u8]]) -> Option<Self> {
        let mut bytes = [0u8; OWNER_ID_MAX];
        let mut len = 0;
        for part in parts {
            bytes.get_mut(len..len + part.len())?.copy_from_slice(part);
            len += part.len();
        }
        Some(OwnerId(OwnerText::Inline {
            len: len as u8,
            bytes,
        }))
    }

    /// The owner id as written into the lock hash.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Put together from whole strings only (`inline`), so always UTF-8.
            OwnerText::Inline { .. } => std::str::from_utf8(self.as_bytes()).unwrap_or_default(),
            OwnerText::Shared(text) => text,
        }
    }

    /// The id's bytes (no UTF-8 check).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            OwnerText::Inline { len, bytes } => &bytes[..usize::from(*len)],
            OwnerText::Shared(text) => text.as_bytes(),
        }
    }
}

impl PartialEq for OwnerId {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for OwnerId {}

impl Hash for OwnerId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl fmt::Debug for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The longest owner id a manager makes: a hyphenated UUID, `:` and a `u64`.
const OWNER_ID_MAX: usize = 36 + 1 + 20;

/// Hands out owner ids for one manager.
#[derive(Debug)]
pub(crate) struct Ids {
    manager: String,
}

/// Holder numbers are unique in the process (so also per manager), handed to each thread
/// in blocks: threads taking locks at the same time do not share a counter.
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);
const BLOCK: u64 = 1024;

thread_local! {
    /// The next number of this thread's block, and the end of the block.
    static NUMBERS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

impl Ids {
    pub(crate) fn new() -> Self {
        Ids {
            manager: uuid::Uuid::new_v4().to_string(),
        }
    }

    pub(crate) fn manager_id(&self) -> &str {
        &self.manager
    }

    pub(crate) fn next_owner(&self) -> OwnerId {
        // Put together inline: `format!` costs several times more.
        let mut digits = itoa::Buffer::new();
        let number = digits.format(self.next_number()).as_bytes();
        let parts = [self.manager.as_bytes(), b":", number];
        OwnerId::inline(&parts).unwrap_or_else(|| {
            // A manager id is a UUID (36 bytes), so this is not reached.
            OwnerId(OwnerText::Shared(
                String::from_utf8_lossy(&parts.concat()).into(),
            ))
        })
    }

    fn next_number(&self) -> u64 {
        NUMBERS.with(|numbers| {
            let (mut next, mut end) = numbers.get();
            if next == end {
                next = NEXT_BLOCK.fetch_add(BLOCK, Ordering::Relaxed);
                end = next + BLOCK;
            }
            numbers.set((next + 1, end));
            next
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        assert_eq!(
            LockKey::new("", "", 10).unwrap_err(),
            "the lock name is empty"
        );
        assert!(LockKey::new("p:", "0123456789", 10).is_ok());
        let err = LockKey::new("", "01234567890", 10).unwrap_err();
        assert!(err.contains("limit is 10 bytes"), "{err}");
    }

    #[test]
    fn keys_are_joined_whole_short_or_long() {
        let key = LockKey::joined("app:", &["order:", "42"], 1024).unwrap();
        assert_eq!(key, LockKey::new("app:", "order:42", 1024).unwrap());
        // Around the length put together on the stack ("app:" is 4 bytes).
        for name in [
            "a".repeat(SHORT_KEY - 5),
            "a".repeat(SHORT_KEY - 4),
            "a".repeat(SHORT_KEY - 3),
            "é".repeat(SHORT_KEY),
        ] {
            let key = LockKey::joined("app:", &[&name[..2], &name[2..]], 4096).unwrap();
            assert_eq!(key.as_str(), format!("app:{name}"));
        }
        assert!(LockKey::joined("app:", &["", ""], 10).is_err());
        assert!(LockKey::joined("app:", &["01234", "56789"], 10).is_ok());
        assert!(LockKey::joined("app:", &["01234", "567890"], 10).is_err());
    }

    #[test]
    fn owner_ids_keep_their_text_inline_or_shared() {
        let long = "o".repeat(OWNER_ID_MAX + 1);
        let longest = "x".repeat(OWNER_ID_MAX);
        for text in ["", "a", "ünï:©", &longest, &long] {
            let owner = OwnerId::from_raw(text);
            assert_eq!(owner.as_str(), text);
            assert_eq!(owner.to_string(), text);
            assert_eq!(format!("{owner:?}"), format!("{text:?}"));
            assert_eq!(owner, OwnerId::from_raw(text));
            assert_eq!(owner.clone().as_bytes(), text.as_bytes());
        }
        assert!(matches!(
            OwnerId::from_raw(&longest).0,
            OwnerText::Inline { .. }
        ));
        assert!(matches!(OwnerId::from_raw(&long).0, OwnerText::Shared(_)));
        assert_ne!(OwnerId::from_raw("a"), OwnerId::from_raw("ab"));
        // A manager's id equals the same text given from outside (the Redis backend and
        // Redisson see only the text).
        let ids = Ids::new();
        let owner = ids.next_owner();
        assert!(matches!(owner.0, OwnerText::Inline { .. }));
        assert_eq!(OwnerId::from_raw(owner.as_str()), owner);
    }

    #[test]
    fn owner_ids_are_unique_and_carry_the_manager_id() {
        let ids = Ids::new();
        let (a, b) = (ids.next_owner(), ids.next_owner());
        assert_ne!(a, b);
        let prefix = format!("{}:", ids.manager_id());
        let number = |owner: &OwnerId| -> u64 {
            let text = owner
                .as_str()
                .strip_prefix(&prefix)
                .expect("manager id first");
            text.parse().expect("a holder number")
        };
        assert_eq!(number(&b), number(&a) + 1);
        assert_ne!(Ids::new().manager_id(), ids.manager_id());
        // Unique across threads (each takes numbers from blocks of its own) and across
        // the end of a block.
        let mut numbers: Vec<u64> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        (0..3 * BLOCK)
                            .map(|_| number(&ids.next_owner()))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect()
        });
        let all = numbers.len();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), all);
        // The longest number fits in an owner id.
        let longest = format!("{}:{}", uuid::Uuid::new_v4(), u64::MAX);
        assert_eq!(longest.len(), OWNER_ID_MAX);
    }
}
