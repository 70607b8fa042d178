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
//! release three. User input (lock names, owner ids) only ever arrives as `KEYS`/`ARGV`.

/// KEYS[1] lock; ARGV[1] lease ms, ARGV[2] owner, ARGV[3] holds the owner has already.
/// Returns nil when acquired, the holder's PTTL when busy, -3 when a reentrant
/// acquisition (ARGV[3] > 0) finds the owner no longer holds the lock.
pub(crate) const ACQUIRE: &str = r#"
if ARGV[3] == '0' then
  if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hset', KEYS[1], ARGV[2], '1')
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
  end
  if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then return nil end
  return redis.call('pttl', KEYS[1])
end
local expected = tonumber(ARGV[3])
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if count == expected then
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
elseif count ~= expected + 1 then
  return -3
end
redis.call('pexpire', KEYS[1], ARGV[1])
return nil
"#;

/// KEYS[1] lock, KEYS[2] channel; ARGV[1] lease ms, ARGV[2] owner, ARGV[3] holds the
/// owner has before this release. Returns nil when the owner does not hold the lock, 0
/// when a reentrant hold remains, 1 when the lock was deleted and the unlock message
/// (Redisson's UNLOCK, `0`) published with `publish` (PUBLISH or SPUBLISH).
pub(crate) fn release(publish: &str) -> String {
    format!(
        r#"
local count = redis.call('hget', KEYS[1], ARGV[2])
if not count then return nil end
count = tonumber(count)
if count == tonumber(ARGV[3]) - 1 then return 0 end
if count > 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], '-1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
redis.call('{publish}', KEYS[2], '{UNLOCK_MESSAGE}')
return 1
"#
    )
}

/// KEYS[1] lock; ARGV[1] lease ms, ARGV[2] owner. Returns 1 when renewed, 0 when the
/// owner no longer holds the lock.
pub(crate) const RENEW: &str = r#"
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0
"#;

/// Redisson's UNLOCK message: wakes one waiter per process.
pub(crate) const UNLOCK_MESSAGE: &str = "0";
/// Redisson's READ_UNLOCK message: wakes every waiter (read-write locks).
pub(crate) const READ_UNLOCK_MESSAGE: &str = "1";
