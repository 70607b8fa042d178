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
//! release three; and one script runs a whole batch of operations, so that its fixed cost
//! (and a round trip) is shared under load. User input (lock names, owner ids) only ever
//! arrives as `KEYS`/`ARGV`.

/// Codes in a batch's reply (besides a PTTL, 0 and 1).
pub(crate) const ACQUIRED: i64 = -1;
/// Acquire: busy, and the holder's lock has no expiry.
pub(crate) const BUSY_FOREVER: i64 = -2;
/// Acquire: a reentry found that the owner no longer holds the lock.
pub(crate) const LOST: i64 = -3;
/// Release: the owner does not hold the lock.
pub(crate) const NOT_HELD: i64 = -1;

/// Runs a batch of lock operations in one call (group commit: under load, many requests'
/// operations share one round trip and one script run).
///
/// KEYS, per operation: the lock, and for a release also its channel. ARGV, per operation:
/// kind (`a` acquire, `r` release, `n` renew), lease ms, owner, expected count (an
/// acquisition: the holds the owner has already; a release: the holds before it).
///
/// Returns one value per operation:
/// - acquire: [`ACQUIRED`], the holder's PTTL when busy, [`BUSY_FOREVER`], or [`LOST`];
/// - release: [`NOT_HELD`], 0 when a reentrant hold remains, 1 when the lock was deleted
///   and Redisson's UNLOCK message (`0`) published with `publish` (PUBLISH or SPUBLISH);
/// - renew: 1 when renewed, 0 when the owner no longer holds the lock;
/// - or an error message (a string) when Redis rejected that operation (the key holds
///   other data); the other operations of the batch are not affected.
pub(crate) fn batch(publish: &str) -> String {
    format!(
        r#"
local function acquire(key, lease, owner, expected)
  if expected == '0' then
    if redis.call('exists', key) == 0 then
      redis.call('hset', key, owner, '1')
      redis.call('pexpire', key, lease)
      return {ACQUIRED}
    end
    if redis.call('hexists', key, owner) == 1 then return {ACQUIRED} end
    local pttl = redis.call('pttl', key)
    if pttl < 0 then return {BUSY_FOREVER} end
    return pttl
  end
  expected = tonumber(expected)
  local count = tonumber(redis.call('hget', key, owner) or 0)
  if count == expected then
    redis.call('hincrby', key, owner, '1')
  elseif count ~= expected + 1 then
    return {LOST}
  end
  redis.call('pexpire', key, lease)
  return {ACQUIRED}
end
local function release(key, channel, lease, owner, expected)
  local count = redis.call('hget', key, owner)
  if not count then return {NOT_HELD} end
  count = tonumber(count)
  if count == tonumber(expected) - 1 then return 0 end
  if count > 1 then
    redis.call('hincrby', key, owner, '-1')
    redis.call('pexpire', key, lease)
    return 0
  end
  redis.call('del', key)
  redis.call('{publish}', channel, '{UNLOCK_MESSAGE}')
  return 1
end
local function renew(key, lease, owner)
  if redis.call('hexists', key, owner) == 1 then
    redis.call('pexpire', key, lease)
    return 1
  end
  return 0
end
local results = {{}}
local k = 1
for i = 1, #ARGV, 4 do
  local kind, lease, owner, expected = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local ok, result
  if kind == 'a' then
    ok, result = pcall(acquire, KEYS[k], lease, owner, expected)
    k = k + 1
  elseif kind == 'r' then
    ok, result = pcall(release, KEYS[k], KEYS[k + 1], lease, owner, expected)
    k = k + 2
  else
    ok, result = pcall(renew, KEYS[k], lease, owner)
    k = k + 1
  end
  if not ok then
    if type(result) == 'table' then result = result.err end
    result = tostring(result)
  end
  results[#results + 1] = result
end
return results
"#
    )
}

/// Redisson's UNLOCK message: wakes one waiter per process.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// Redisson's READ_UNLOCK message: wakes every waiter (read-write locks).
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";
