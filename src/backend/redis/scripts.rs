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
/// Hand-over: the owner's last hold went straight to the successor.
pub(crate) const HANDED_OVER: i64 = 2;

/// Runs a batch of lock operations in one call (group commit: under load, many requests'
/// operations share one round trip and one script run).
///
/// KEYS, per operation: the lock, and for a release also its channel. ARGV, per operation:
/// lease ms, owner, and what to do: `N` acquire, the owner having `N` holds already; `-N`
/// release, the owner having `N` holds before it; `r` renew; `h` hand-over, followed by a
/// fourth argument, the successor (the lease is the successor's).
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
pub(crate) fn batch(publish: &str) -> String {
    // Written inline (no functions, no `pcall`): closures and protected calls made in every
    // run cost about as much as the Redis calls themselves (callgrind); so do an extra
    // argument per operation and an array reply for a single operation. The first command
    // that reads a lock's hash uses `redis.pcall`, so a key holding other data fails that
    // operation only. The common texts of a release (`-1`, a count of `1`) are compared
    // rather than converted to numbers.
    format!(
        r#"
local n = #ARGV
local single = n == 3 or (n == 4 and ARGV[3] == 'h')
local results = single or {{}}
local k, i, j = 1, 1, 1
local free, defer, deleted = 0, n + 1, nil
if not single then
  local a, d = tonumber(ARGV[1]), tonumber(ARGV[2])
  i = 3
  if a > 1 and redis.call('exists', unpack(KEYS, 1, a)) == 0 then free = a end
  if d > 0 then defer, deleted = d, {{}} end
end
while i <= n do
  local lease, owner, op = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local key = KEYS[k]
  local result
  k = k + 1
  i = i + 3
  if op == '0' then
    if j <= free or redis.call('exists', key) == 0 then
      redis.call('hset', key, owner, '1')
      redis.call('pexpire', key, lease)
      result = {ACQUIRED}
    else
      result = redis.pcall('hexists', key, owner)
      if result == 1 then
        result = {ACQUIRED}
      elseif result == 0 then
        result = redis.call('pttl', key)
        if result < 0 then result = {BUSY_FOREVER} end
      end
    end
  elseif op == 'r' then
    result = redis.pcall('hexists', key, owner)
    if result == 1 then redis.call('pexpire', key, lease) end
  elseif op == 'h' then
    local successor = ARGV[i]
    i = i + 1
    local count = redis.pcall('hget', key, owner)
    if type(count) == 'table' then
      result = count
    elseif not count then
      result = redis.call('hexists', key, successor) == 1 and {HANDED_OVER} or {NOT_HELD}
    elseif count == '1' then
      redis.call('del', key)
      redis.call('hset', key, successor, '1')
      redis.call('pexpire', key, lease)
      result = {HANDED_OVER}
    else
      redis.call('hincrby', key, owner, '-1')
      redis.call('pexpire', key, lease)
      result = 0
    end
  else
    local expected = op == '-1' and -1 or tonumber(op)
    local channel
    if expected < 0 then
      channel = KEYS[k]
      k = k + 1
    end
    local count = redis.pcall('hget', key, owner)
    if type(count) == 'table' then
      result = count
    elseif expected > 0 then
      count = tonumber(count or 0)
      if count == expected then
        redis.call('hincrby', key, owner, '1')
      end
      if count == expected or count == expected + 1 then
        redis.call('pexpire', key, lease)
        result = {ACQUIRED}
      else
        result = {LOST}
      end
    elseif not count then
      result = {NOT_HELD}
    else
      count = count == '1' and 1 or tonumber(count)
      if count == -expected - 1 then
        result = 0
      elseif count > 1 then
        redis.call('hincrby', key, owner, '-1')
        redis.call('pexpire', key, lease)
        result = 0
      else
        if j >= defer then
          deleted[#deleted + 1] = key
        else
          redis.call('del', key)
        end
        result = {UNLOCKED} + redis.call('{publish}', channel, '{UNLOCK_MESSAGE}')
      end
    end
  end
  if type(result) == 'table' then result = tostring(result.err) end
  if single then return result end
  results[j] = result
  j = j + 1
end
if deleted and #deleted > 0 then redis.call('del', unpack(deleted)) end
return results
"#
    )
}

/// Redisson's UNLOCK message: wakes one waiter per process.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// Redisson's READ_UNLOCK message: wakes every waiter (read-write locks).
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";
