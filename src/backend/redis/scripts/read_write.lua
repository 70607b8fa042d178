-- One operation on a read-write lock, in Redisson's RReadWriteLock layout:
-- a hash at KEYS[1] with field `mode` ('read' | 'write'), one field per reader (its owner id)
-- and one for the writer (`<owner>:write`), each counting holds; one string key per read
-- hold, `<KEYS[4]>:<owner>:rwlock_timeout:<n>`, whose PEXPIRE is that hold's lease; the
-- hash's PEXPIRE is the longest of them (or the writer's lease).
--
-- KEYS: [1] the lock, [2] its channel, [3] this owner's read-hold prefix
-- (`<KEYS[4]>:<owner>:rwlock_timeout`), [4] the key prefix (`{name}`, or the name when it
-- contains `{`).
-- ARGV: [1] the operation (ra, wa: acquire read, write; rr, wr: release; rn, wn: renew),
-- [2] lease ms, [3] owner id, [4] the owner's holds of that kind before this operation.
--
-- Like the plain lock's script, every operation applies at most once: a re-sent one finds
-- the count it would have left and reports the same outcome without counting again.
-- Replies: acquire ACQUIRED, LOST, or the holder's PTTL (BUSY_FOREVER without expiry);
-- release NOT_HELD, 0 (this owner still holds), UNLOCKED plus the subscribers its message
-- reached (this owner's last hold of the kind ended and a message was published), or
-- SHARED (this owner's last read hold ended while others still hold: nothing published);
-- renew 1 or 0.
local ACQUIRED, BUSY_FOREVER, LOST = -1, -2, -3
local NOT_HELD, UNLOCKED, SHARED = -1, 1, -4
local READ_RELEASED, WRITE_RELEASED = '0', '1'
local PUBLISH = 'publish'

local name, channel, holds, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, lease, owner, expected = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local writer = owner .. ':write'
local mode = redis.call('hget', name, 'mode')

local function busy()
  local pttl = redis.call('pttl', name)
  if pttl == -1 then return BUSY_FOREVER end
  return pttl
end

local function extend(ms)
  redis.call('pexpire', name, math.max(redis.call('pttl', name), ms))
end

-- The longest lease left among all read holds (-3: none alive).
local function longest_read()
  local longest = -3
  local fields = redis.call('hgetall', name)
  for i = 1, #fields, 2 do
    local count = tonumber(fields[i + 1])
    if fields[i] ~= 'mode' and count then
      for n = count, 1, -1 do
        longest = math.max(longest, redis.call('pttl', prefix .. ':' .. fields[i] .. ':rwlock_timeout:' .. n))
      end
    end
  end
  return longest
end

-- Whether this owner's `count` read holds are alive (their timeout keys have not expired:
-- a reader that stopped renewing loses its holds, though its field stays in the hash).
local function reads_alive(count)
  return count > 0 and redis.call('exists', holds .. ':' .. count) == 1
end

if op == 'ra' or op == 'wa' then
  local field = op == 'ra' and owner or writer
  local count = tonumber(redis.call('hget', name, field) or '0')
  if count == expected + 1 then return ACQUIRED end
  if expected > 0 and (count ~= expected or (op == 'ra' and not reads_alive(count))) then
    return LOST
  end
  if mode == false then
    -- A hash without `mode` is another kind's lock (Redisson's RLock): busy.
    if redis.call('exists', name) == 1 then return busy() end
    redis.call('hset', name, 'mode', op == 'ra' and 'read' or 'write', field, 1)
    if op == 'ra' then redis.call('set', holds .. ':1', 1, 'px', lease) end
    redis.call('pexpire', name, lease)
    return ACQUIRED
  end
  if op == 'ra' and (mode == 'read' or redis.call('hexists', name, writer) == 1) then
    -- Readers share; the writer may also read (a downgrade).
    local n = redis.call('hincrby', name, field, 1)
    redis.call('set', holds .. ':' .. n, 1, 'px', lease)
    extend(lease)
    return ACQUIRED
  end
  if op == 'wa' and mode == 'write' and count > 0 then
    redis.call('hincrby', name, field, 1)
    extend(lease)
    return ACQUIRED
  end
  return busy()
end

if op == 'rr' then
  local count = tonumber(redis.call('hget', name, owner))
  if count and count + 1 == expected then return 0 end
  if count ~= expected then return NOT_HELD end
  if not reads_alive(count) then
    -- Its holds expired: not held. Forget them, and the lock if nobody else holds it.
    redis.call('hdel', name, owner)
    if redis.call('hlen', name) == 1 or (mode == 'read' and longest_read() <= 0) then
      redis.call('del', name)
      redis.call(PUBLISH, channel, READ_RELEASED)
    end
    return NOT_HELD
  end
  count = count - 1
  if count == 0 then redis.call('hdel', name, owner) else redis.call('hset', name, owner, count) end
  redis.call('del', holds .. ':' .. (count + 1))
  local left = SHARED
  if count > 0 then left = 0 end
  if redis.call('hlen', name) > 1 then
    -- The writer (who also read) keeps its own lease.
    if mode == 'write' then return left end
    local longest = longest_read()
    if longest > 0 then
      redis.call('pexpire', name, longest)
      return left
    end
  end
  -- Nobody holds it any more (readers that crashed had their holds expire).
  redis.call('del', name)
  return UNLOCKED + redis.call(PUBLISH, channel, READ_RELEASED)
end

if op == 'wr' then
  if mode ~= 'write' then return NOT_HELD end
  local count = tonumber(redis.call('hget', name, writer))
  if count and count + 1 == expected then return 0 end
  if count ~= expected then return NOT_HELD end
  if count > 1 then
    redis.call('hincrby', name, writer, -1)
    redis.call('pexpire', name, lease)
    return 0
  end
  redis.call('hdel', name, writer)
  if redis.call('hlen', name) == 1 then
    redis.call('del', name)
    return UNLOCKED + redis.call(PUBLISH, channel, WRITE_RELEASED)
  end
  -- The writer still reads (it downgraded): readers of every process may share it now.
  redis.call('hset', name, 'mode', 'read')
  return UNLOCKED + redis.call(PUBLISH, channel, WRITE_RELEASED)
end

if op == 'rn' then
  local count = tonumber(redis.call('hget', name, owner))
  if not count or not reads_alive(count) then return 0 end
  for n = count, 1, -1 do redis.call('pexpire', holds .. ':' .. n, lease) end
  extend(lease)
  return 1
end

if op == 'wn' then
  if redis.call('hexists', name, writer) == 0 then return 0 end
  extend(lease)
  return 1
end

return redis.error_reply('unknown read-write lock operation')
