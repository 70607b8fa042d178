//! Redisson's names for the Redis keys and channels of a lock.
//!
//! Redisson's `prefixName(p, n)` is `p + ":" + n` when `n` contains `{`, else
//! `p + ":{" + n + "}"`: the braces make a name without a hash tag of its own share the
//! lock key's cluster slot. tower-lock follows it to the letter (the interop suite checks it
//! against the real Redisson, `}` without `{` included). Two keys can share a channel: `a`
//! and `{a}` both use `redisson_lock__channel:{a}`; a message there concerns both.

use crate::key::LockKey;
use crate::kind::LockKind;

const CHANNEL_PREFIX: &str = "redisson_lock__channel:";
const READ_WRITE_CHANNEL_PREFIX: &str = "redisson_rwlock:";
const FAIR_QUEUE_PREFIX: &str = "redisson_lock_queue:";
const FAIR_DEADLINES_PREFIX: &str = "redisson_lock_timeout:";
const FENCING_TOKENS_PREFIX: &str = "redisson_lock_token:";
const RECORD_PREFIX: &str = "tower_lock_record:";
const RECORD_CHANNEL_PREFIX: &str = "tower_lock_record_channel:";
const SEMAPHORE_CHANNEL_PREFIX: &str = "redisson_sc:";

/// Redisson's `prefixName(prefix, key)` in parts, to be joined or written where needed:
/// the key in braces unless it contains `{`.
fn prefixed_parts<'a>(prefix: &'a str, key: &'a LockKey) -> [&'a str; 4] {
    let text = key.as_str();
    if has_braces(text) {
        [prefix, "", text, ""]
    } else {
        [prefix, "{", text, "}"]
    }
}

fn prefixed(prefix: &str, key: &LockKey) -> String {
    prefixed_parts(prefix, key).concat()
}

/// The channel of the read-write lock `key`: `redisson_rwlock:{<key>}` (or without braces
/// when the key contains `{`).
pub(in crate::backend) fn read_write_channel(key: &LockKey) -> String {
    prefixed(READ_WRITE_CHANNEL_PREFIX, key)
}

/// The prefix of the read-write lock's per-hold keys: `{<key>}` (or the key when it
/// contains `{`); a read hold's timeout key is `<prefix>:<owner>:rwlock_timeout:<n>`
/// (Redisson's `suffixName`).
pub(in crate::backend) fn read_write_key_prefix(key: &LockKey) -> String {
    prefixed("", key)
}

/// The writers waiting for the read-write lock `key` (a tower-lock key, not Redisson's):
/// `<prefix>:tower_lock:waiting_writers`, in the lock's slot.
pub(in crate::backend) fn waiting_writers(key: &LockKey) -> String {
    format!("{}:tower_lock:waiting_writers", read_write_key_prefix(key))
}

/// The permits' deadlines of the semaphore `key`: `{<key>}:timeout` (or `<key>:timeout`
/// when the key contains `{`; Redisson's `suffixName`).
pub(in crate::backend) fn semaphore_deadlines(key: &LockKey) -> String {
    format!("{}:timeout", read_write_key_prefix(key))
}

/// The channel of the semaphore `key`: `redisson_sc:{<key>}` (braces as Redisson's).
pub(in crate::backend) fn semaphore_channel(key: &LockKey) -> String {
    prefixed(SEMAPHORE_CHANNEL_PREFIX, key)
}

/// The keys whose semaphore channel `channel` is (as [`keys_of_channel`]).
pub(in crate::backend) fn keys_of_semaphore_channel(
    channel: &str,
) -> impl Iterator<Item = LockKey> + '_ {
    keys_after(channel, SEMAPHORE_CHANNEL_PREFIX)
}

/// The unlock channel of the exclusive lock `key`: `redisson_lock__channel:{<key>}`, or
/// `redisson_lock__channel:<key>` when the key contains `{`.
pub fn unlock_channel(key: &LockKey) -> String {
    prefixed(CHANNEL_PREFIX, key)
}

/// The fair lock's waiter list: `redisson_lock_queue:{<key>}` (braces as Redisson's).
pub(in crate::backend) fn fair_queue(key: &LockKey) -> String {
    prefixed(FAIR_QUEUE_PREFIX, key)
}

/// The fair lock's deadlines of the places in its queue: `redisson_lock_timeout:{<key>}`.
pub(in crate::backend) fn fair_deadlines(key: &LockKey) -> String {
    prefixed(FAIR_DEADLINES_PREFIX, key)
}

/// The fenced lock's token counter: `redisson_lock_token:{<key>}` (braces as Redisson's).
/// It never expires: see `docs/fenced-locks.md`.
pub(in crate::backend) fn fencing_tokens(key: &LockKey) -> String {
    prefixed(FENCING_TOKENS_PREFIX, key)
}

/// The channel of the fair waiter `owner` of `key`:
/// `redisson_lock__channel:{<key>}:<owner>` (the lock's channel with the owner after it).
pub(in crate::backend) fn fair_channel(key: &LockKey, owner: &crate::key::OwnerId) -> String {
    format!("{}:{owner}", unlock_channel(key))
}

/// The record of the lock `key` (a tower-lock key, not Redisson's), in parts:
/// `tower_lock_record:{<key>}` (braces as Redisson's, so it shares the lock's slot).
pub(in crate::backend) fn record_parts(key: &LockKey) -> [&str; 4] {
    prefixed_parts(RECORD_PREFIX, key)
}

/// The channel on which a release that stores the record of `key` for waiters sends it:
/// `tower_lock_record_channel:{<key>}` (tower-lock's own: Redisson's lock channel carries
/// numbers only, and a Redisson client reads every message on it as one). The batch
/// script makes it from the lock's [`unlock_channel`] (this prefix for Redisson's), so
/// that a release does not carry it.
pub(in crate::backend) fn record_channel(key: &LockKey) -> String {
    prefixed(RECORD_CHANNEL_PREFIX, key)
}

/// The keys whose record channel `channel` is (as [`keys_of_channel`]), if it is one.
pub(in crate::backend) fn keys_of_record_channel(
    channel: &str,
) -> Option<impl Iterator<Item = LockKey> + '_> {
    channel
        .starts_with(RECORD_CHANNEL_PREFIX)
        .then(|| keys_after(channel, RECORD_CHANNEL_PREFIX))
}

/// [`unlock_channel`] in parts, to be written where it is needed.
pub(in crate::backend) fn channel_parts(key: &LockKey) -> [&str; 4] {
    prefixed_parts(CHANNEL_PREFIX, key)
}

/// The channel a local waiter of a lock of `kind` on `key` listens on: the read-write
/// lock's, the semaphore's or the plain lock's.
pub(in crate::backend) fn waiting_channel(key: &LockKey, kind: Option<LockKind>) -> String {
    match kind {
        Some(LockKind::Read | LockKind::Write) => read_write_channel(key),
        Some(LockKind::Semaphore(_)) => semaphore_channel(key),
        // A fair lock's waiters have channels of their own (`waiter_channels`); its
        // releases that free the lock still publish here, as the plain and fenced lock's.
        Some(LockKind::Plain | LockKind::Fair | LockKind::Fenced) | None => unlock_channel(key),
    }
}

/// The keys whose unlock channel `channel` is: none, one, or two (`{a}` is the channel of
/// both `a` and `{a}`).
pub(in crate::backend) fn keys_of_channel(channel: &str) -> impl Iterator<Item = LockKey> + '_ {
    keys_after(channel, CHANNEL_PREFIX)
}

/// The keys whose read-write lock channel `channel` is (as [`keys_of_channel`]).
pub(in crate::backend) fn keys_of_read_write_channel(
    channel: &str,
) -> impl Iterator<Item = LockKey> + '_ {
    keys_after(channel, READ_WRITE_CHANNEL_PREFIX)
}

fn keys_after<'a>(channel: &'a str, prefix: &str) -> impl Iterator<Item = LockKey> + 'a {
    let inner = channel.strip_prefix(prefix);
    // A key without `{`, in the braces Redisson adds.
    let bare = inner
        .and_then(|inner| inner.strip_prefix('{')?.strip_suffix('}'))
        .filter(|key| !has_braces(key));
    // A key with `{` of its own, as it is.
    let own = inner.filter(|inner| has_braces(inner));
    bare.into_iter().chain(own).map(LockKey::from_stored)
}

/// The Redis Cluster hash tag of `key`, if it has one (the text between the first `{` and
/// the first `}` after it, when not empty).
#[cfg(test)]
fn hash_tag(key: &LockKey) -> Option<&str> {
    let text = key.as_str();
    let open = text.find('{')?;
    let rest = &text[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
}

/// Redisson's test (`name.contains("{")`): a `}` alone does not count.
fn has_braces(key: &str) -> bool {
    key.contains('{')
}

#[cfg(test)]
mod tests {
    use fred::util::redis_keyslot;

    use super::*;

    #[test]
    fn a_record_channel_is_the_unlock_channel_under_its_own_prefix() {
        // As `batch.lua` makes it: its prefix, then the unlock channel after Redisson's.
        for name in ["order:42", "{order}:42", "a}b", "coalesce:{00ff}"] {
            let key = LockKey::new("", name, 1024).unwrap();
            let unlock = unlock_channel(&key);
            let made = format!("{RECORD_CHANNEL_PREFIX}{}", &unlock[CHANNEL_PREFIX.len()..]);
            assert_eq!(made, record_channel(&key), "{name}");
            assert_eq!(CHANNEL_PREFIX.len(), 23, "batch.lua cuts 23 bytes");
        }
    }

    #[test]
    fn keys_follow_redisson_layout() {
        let key = LockKey::new("app:", "order:42", 1024).unwrap();
        assert_eq!(key.as_str(), "app:order:42");
        assert_eq!(
            unlock_channel(&key),
            "redisson_lock__channel:{app:order:42}"
        );
        // `{app:order:42}` would use the same channel (Redisson's rule).
        let braced = LockKey::new("", "{app:order:42}", 1024).unwrap();
        assert_eq!(unlock_channel(&braced), unlock_channel(&key));
        assert_eq!(keys(&unlock_channel(&key)), [key, braced]);
        assert_eq!(keys("other"), []);
    }

    #[test]
    fn keys_with_a_hash_tag_keep_their_channel_in_its_slot() {
        for name in ["{order:42}:pay", "a{b}c", "x{y}{z}", "plain", "ünï{©}"] {
            let key = LockKey::new("", name, 1024).unwrap();
            let slot = redis_keyslot(key.as_str().as_bytes());
            assert_eq!(
                redis_keyslot(unlock_channel(&key).as_bytes()),
                slot,
                "{name}"
            );
            assert!(keys(&unlock_channel(&key)).contains(&key), "{name}");
        }
        let key = LockKey::new("", "a{b}c", 1024).unwrap();
        assert_eq!(unlock_channel(&key), "redisson_lock__channel:a{b}c");
        assert_eq!(hash_tag(&key), Some("b"));
        assert_eq!(hash_tag(&LockKey::new("", "a{}b", 1024).unwrap()), None);
    }

    fn keys(channel: &str) -> Vec<LockKey> {
        keys_of_channel(channel).collect()
    }

    /// Redisson adds braces unless the name contains `{`; a `}` alone does not count.
    #[test]
    fn channels_follow_redissons_rule_to_the_letter() {
        let key = |name| LockKey::new("", name, 1024).unwrap();
        assert_eq!(unlock_channel(&key("a}b")), "redisson_lock__channel:{a}b}");
        assert_eq!(
            keys("redisson_lock__channel:{a}b}"),
            [key("a}b"), key("{a}b}")]
        );
        assert_eq!(unlock_channel(&key("a")), "redisson_lock__channel:{a}");
        assert_eq!(unlock_channel(&key("{a}")), "redisson_lock__channel:{a}");
        assert_eq!(keys("redisson_lock__channel:{a}"), [key("a"), key("{a}")]);
        assert_eq!(keys("redisson_lock__channel:x{y"), [key("x{y")]);
        assert_eq!(keys("redisson_lock__channel:{x{y}"), [key("{x{y}")]);
        assert_eq!(keys("redisson_lock__channel:plain"), []);
    }

    #[test]
    fn read_write_names_are_redissons() {
        let key = |name| LockKey::new("", name, 1024).unwrap();
        assert_eq!(read_write_channel(&key("order")), "redisson_rwlock:{order}");
        assert_eq!(read_write_key_prefix(&key("order")), "{order}");
        assert_eq!(read_write_channel(&key("{o}:1")), "redisson_rwlock:{o}:1");
        assert_eq!(read_write_key_prefix(&key("{o}:1")), "{o}:1");
        let keys: Vec<LockKey> = keys_of_read_write_channel("redisson_rwlock:{order}").collect();
        assert_eq!(keys, [key("order"), key("{order}")]);
        assert_eq!(
            keys_of_read_write_channel("redisson_lock__channel:{order}").count(),
            0
        );
        for name in ["order", "{o}:1", "a}b"] {
            let k = key(name);
            let slot = redis_keyslot(read_write_key_prefix(&k).as_bytes());
            assert_eq!(
                redis_keyslot(read_write_channel(&k).as_bytes()),
                slot,
                "{name}"
            );
        }
    }
}
