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
/// Read acquisition: a new reader held back by waiting writers (how long their marks last
/// follows in the reply).
pub(crate) const HELD_BACK: i64 = -6;
/// Acquisition unless recorded, for named work: the lock is held for other work.
pub(crate) const HELD_FOR_OTHER_WORK: i64 = -7;
/// A store that withheld its record (stored only if awaited, and large): someone waits for
/// it, so the lock is kept and the store is to be sent again with the record.
pub(crate) const RECORD_WANTED: i64 = -8;

/// `lua` with SPUBLISH in place of PUBLISH for sharded pub/sub.
pub(in crate::backend) fn publishing(lua: &str, sharded: bool) -> String {
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
