//! The Lua scripts of Redisson's `RLock`, made safe to re-send.
//!
//! Data layout, return values, channel and message are Redisson's, so that both exclude
//! each other. Two additions keep a command that fred re-sends after a reconnect from
//! taking effect twice:
//! - acquire carries the count the owner expects to have (`ARGV[3]`); a re-sent
//!   acquisition that already counted finds `expected + 1` and does not count again;
//! - release writes Redisson's unlock latch (`KEYS[3]`) and a re-sent release returns the
//!   latched result.
//!
//! User input (lock names, owner ids) only ever arrives as `KEYS`/`ARGV`.

/// KEYS[1] lock; ARGV[1] lease ms, ARGV[2] owner, ARGV[3] holds the owner has already.
/// Returns nil when acquired, the holder's PTTL when busy, -3 when a reentrant
/// acquisition (ARGV[3] > 0) finds the owner no longer holds the lock.
pub(crate) const ACQUIRE: &str = r#"
local expected = tonumber(ARGV[3])
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or 0)
if count == 0 then
  if redis.call('exists', KEYS[1]) == 1 then
    if expected > 0 then return -3 end
    return redis.call('pttl', KEYS[1])
  end
  if expected > 0 then return -3 end
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
elseif count == expected then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
elseif count ~= expected + 1 then
  return -3
end
redis.call('pexpire', KEYS[1], ARGV[1])
return nil
"#;

/// KEYS[1] lock, KEYS[2] channel, KEYS[3] unlock latch; ARGV[1] unlock message, ARGV[2]
/// lease ms, ARGV[3] owner, ARGV[4] publish command, ARGV[5] latch ttl ms.
/// Returns nil when the owner does not hold the lock, 0 when a reentrant hold remains,
/// 1 when the lock was deleted and the unlock message published.
pub(crate) const RELEASE: &str = r#"
local latched = redis.call('get', KEYS[3])
if latched then return tonumber(latched) end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], 0, 'px', ARGV[5])
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1
"#;

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
