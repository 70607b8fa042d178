-- tower-lock's semaphore: Redisson's `RPermitExpirableSemaphore` layout, with deadlines
-- from the Redis server's clock, renewals, and acquisitions applied at most once.
-- User input only as KEYS/ARGV.
--
-- KEYS: the count key (the name: permits available, a signed decimal), the permits'
-- deadlines (`{name}:timeout`: a sorted set of 16-byte permit ids scored by the epoch
-- millisecond their lease ends), the channel (`redisson_sc:{name}`).
-- ARGV[1]: the operation; the rest as each operation says.
--
-- Permits whose deadline passed are returned to the count (at most RECLAIM_MAX per call)
-- by acquisitions that find too few available, and the new count is published, as
-- Redisson's scripts do; a release publishes the new count too. Java waiters wake as many
-- waiters as the count says.
-- Reply codes, checked against scripts.rs by a test:
local ACQUIRED, BUSY_FOREVER, LOST = -1, -2, -3
local NOT_HELD, UNLOCKED, HANDED_OVER = -1, 1, 2
local PUBLISH = 'publish'
-- Redisson's "no lease" score.
local NO_LEASE = '922337203685477'
local RECLAIM_MAX = 100
local count_key, deadlines, channel = KEYS[1], KEYS[2], KEYS[3]
local op = ARGV[1]
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

local function publish(value)
  if value > 0 then
    return redis.call(PUBLISH, channel, value)
  end
  return 0
end

-- The permits available; a name used for the first time gets `limit` (less the permits
-- already held, if its count key was deleted behind them).
local function available(limit)
  local value = redis.call('get', count_key)
  if value == false then
    value = limit - redis.call('zcard', deadlines)
    redis.call('set', count_key, value)
  end
  local count = tonumber(value)
  if count == nil then
    error(redis.error_reply('WRONGTYPE the count key holds no number'))
  end
  return count
end

-- Returns permits whose lease ended to the count.
local function reclaim(value)
  local expired = redis.call('zrangebyscore', deadlines, 0, now, 'limit', 0, RECLAIM_MAX)
  if #expired == 0 then return value end
  redis.call('zrem', deadlines, unpack(expired))
  value = redis.call('incrby', count_key, #expired)
  publish(value)
  return value
end

-- How many of the ids ARGV[from..to] are held with a live lease.
local function live(from, to)
  local held = 0
  for i = from, to do
    local score = redis.call('zscore', deadlines, ARGV[i])
    if score and tonumber(score) > now then held = held + 1 end
  end
  return held
end

local function set_deadlines(from, to, deadline)
  for i = from, to do
    redis.call('zadd', deadlines, 'XX', deadline, ARGV[i])
  end
end

if op == 'a' then
  -- Acquire. ARGV: limit, lease ms, holds the owner already has, n, then the n ids.
  local limit, lease, expected, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  local deadline = string.format('%.0f', now + lease)
  local last = 5 + n
  if expected > 0 then
    -- A reentry: the permits must still be held.
    if live(6, last) < n then return LOST end
    set_deadlines(6, last, deadline)
    return ACQUIRED
  end
  local value = available(limit)
  -- Expired permits are reclaimed when they are needed (a waiter that found the
  -- semaphore full retries when the earliest lease ends, and reclaims it then).
  if value < n then value = reclaim(value) end
  if value >= n then
    -- Only ids not there yet are counted: those of a re-sent acquisition that took effect
    -- are ours already (Redisson #6517 lost permits by counting them again).
    local pairs = {}
    for i = 6, last do
      pairs[#pairs + 1] = deadline
      pairs[#pairs + 1] = ARGV[i]
    end
    local added = redis.call('zadd', deadlines, 'NX', unpack(pairs))
    if added > 0 then redis.call('decrby', count_key, added) end
    if added < n then set_deadlines(6, last, deadline) end
    return ACQUIRED
  end
  if live(6, last) == n then
    -- Re-sent after it took effect, and the permits it took fill the semaphore.
    set_deadlines(6, last, deadline)
    return ACQUIRED
  end
  local first = redis.call('zrange', deadlines, 0, 0, 'WITHSCORES')
  if first[1] == nil or first[2] == NO_LEASE then return BUSY_FOREVER end
  return math.max(tonumber(first[2]) - now, 0)
elseif op == 'r' then
  -- Release. ARGV: lease ms, holds before this release, n, then the n ids.
  local lease, expected, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local last = 4 + n
  if expected > 1 then
    -- A reentrant hold remains.
    if live(5, last) < n then return NOT_HELD end
    set_deadlines(5, last, string.format('%.0f', now + lease))
    return 0
  end
  local held = live(5, last)
  local removed = 0
  for i = 5, last do removed = removed + redis.call('zrem', deadlines, ARGV[i]) end
  if removed == 0 then return NOT_HELD end
  -- Permits that ran out but were not reclaimed yet go back too (Redisson's rule).
  local reached = publish(redis.call('incrby', count_key, removed))
  if held < n then return NOT_HELD end
  return UNLOCKED + reached
elseif op == 'h' then
  -- Hand-over: the releaser's permits go straight to a waiter of the same process (as
  -- many, with the waiter's lease); the count does not change and nothing is published.
  -- ARGV: the successor's lease ms, n, the releaser's n ids, then the successor's n ids.
  -- While more permits are held than the limit allows (it was lowered), nothing is handed
  -- over: the permits are released, and the reply is a release's, {UNLOCKED, reached}.
  local lease, n = tonumber(ARGV[2]), tonumber(ARGV[3])
  local ours, theirs = 3 + n, 3 + 2 * n
  local over = (tonumber(redis.call('get', count_key)) or -1) < 0
  if over and live(4, ours) == n then
    for i = 4, ours do redis.call('zrem', deadlines, ARGV[i]) end
    return {UNLOCKED, publish(redis.call('incrby', count_key, n))}
  end
  if live(4, ours) < n then
    -- Re-sent after it took effect: the successor holds them.
    if live(ours + 1, theirs) == n then return HANDED_OVER end
    -- Not ours any more: what is left goes back, as a release would.
    local removed = 0
    for i = 4, ours do removed = removed + redis.call('zrem', deadlines, ARGV[i]) end
    if removed > 0 then publish(redis.call('incrby', count_key, removed)) end
    return NOT_HELD
  end
  for i = 4, ours do redis.call('zrem', deadlines, ARGV[i]) end
  local deadline = string.format('%.0f', now + lease)
  for i = ours + 1, theirs do redis.call('zadd', deadlines, deadline, ARGV[i]) end
  return HANDED_OVER
elseif op == 'n' then
  -- Renew. ARGV: lease ms, n, then the n ids. A permit whose lease ended is never
  -- revived (another holder may have been counted in its place).
  local lease, n = tonumber(ARGV[2]), tonumber(ARGV[3])
  if live(4, 3 + n) < n then return 0 end
  set_deadlines(4, 3 + n, string.format('%.0f', now + lease))
  return 1
elseif op == 's' then
  -- Set the limit (the total of available and held permits). ARGV: limit.
  local limit = tonumber(ARGV[2])
  local value = redis.call('get', count_key)
  if value == false then
    publish(available(limit))
    return 1
  end
  local total = tonumber(value) + redis.call('zcard', deadlines)
  if total ~= limit then
    value = redis.call('incrby', count_key, limit - total)
    if limit > total then publish(value) end
  end
  return 1
elseif op == 'u' then
  -- Usage, read only: {limit, permits held with a live lease}; limit -1: never set.
  local value = redis.call('get', count_key)
  local live_permits = redis.call('zcount', deadlines, '(' .. now, '+inf')
  if value == false then return {-1, live_permits} end
  return {tonumber(value) + redis.call('zcard', deadlines), live_permits}
end
return redis.error_reply('unknown semaphore operation')
