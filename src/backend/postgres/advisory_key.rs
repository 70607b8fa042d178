//! Lock keys as PostgreSQL advisory lock keys, mapped as madelson's DistributedLock (.NET)
//! maps names (`PostgresAdvisoryLockKey` with hashing allowed), so that a .NET service on
//! DistributedLock and a Rust service on tower-lock take the same lock for the same name.

use std::fmt;

use sha1::{Digest, Sha1};

/// A PostgreSQL advisory lock key: one 64-bit number (`pg_advisory_lock(bigint)`) or two
/// 32-bit numbers (`pg_advisory_lock(int, int)`). The two spaces never overlap: the server
/// keeps them apart.
///
/// A lock key (the manager's prefix and the lock's name) maps as DistributedLock maps it:
///
/// - up to 9 ASCII characters: packed 7 bits each into a pair (no two such names share a
///   key);
/// - 16 hexadecimal digits: that 64-bit number (`"00000000000000ff"` is 255); two groups of
///   8 separated by a comma: that pair (`"00000003,ffffffff"` is (3, -1));
/// - any other name: the first 8 bytes of its UTF-8 text's SHA-1, little-endian. Two such
///   names may share a key (about one chance in 2⁶⁴ for a given pair): they then share
///   one lock, which waits more than needed but never lets two holders of one name in.
///
/// [`Display`](fmt::Display) writes a key as DistributedLock does (16 hex digits, or two
/// groups of 8, or the packed name itself), a name that maps back to the same key.
///
/// # Examples
///
/// ```
/// use tower_lock::backend::AdvisoryKey;
///
/// assert_eq!(AdvisoryKey::from_name("0000000000000001"), AdvisoryKey::Single(1));
/// assert_eq!(AdvisoryKey::from_name("00000003,ffffffff"), AdvisoryKey::Pair(3, -1));
/// let hashed = AdvisoryKey::from_name("orders:42:payment");
/// assert_eq!(AdvisoryKey::from_name(&hashed.to_string()), hashed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdvisoryKey {
    /// A 64-bit key.
    Single(i64),
    /// A pair of 32-bit keys.
    Pair(i32, i32),
}

/// Bits per packed ASCII character, and how many fit in 63 bits.
const ASCII_BITS: u32 = 7;
const ASCII_MAX: i64 = (1 << ASCII_BITS) - 1;
const ASCII_MAX_LEN: usize = 9;

impl AdvisoryKey {
    /// The advisory key of a lock key (see the type's documentation).
    pub fn from_name(name: &str) -> AdvisoryKey {
        if let Some(packed) = pack_ascii(name) {
            return split(packed);
        }
        if let Some(key) = parse_hex(name) {
            return key;
        }
        let digest = Sha1::digest(name.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        AdvisoryKey::Single(i64::from_le_bytes(first))
    }

    /// The key's two 32-bit halves and the `objsubid` under which `pg_locks` shows it
    /// (`classid`, `objid`, `objsubid`): a 64-bit key's high and low halves with 1, a
    /// pair with 2.
    pub(in crate::backend) fn pg_locks_columns(self) -> (u32, u32, i16) {
        match self {
            AdvisoryKey::Single(key) => ((key >> 32) as u32, key as u32, 1),
            AdvisoryKey::Pair(first, second) => (first as u32, second as u32, 2),
        }
    }

    /// The key `pg_locks` shows in these columns, if they are an advisory key's.
    pub(in crate::backend) fn from_pg_locks(
        classid: u32,
        objid: u32,
        objsubid: i16,
    ) -> Option<Self> {
        match objsubid {
            1 => Some(AdvisoryKey::Single(
                (i64::from(classid) << 32) | i64::from(objid),
            )),
            2 => Some(AdvisoryKey::Pair(classid as i32, objid as i32)),
            _ => None,
        }
    }
}

/// Up to 9 ASCII characters, 7 bits each, then a 0 bit, then 1s to fill 64 bits (so that
/// names of different lengths differ, leading NULs included).
fn pack_ascii(name: &str) -> Option<i64> {
    if name.len() > ASCII_MAX_LEN || !name.is_ascii() {
        return None;
    }
    let mut packed: i64 = 0;
    for byte in name.bytes() {
        packed = (packed << ASCII_BITS) | i64::from(byte);
    }
    packed <<= 1;
    for _ in name.len()..ASCII_MAX_LEN {
        packed = (packed << ASCII_BITS) | ASCII_MAX;
    }
    Some(packed)
}

/// The pair a packed 64-bit value stands for (high half first).
fn split(packed: i64) -> AdvisoryKey {
    AdvisoryKey::Pair((packed >> 32) as i32, packed as i32)
}

/// `XXXXXXXXXXXXXXXX` (a 64-bit key) or `XXXXXXXX,XXXXXXXX` (a pair), each X a hex digit.
fn parse_hex(name: &str) -> Option<AdvisoryKey> {
    let part = |text: &str| -> Option<i32> {
        if text.len() != 8 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(text, 16).ok().map(|value| value as i32)
    };
    match name.len() {
        16 if name.is_ascii() => {
            let (high, low) = (part(&name[..8])?, part(&name[8..])?);
            Some(AdvisoryKey::Single(
                (i64::from(high) << 32) | i64::from(low as u32),
            ))
        }
        17 if name.is_ascii() && name.as_bytes()[8] == b',' => {
            Some(AdvisoryKey::Pair(part(&name[..8])?, part(&name[9..])?))
        }
        _ => None,
    }
}

impl fmt::Display for AdvisoryKey {
    /// DistributedLock's text for the key: 16 hex digits, two groups of 8, or the packed
    /// ASCII name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AdvisoryKey::Single(key) => write!(f, "{:016x}", key as u64),
            AdvisoryKey::Pair(first, second) => match unpack_ascii(*self) {
                Some(name) => f.write_str(&name),
                None => write!(f, "{:08x},{:08x}", first as u32, second as u32),
            },
        }
    }
}

/// The ASCII name a pair packs, if it is one.
fn unpack_ascii(key: AdvisoryKey) -> Option<String> {
    let AdvisoryKey::Pair(first, second) = key else {
        return None;
    };
    let mut bits = (u64::from(first as u32) << 32) | u64::from(second as u32);
    let mut len = ASCII_MAX_LEN;
    while len > 0 && bits & ASCII_MAX as u64 == ASCII_MAX as u64 {
        len -= 1;
        bits >>= ASCII_BITS;
    }
    if bits & 1 != 0 {
        return None;
    }
    bits >>= 1;
    let mut name = vec![0u8; len];
    for at in (0..len).rev() {
        name[at] = (bits & ASCII_MAX as u64) as u8;
        bits >>= ASCII_BITS;
    }
    // A pair that packs a name packs nothing above it.
    (bits == 0).then(|| String::from_utf8(name).expect("7-bit bytes"))
}

#[cfg(test)]
mod tests {
    use crate::backend::postgres::advisory_key::*;

    /// The values DistributedLock's own tests expect (`PostgresAdvisoryLockKeyTest`).
    #[test]
    fn names_map_as_distributed_lock_maps_them() {
        assert_eq!(
            AdvisoryKey::from_name("0000000000000001"),
            AdvisoryKey::Single(1)
        );
        assert_eq!(AdvisoryKey::Single(1).to_string(), "0000000000000001");
        assert_eq!(
            AdvisoryKey::from_name("00000003,ffffffff"),
            AdvisoryKey::Pair(3, -1)
        );
        // A pair that packs no name is written as two groups of 8.
        assert_eq!(AdvisoryKey::Pair(3, -1).to_string(), "00000003,ffffffff");
        let han = "漢".repeat(18);
        assert_eq!(
            AdvisoryKey::from_name(&han),
            AdvisoryKey::Single(-5707277204051710361)
        );
        assert_eq!(
            AdvisoryKey::from_name(&"0".repeat(16)),
            AdvisoryKey::Single(0)
        );
        assert_eq!(
            AdvisoryKey::from_name("00000000,00000000"),
            AdvisoryKey::Pair(0, 0)
        );
        assert_eq!(
            AdvisoryKey::from_name(&"\0".repeat(9)),
            AdvisoryKey::Pair(0, 0)
        );
        assert_ne!(AdvisoryKey::from_name(""), AdvisoryKey::from_name("\0"));
        assert_ne!(AdvisoryKey::from_name("\0"), AdvisoryKey::from_name("a"));
        assert_ne!(AdvisoryKey::Single(0), AdvisoryKey::Pair(0, 0));
        let names = [
            "base38",
            "base37",
            "ASCII",
            "ASCIi",
            "some very long name",
            "same very long name",
        ];
        for a in names {
            for b in names.iter().filter(|b| **b != a) {
                assert_ne!(
                    AdvisoryKey::from_name(a),
                    AdvisoryKey::from_name(b),
                    "{a} {b}"
                );
            }
        }
    }

    /// Every ASCII character repeated 1 to 9 times maps to a pair of its own, written back
    /// as the name itself.
    #[test]
    fn short_ascii_names_round_trip_and_never_collide() {
        let mut seen = std::collections::HashSet::new();
        let empty = AdvisoryKey::from_name("");
        assert!(matches!(empty, AdvisoryKey::Pair(..)));
        assert_eq!(empty.to_string(), "");
        seen.insert(empty);
        for byte in 1u8..128 {
            for len in 1..=9 {
                let name = String::from_utf8(vec![byte; len]).unwrap();
                let key = AdvisoryKey::from_name(&name);
                assert!(matches!(key, AdvisoryKey::Pair(..)), "{name:?}");
                assert_eq!(key.to_string(), name);
                assert_eq!(AdvisoryKey::from_name(&key.to_string()), key);
                assert!(seen.insert(key), "{name:?} collides");
            }
        }
    }

    #[test]
    fn hashed_names_write_back_to_the_same_key() {
        for name in [
            "orders:42:payment",
            "ünïcödé",
            "1234567890",
            "0000000g00000000",
        ] {
            let key = AdvisoryKey::from_name(name);
            assert!(matches!(key, AdvisoryKey::Single(_)), "{name}");
            assert_eq!(AdvisoryKey::from_name(&key.to_string()), key, "{name}");
        }
    }

    #[test]
    fn pg_locks_columns_give_the_key_back() {
        for key in [
            AdvisoryKey::Single(-5707277204051710361),
            AdvisoryKey::Single(1),
            AdvisoryKey::Pair(3, -1),
            AdvisoryKey::from_name("orders"),
        ] {
            let (classid, objid, objsubid) = key.pg_locks_columns();
            assert_eq!(
                AdvisoryKey::from_pg_locks(classid, objid, objsubid),
                Some(key)
            );
        }
    }
}
