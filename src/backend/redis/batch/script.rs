//! The batch script's text (`batch.lua`): what it takes and what it answers.

#[cfg(doc)]
use crate::backend::redis::scripts::{
    ACQUIRED, BUSY_FOREVER, HANDED_OVER, LOST, NOT_HELD, UNLOCKED,
};

/// The batch script (`batch.lua`), with PUBLISH or, for sharded pub/sub, SPUBLISH:
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
/// successor's); `c` claim and `s` store, locks with a record, whose keys and further
/// arguments [`OpKind::Claim`](super::OpKind::Claim) and
/// [`OpKind::Store`](super::OpKind::Store) describe.
///
/// A call of more than one operation starts with three more arguments, which let the
/// operations on keys that no other operation of the call touches share Redis calls
/// (each `redis.call` costs Redis a few thousand instructions, several times what the
/// command itself does): `A`, the number of leading operations that are first
/// acquisitions (`0`) of such keys, for which one multi-key `EXISTS` stands in for one
/// each when none of the keys exists; `C`, the number of claims (`c`) of such keys right
/// after them, for which one multi-key `EXISTS` over their locks and records stands in
/// for a look each when none exists; and `D`, the position of the first of the trailing
/// operations that are last releases (`-1`, or a store `s`) of such keys (0: none), whose `DEL`s are
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
/// - claim: as an acquisition, or `{RECORDED, record}`, or `HELD_FOR_OTHER_WORK`;
/// - store: as a release, or `RECORD_WANTED` when its record was withheld and someone
///   waits for it or the lock is gone (sent again with the record, it answers as a release);
/// - or an error message (a string) when Redis rejected that operation (the key holds
///   other data); the other operations of the batch are not affected.
pub(in crate::backend) fn script(sharded: bool) -> String {
    crate::backend::redis::scripts::publishing(include_str!("batch.lua"), sharded)
}
