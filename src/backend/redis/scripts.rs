//! The Lua scripts of Redisson's `RLock`, made safe to re-send.
//!
//! Data layout, return values, channel and message are Redisson's, so that both exclude
//! each other. fred re-sends a command that was in flight when a connection dropped, so
//! every script carries the count the owner expects to find and applies at most once:
//! - acquire carries the holds the owner already has (`ARGV[3]`); a re-sent acquisition
//!   that already counted finds `expected + 1` and does not count again;
//! - release carries the holds before it; a re-sent release that already counted finds
//!   `expected - 1` and does not count again. A re-sent *last* release finds the lock gone
//!   and reports it not held (the lock state is right; only that report is ambiguous).
//!   Redisson writes an unlock latch key per release instead, which doubles the cost of a
//!   release in Redis (a key created and expired per release).
//!
//! Each `redis.call` costs Redis a few thousand instructions (measured with callgrind), so
//! the common paths make as few as they can: acquiring a free lock makes three, the last
//! release three, a hand-over (the last release and the next holder's acquisition in one)
//! four; and one script runs a whole batch of operations, so that its fixed cost
//! (and a round trip) is shared under load. In a batch, the first acquisitions of keys
//! that no other operation of the batch touches share one multi-key `EXISTS`, and such
//! keys' last releases one multi-key `DEL` (see `layout`): four Redis calls per lock
//! instead of six (and two per batch) when the keys are distinct, 11 % fewer Redis
//! instructions per HTTP request in S4b (callgrind). User input (lock names, owner ids)
//! only ever arrives as `KEYS`/`ARGV`.

/// Codes in a batch's reply (besides a PTTL, 0 and 1).
pub(crate) const ACQUIRED: i64 = -1;
/// Acquire: busy, and the holder's lock has no expiry.
pub(crate) const BUSY_FOREVER: i64 = -2;
/// Acquire: a reentry found that the owner no longer holds the lock.
pub(crate) const LOST: i64 = -3;
/// Release: the owner does not hold the lock.
pub(crate) const NOT_HELD: i64 = -1;
/// Release: the lock was deleted and the unlock message published; the reply is this plus
/// the number of subscribers the message reached.
pub(crate) const UNLOCKED: i64 = 1;
/// Read-write release: the owner's last read hold ended while others still hold the lock;
/// nothing was published.
pub(crate) const SHARED: i64 = -4;
/// Hand-over: the owner's last hold went straight to the successor.
pub(crate) const HANDED_OVER: i64 = 2;
/// Acquisition unless recorded: the lock has a record (it follows in the reply).
pub(crate) const RECORDED: i64 = -5;

/// The batch script (`scripts/batch.lua`), with PUBLISH or, for sharded pub/sub, SPUBLISH:
/// a batch of lock operations in one call (group commit: under load, many requests'
/// operations share one round trip and one script run).
///
/// Written inline (no functions, no `pcall`): closures and protected calls made in every
/// run cost about as much as the Redis calls themselves (callgrind); so do an extra
/// argument per operation and an array reply for a single operation. The first command
/// that reads a lock's hash uses `redis.pcall`, so a key holding other data fails that
/// operation only. The common texts of a release (`-1`, a count of `1`) are compared
/// rather than converted to numbers.
///
/// KEYS, per operation: the lock, and for a release also its channel. ARGV, per operation:
/// lease ms, owner, and what to do: `N` acquire, the owner having `N` holds already; `-N`
/// release, the owner having `N` holds before it; `aN` the owner's last release, which
/// announces that it ends a run of `N` holds of this process (it publishes `-N` on the
/// channel just before Redisson's UNLOCK `0`; Redisson ignores other messages); `r` renew;
/// `h` hand-over, followed by a fourth argument, the successor (the lease is the
/// successor's).
///
/// A call of more than one operation starts with two more arguments, which let the
/// operations on keys that no other operation of the call touches share Redis calls
/// (each `redis.call` costs Redis a few thousand instructions, several times what the
/// command itself does): `A`, the number of leading operations that are first
/// acquisitions (`0`) of such keys, for which one multi-key `EXISTS` stands in for one
/// each when none of the keys exists; and `D`, the position of the first of the trailing
/// operations that are last releases (`-1`) of such keys (0: none), whose `DEL`s are
/// made together by one multi-key `DEL` at the end. Operations on different keys commute,
/// so the caller may move them to the front or the back; Redis runs the script as one
/// step, so nobody sees the order inside it (a message published before its key's
/// deferred `DEL` is delivered after the script).
///
/// Returns one value per operation (a bare value for a single operation, else an array):
/// - acquire: [`ACQUIRED`], the holder's PTTL when busy, [`BUSY_FOREVER`], or [`LOST`];
/// - release: [`NOT_HELD`], 0 when a reentrant hold remains, [`UNLOCKED`] plus the number
///   of subscribers reached when the lock was deleted and Redisson's UNLOCK message (`0`)
///   published with `publish` (PUBLISH or SPUBLISH);
/// - hand-over (the owner's last hold): [`HANDED_OVER`] when the lock now belongs to the
///   successor with one hold and the successor's lease, in the same step (the lock is
///   never free, so nobody else can take it and nothing is published: to every other
///   client, Redisson's included, the lock simply stays held); [`NOT_HELD`]; or 0 when
///   the owner turned out to have more than one hold (one was dropped, as by a release).
///   A re-sent hand-over that already took effect finds the successor holding the lock
///   and reports [`HANDED_OVER`] again;
/// - renew: 1 when renewed, 0 when the owner no longer holds the lock;
/// - or an error message (a string) when Redis rejected that operation (the key holds
///   other data); the other operations of the batch are not affected.
pub(crate) fn batch(sharded: bool) -> String {
    publishing(include_str!("scripts/batch.lua"), sharded)
}

/// The read-write lock's script (`scripts/read_write.lua`), with PUBLISH or SPUBLISH: one
/// operation per call, in Redisson's `RReadWriteLock` layout. Its reply codes are the batch
/// script's (a release's `UNLOCKED` plus the subscribers reached when the lock was deleted).
/// A read release that deletes the lock publishes `0`, a write release `1` (Redisson's
/// READ_UNLOCK, which wakes every waiter: readers share).
pub(crate) fn read_write(sharded: bool) -> String {
    publishing(include_str!("scripts/read_write.lua"), sharded)
}

/// The fair lock's script (`scripts/fair.lua`), with PUBLISH or SPUBLISH: one operation per
/// call, in Redisson's `RFairLock` layout. A release publishes Redisson's UNLOCK message
/// (`0`) to the queue head's own channel only.
pub(crate) fn fair(sharded: bool) -> String {
    publishing(include_str!("scripts/fair.lua"), sharded)
}

/// The fenced lock's acquisition (`scripts/fenced.lua`): the plain lock's, plus Redisson's
/// `RFencedLock` token counter INCRed in the same step. It publishes nothing.
pub(crate) fn fenced() -> String {
    include_str!("scripts/fenced.lua").to_owned()
}

/// A plain lock with a record (`scripts/record.lua`), with PUBLISH or SPUBLISH: an
/// acquisition unless the lock has a record ([`RECORDED`] and the record when it has), and
/// a last release that stores one and publishes Redisson's UNLOCK message (`0`).
pub(crate) fn record(sharded: bool) -> String {
    publishing(include_str!("scripts/record.lua"), sharded)
}

/// `lua` with SPUBLISH in place of PUBLISH for sharded pub/sub.
fn publishing(lua: &str, sharded: bool) -> String {
    if sharded {
        lua.replacen(PUBLISH_LINE, SHARDED_PUBLISH_LINE, 1)
    } else {
        lua.to_owned()
    }
}

/// The line of the scripts that names the publish command, and its sharded form.
const PUBLISH_LINE: &str = "local PUBLISH = 'publish'";
const SHARDED_PUBLISH_LINE: &str = "local PUBLISH = 'spublish'";

/// Redisson's UNLOCK message: wakes one waiter per process.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// Redisson's READ_UNLOCK message: wakes every waiter (read-write locks).
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";

#[cfg(test)]
mod tests {
    use super::*;

    /// The value the script's `local NAME, … = value, …` lines give `name`.
    fn lua_constant(lua: &str, name: &str) -> String {
        for line in lua.lines() {
            let Some(rest) = line.strip_prefix("local ") else {
                continue;
            };
            let Some((names, values)) = rest.split_once(" = ") else {
                continue;
            };
            let names: Vec<&str> = names.split(", ").collect();
            let values: Vec<&str> = values.split(", ").collect();
            if let Some(at) = names.iter().position(|n| *n == name) {
                return values[at].trim_matches('\'').to_owned();
            }
        }
        panic!("the script does not define {name}");
    }

    #[test]
    fn the_scripts_reply_codes_and_messages_are_the_rust_constants() {
        let shared = [
            ("ACQUIRED", ACQUIRED),
            ("BUSY_FOREVER", BUSY_FOREVER),
            ("LOST", LOST),
            ("NOT_HELD", NOT_HELD),
            ("UNLOCKED", UNLOCKED),
        ];
        let batch_only = [("HANDED_OVER", HANDED_OVER)];
        for (lua, only) in [
            (batch(false), &batch_only[..]),
            (read_write(false), &[][..]),
            (fair(false), &[][..]),
        ] {
            for (name, value) in shared.iter().chain(only) {
                assert_eq!(lua_constant(&lua, name), value.to_string(), "{name}");
            }
            assert_eq!(lua_constant(&lua, "PUBLISH"), "publish");
        }
        assert_eq!(
            lua_constant(&batch(false), "UNLOCK_MESSAGE"),
            UNLOCK_MESSAGE
        );
        let lua = read_write(false);
        assert_eq!(lua_constant(&lua, "READ_RELEASED"), UNLOCK_MESSAGE);
        assert_eq!(lua_constant(&lua, "WRITE_RELEASED"), READ_UNLOCK_MESSAGE);
        assert_eq!(lua_constant(&batch(true), "PUBLISH"), "spublish");
        assert_eq!(lua_constant(&read_write(true), "PUBLISH"), "spublish");
        assert_eq!(lua_constant(&fair(true), "PUBLISH"), "spublish");
        assert_eq!(lua_constant(&fair(false), "UNLOCK_MESSAGE"), UNLOCK_MESSAGE);
        let fenced = fenced();
        for (name, value) in &shared[..3] {
            assert_eq!(lua_constant(&fenced, name), value.to_string(), "{name}");
        }
        let record = record(false);
        for (name, value) in [
            ("ACQUIRED", ACQUIRED),
            ("BUSY_FOREVER", BUSY_FOREVER),
            ("RECORDED", RECORDED),
            ("NOT_HELD", NOT_HELD),
            ("UNLOCKED", UNLOCKED),
            ("UNLOCK_MESSAGE", UNLOCK_MESSAGE.parse().unwrap()),
        ] {
            assert_eq!(lua_constant(&record, name), value.to_string(), "{name}");
        }
        assert_eq!(lua_constant(&super::record(true), "PUBLISH"), "spublish");
    }
}
