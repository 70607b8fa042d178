-- tower-lock's fenced lock acquisition: Redisson's `RFencedLock` (an `RLock` hash plus the
-- counter `redisson_lock_token:{name}`, INCRed by every acquisition, reentry included).
-- Release and renewal are the plain lock's (`batch.lua`). User input only as KEYS/ARGV.
--
-- KEYS: the lock, its token counter. ARGV: lease ms, owner, the holds the owner already
-- has (`expected`). Applied at most once: a re-sent acquisition that already counted
-- finds `expected + 1` and answers the counter as it is, without counting again (only
-- this owner, which holds the lock, can have moved it since).
--
-- Replies: {ACQUIRED, token}; {pttl} or {BUSY_FOREVER} when another owner holds it;
-- {LOST} when a reentry finds the owner no longer holds it; an error string when the
-- key holds other data.
-- Reply codes, checked against scripts.rs by a test:
local ACQUIRED, BUSY_FOREVER, LOST = -1, -2, -3
local key, tokens = KEYS[1], KEYS[2]
local lease, owner, expected = ARGV[1], ARGV[2], tonumber(ARGV[3])
-- The next token, counted before the lock is written: a counter holding something else
-- fails the script (INCR) or is refused here, and nothing is taken either way.
local function next_token()
  local token = redis.call('incr', tokens)
  if token < 1 then
    return nil, 'the token counter ' .. tokens .. ' holds ' .. token
  end
  return token
end
if expected == 0 and redis.call('exists', key) == 0 then
  local token, err = next_token()
  if not token then return err end
  redis.call('hset', key, owner, '1')
  redis.call('pexpire', key, lease)
  return {ACQUIRED, token}
end
local count = redis.pcall('hget', key, owner)
if type(count) == 'table' then return tostring(count.err) end
count = tonumber(count or 0)
if expected > 0 then
  if count == expected then
    local token, err = next_token()
    if not token then return err end
    redis.call('hincrby', key, owner, 1)
    redis.call('pexpire', key, lease)
    return {ACQUIRED, token}
  end
  if count ~= expected + 1 then return {LOST} end
end
if count > 0 then
  -- Re-sent after it counted (or a first acquisition of an owner that holds it already).
  redis.call('pexpire', key, lease)
  return {ACQUIRED, tonumber(redis.call('get', tokens) or 0)}
end
local pttl = redis.call('pttl', key)
if pttl < 0 then return {BUSY_FOREVER} end
return {pttl}
