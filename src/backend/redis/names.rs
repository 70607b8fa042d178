//! Redisson's names for the Redis keys and channels of a lock.
//!
//! Redisson's `prefixName(p, n)` is `p + ":" + n` when `n` contains `{`, else
//! `p + ":{" + n + "}"`: the braces make a name without a hash tag of its own share the
//! lock key's cluster slot. tower-lock follows it (and treats `}` like `{`, so that a key
//! with braces that form no tag keeps its channel text as Redisson would build it).

use crate::key::LockKey;

const CHANNEL_PREFIX: &str = "redisson_lock__channel:";

/// The unlock channel of the exclusive lock `key`: `redisson_lock__channel:{<key>}`, or
/// `redisson_lock__channel:<key>` when the key has braces of its own.
pub fn unlock_channel(key: &LockKey) -> String {
    channel_parts(key).concat()
}

/// [`unlock_channel`] in parts, to be written where it is needed.
pub(super) fn channel_parts(key: &LockKey) -> [&str; 4] {
    let text = key.as_str();
    if has_braces(text) {
        [CHANNEL_PREFIX, "", text, ""]
    } else {
        [CHANNEL_PREFIX, "{", text, "}"]
    }
}

/// The key whose unlock channel `channel` is, if it is one.
pub(super) fn key_of_channel(channel: &str) -> Option<LockKey> {
    let inner = channel.strip_prefix(CHANNEL_PREFIX)?;
    let key = match inner.strip_prefix('{').and_then(|k| k.strip_suffix('}')) {
        Some(key) if !has_braces(key) => key,
        _ if has_braces(inner) => inner,
        _ => return None,
    };
    Some(LockKey::from_stored(key))
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

fn has_braces(key: &str) -> bool {
    key.contains(['{', '}'])
}

#[cfg(test)]
mod tests {
    use fred::util::redis_keyslot;

    use super::*;

    #[test]
    fn keys_follow_redisson_layout() {
        let key = LockKey::new("app:", "order:42", 1024).unwrap();
        assert_eq!(key.as_str(), "app:order:42");
        assert_eq!(
            unlock_channel(&key),
            "redisson_lock__channel:{app:order:42}"
        );
        assert_eq!(key_of_channel(&unlock_channel(&key)), Some(key));
        assert_eq!(key_of_channel("other"), None);
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
            assert_eq!(key_of_channel(&unlock_channel(&key)), Some(key.clone()));
        }
        let key = LockKey::new("", "a{b}c", 1024).unwrap();
        assert_eq!(unlock_channel(&key), "redisson_lock__channel:a{b}c");
        assert_eq!(hash_tag(&key), Some("b"));
        assert_eq!(hash_tag(&LockKey::new("", "a{}b", 1024).unwrap()), None);
    }
}
