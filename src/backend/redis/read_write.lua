-- One operation on a read-write lock, in Redisson's RReadWriteLock layout:
-- a hash at KEYS[1] with field `mode` ('read' | 'write'), one field per reader (its owner id)
-- and one for the writer (`<owner>:write`), each counting holds; one string key per read
-- hold, `<KEYS[4]>:<owner>:rwlock_timeout:<n>`, whose PEXPIRE is that hold's lease; the
-- hash's PEXPIRE is the longest of them (or the writer's lease).
--
-- KEYS: [1] the lock, [2] its channel, [3] this owner's read-hold prefix
-- (`<KEYS[4]>:<owner>:rwlock_timeout`), [4] the key prefix (`{name}`, or the name when it
-- contains `{`), [5] the waiting writers (`<KEYS[4]>:tower_lock:waiting_writers`).
-- ARGV: [1] the operation (ra, wa: acquire read, write; rr, wr: release; rn, wn: renew;
-- wl: a waiting writer stops waiting), [2] lease ms, [3] owner id, [4] the owner's holds of
-- that kind before this operation, [5] for wa '1' when the writer waits if it finds the
-- lock busy (not a single try), [6] for wa the lease of a waiting writer's mark, ms.
--
-- Not in Redisson's layout: a writer that waits while readers hold the lock marks its wait
-- in KEYS[5], a sorted set of writers with the server time (ms) their mark runs out. A mark
-- is short (ARGV[6]) and renewed by the writer's attempts, made at least every third of it
-- while it waits, so that the mark of a writer whose process died ends within seconds. New
-- read holds (not reentries, not a writer's downgrade) wait while a mark lives, so that the
-- readers drain and the writer gets in: without it a stream of overlapping readers of
-- another process keeps a writer out for as long as the stream lasts. A writer that takes
-- the lock or stops waiting takes its mark back (then readers held back are told, with the
-- write release's message). Redisson's readers do not know the mark.
--
-- Like the plain lock's script, every operation applies at most once: a re-sent one finds
-- the count it would have left and reports the same outcome without counting again.
-- Replies: acquire ACQUIRED, LOST, how long to wait (the holder's PTTL, BUSY_FOREVER
-- without expiry; for a waiting writer, at most a third of its mark's lease, when the mark
-- needs renewing), or for a new reader held back by waiting writers {HELD_BACK, ms until
-- the last of their marks runs out}; release NOT_HELD, 0 (this owner still holds), UNLOCKED
-- plus the subscribers its message reached (this owner's last hold of the kind ended and a
-- message was published), or SHARED (this owner's last read hold ended while others still
-- hold: nothing published); renew 1 or 0; wl 1.
local ACQUIRED, BUSY_FOREVER, LOST, HELD_BACK = -1, -2, -3, -6
local NOT_HELD, UNLOCKED, SHARED = -1, 1, -4
local READ_RELEASED, WRITE_RELEASED = '0', '1'
local PUBLISH = 'publish'

local name, channel, holds, prefix, marks = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op, lease, owner, expected = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local writer = owner .. ':write'
local mode = redis.call('hget', name, 'mode')

if redis.replicate_commands then redis.replicate_commands() end

-- The server's clock in ms, read once and only when a mark is looked at.
local now
local function clock()
  if not now then
    local time = redis.call('time')
    now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  return now
end

-- How long until the last live mark of a waiting writer runs out (false: none lives).
local function writer_waits()
  if redis.call('exists', marks) == 0 then return false end
  redis.call('zremrangebyscore', marks, '-inf', clock())
  local last = redis.call('zrange', marks, -1, -1, 'withscores')
  if not last[1] then return false end
  return math.max(1, tonumber(last[2]) - clock())
end

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

-- The writer's acquisition: the lock is free, or held by this writer (a reentry). ACQUIRED,
-- or false when it is busy.
local function write(field, count)
  if mode == false then
    -- A hash without `mode` is another kind's lock (Redisson's RLock): busy.
    if redis.call('exists', name) == 1 then return false end
    redis.call('hset', name, 'mode', 'write', field, 1)
    redis.call('pexpire', name, lease)
    return ACQUIRED
  end
  if mode == 'write' and count > 0 then
    redis.call('hincrby', name, field, 1)
    extend(lease)
    return ACQUIRED
  end
  return false
end

if op == 'ra' or op == 'wa' then
  local field = op == 'ra' and owner or writer
  local count = tonumber(redis.call('hget', name, field) or '0')
  if count == expected + 1 then return ACQUIRED end
  if expected > 0 and (count ~= expected or (op == 'ra' and not reads_alive(count))) then
    return LOST
  end
  if op == 'ra' and expected == 0 and redis.call('hexists', name, writer) == 0 then
    -- A new reader holds back while a writer waits (a reentry or a downgrade does not).
    local waits = writer_waits()
    if waits then return {HELD_BACK, waits} end
  end
  if op == 'wa' then
    local taken = write(field, count)
    if taken then
      redis.call('zrem', marks, owner)
      return taken
    end
    if ARGV[5] == '1' and (mode == 'read' or redis.call('zscore', marks, owner)) then
      -- Waits behind readers (or waited behind them before): mark it, for a short lease
      -- that its next attempts renew.
      local mark = tonumber(ARGV[6])
      redis.call('zadd', marks, clock() + mark, owner)
      redis.call('pexpire', marks, math.max(redis.call('pttl', marks), mark))
      local retry = math.max(1, math.floor(mark / 3))
      local pttl = busy()
      if pttl ~= BUSY_FOREVER and pttl < retry then return pttl end
      return retry
    end
    return busy()
  end
  if mode == false then
    -- A hash without `mode` is another kind's lock (Redisson's RLock): busy.
    if redis.call('exists', name) == 1 then return busy() end
    redis.call('hset', name, 'mode', 'read', field, 1)
    redis.call('set', holds .. ':1', 1, 'px', lease)
    redis.call('pexpire', name, lease)
    return ACQUIRED
  end
  if mode == 'read' or redis.call('hexists', name, writer) == 1 then
    -- Readers share; the writer may also read (a downgrade).
    local n = redis.call('hincrby', name, field, 1)
    redis.call('set', holds .. ':' .. n, 1, 'px', lease)
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

if op == 'wl' then
  -- A waiting writer stops waiting: readers held back by its mark alone may go on.
  if redis.call('zrem', marks, owner) == 1 and mode ~= 'write' and not writer_waits() then
    redis.call(PUBLISH, channel, WRITE_RELEASED)
  end
  return 1
end

if op == 'wn' then
  if redis.call('hexists', name, writer) == 0 then return 0 end
  extend(lease)
  return 1
end

return redis.error_reply('unknown read-write lock operation')
