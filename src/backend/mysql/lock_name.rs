//! Lock names on the server: MySQL limits a named lock to 64 characters (MariaDB 10.11 to
//! 192 bytes) and compares names without regard to case on some versions and with it on
//! others. A name is used as it is when it is lowercase, not empty and at most 64
//! characters; any other is mapped the way DistributedLock's `MySqlDistributedLock` (.NET)
//! maps it, so that .NET services take the same locks: the lowercased name cut to 32
//! characters, then 32 base32 characters of the SHA-512 of the name's UTF-8.

use sha2::{Digest, Sha512};

/// The longest name MySQL takes (characters).
pub const MAX_LOCK_NAME: usize = 64;

/// Characters of the hash in a mapped name (160 bits in base32).
const HASH_CHARS: usize = 32;

/// DistributedLock's base32 alphabet (RFC 4648's, lowercase).
const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The server's name for the lock named `name`. Lengths count UTF-16 code units, as .NET's
/// do (the same as characters outside the astral planes).
pub fn server_lock_name(name: &str) -> String {
    let lowered = if name.is_empty() {
        "__empty__".to_owned()
    } else {
        name.to_lowercase()
    };
    let units: Vec<u16> = lowered.encode_utf16().collect();
    if lowered == name && units.len() <= MAX_LOCK_NAME {
        return name.to_owned();
    }
    let hash = hash(name.as_bytes());
    let keep = units.len().min(MAX_LOCK_NAME - HASH_CHARS);
    let mut mapped = String::from_utf16_lossy(&units[..keep]);
    mapped.push_str(&hash);
    mapped
}

/// 160 bits of the SHA-512 of `bytes` in base32, bits taken from each byte's lowest first.
fn hash(bytes: &[u8]) -> String {
    let digest = Sha512::digest(bytes);
    let mut out = String::with_capacity(HASH_CHARS);
    let (mut buffer, mut bits, mut next) = (0u32, 0u32, 0usize);
    for _ in 0..HASH_CHARS {
        if bits < 5 {
            buffer |= u32::from(digest[next]) << bits;
            next += 1;
            bits += 8;
        }
        out.push(char::from(BASE32[(buffer & 31) as usize]));
        buffer >>= 5;
        bits -= 5;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lowercase_names_are_their_own() {
        assert_eq!(server_lock_name("order:42"), "order:42");
        assert_eq!(server_lock_name(&"a".repeat(64)), "a".repeat(64));
    }

    #[test]
    fn other_names_are_cut_and_hashed_to_64_characters() {
        for name in ["Order:42", "", &"a".repeat(65), "ÜBER"] {
            let mapped = server_lock_name(name);
            assert!(mapped.encode_utf16().count() <= MAX_LOCK_NAME, "{mapped}");
            assert_eq!(mapped, server_lock_name(name), "stable");
            assert_ne!(mapped, name);
            let hash = &mapped[mapped.len() - HASH_CHARS..];
            assert!(hash.bytes().all(|b| BASE32.contains(&b)), "{mapped}");
        }
        assert!(server_lock_name("Order:42").starts_with("order:42"));
        assert!(server_lock_name("").starts_with("__empty__"));
        assert_eq!(server_lock_name(&"a".repeat(65)).len(), 64);
        assert_ne!(server_lock_name("Order:42"), server_lock_name("ORDER:42"));
    }

    /// The names DistributedLock's own tests expect its `MySqlDistributedLock` to use.
    #[test]
    fn names_match_distributed_locks() {
        assert_eq!(
            server_lock_name(""),
            "__empty__p6ad62yppho33ytkibum5wbqhqvbcsxa"
        );
        assert_eq!(server_lock_name("abc"), "abc");
        assert_eq!(
            server_lock_name("ABC"),
            "abczj4qr6tvn4a3kmgq4bukhowqyfrlxsb3"
        );
        assert_eq!(server_lock_name("\\"), "\\");
        assert_eq!(
            server_lock_name(&"x".repeat(65)),
            format!("{}gkd2zq6c6ey6mhs45clqg7vij6ycgo43", "x".repeat(32))
        );
    }
}
