-- tower-lock's batch script: a batch of operations on Redisson `RLock`s in one call.
-- See `scripts.rs` for the arguments and replies. User input (lock names, owner ids)
-- only ever arrives as KEYS/ARGV.
--
-- Reply codes, checked against scripts.rs by a test:
local ACQUIRED, BUSY_FOREVER, LOST = -1, -2, -3
local NOT_HELD, UNLOCKED, HANDED_OVER = -1, 1, 2
local RECORDED, HELD_FOR_OTHER_WORK, RECORD_WANTED = -5, -7, -8
-- The field of a lock's hash that names the work a claim took it for.
local WORK = 'tower_lock:work'
-- The field of a lock's hash that says a claim found it held: someone waits for its record.
local AWAITED = 'tower_lock:awaited'
-- Redisson's UNLOCK message.
local UNLOCK_MESSAGE = '0'
-- tower-lock's record channel of a lock is its Redisson channel (`redisson_lock__channel:`,
-- 23 bytes, then the name's part) under this prefix: made here, only when a record is sent.
local RECORD_CHANNEL = 'tower_lock_record_channel:'
-- PUBLISH, or SPUBLISH under sharded pub/sub (the line is rewritten then).
local PUBLISH = 'publish'
local n = #ARGV
-- One operation: three arguments, or more for a hand-over, a claim or a store (a call of
-- several starts with two counts, so its third argument is a lease, never a letter).
local single = n == 3 or ARGV[3] == 'h' or ARGV[3] == 'c' or ARGV[3] == 's'
local results = single or {}
local k, i, j = 1, 1, 1
local free, claimable, defer, deleted = 0, 0, n + 1, nil
if not single then
  -- A first acquisitions, then C claims, of keys no other operation touches: when none of
  -- their keys exists (a claim's: its lock and its record), they take them without a look
  -- of their own.
  local a, c, d = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
  i = 4
  if a > 1 and redis.call('exists', unpack(KEYS, 1, a)) == 0 then free = a end
  if c > 0 and redis.call('exists', unpack(KEYS, a + 1, a + 2 * c)) == 0 then
    claimable = a + c
  end
  if d > 0 then defer, deleted = d, {} end
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
      result = ACQUIRED
    else
      result = redis.pcall('hexists', key, owner)
      if result == 1 then
        result = ACQUIRED
      elseif result == 0 then
        result = redis.call('pttl', key)
        if result < 0 then result = BUSY_FOREVER end
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
      result = redis.call('hexists', key, successor) == 1 and HANDED_OVER or NOT_HELD
    elseif count == '1' then
      -- Those who wait for a record still do: the successor's is theirs.
      local awaited = redis.call('hexists', key, AWAITED) == 1
      redis.call('del', key)
      if awaited then
        redis.call('hset', key, successor, '1', AWAITED, '1')
      else
        redis.call('hset', key, successor, '1')
      end
      redis.call('pexpire', key, lease)
      result = HANDED_OVER
    else
      redis.call('hincrby', key, owner, '-1')
      redis.call('pexpire', key, lease)
      result = 0
    end
  elseif op == 'c' then
    -- A first acquisition unless the lock has a record; the work it is for is kept in the
    -- hash beside the owner, and a claim for other work that finds it held answers at once.
    local record, work = KEYS[k], ARGV[i]
    k = k + 1
    i = i + 1
    -- Free and without a record (the usual case) in one look; else the record, if any,
    -- and without one the lock exists.
    local free_now, stored = j <= claimable, false
    if not free_now then
      free_now = redis.call('exists', key, record) == 0
      if not free_now then stored = redis.pcall('get', record) end
    end
    if type(stored) == 'table' then
      result = stored
    elseif stored then
      result = {RECORDED, stored}
    elseif free_now then
      if work == '' then
        redis.call('hset', key, owner, '1')
      else
        redis.call('hset', key, owner, '1', WORK, work)
      end
      redis.call('pexpire', key, lease)
      result = ACQUIRED
    else
      result = redis.pcall('hexists', key, owner)
      if result == 1 then
        redis.call('pexpire', key, lease)
        result = ACQUIRED
      elseif result == 0 then
        local held_for = work ~= '' and redis.call('hget', key, WORK)
        if held_for and held_for ~= work then
          result = HELD_FOR_OTHER_WORK
        else
          -- Its holder's record is awaited (not a read-write lock's hash: not ours to mark).
          if redis.call('hexists', key, 'mode') == 0 then redis.call('hset', key, AWAITED, '1') end
          result = redis.call('pttl', key)
          if result < 0 then result = BUSY_FOREVER end
        end
      end
    end
  elseif op == 's' then
    -- A release that stores the record when it ends the owner's last hold. A re-sent one
    -- that already took effect finds its record and answers UNLOCKED again. A retention
    -- written with a leading '-': stored only if a claim found the lock held (awaited);
    -- with a leading '?', the same with the record withheld (empty): awaited, the lock is
    -- kept and the answer is RECORD_WANTED (the caller sends the store again with it), as
    -- when the lock is gone (the store with its record tells a re-sent one by its record).
    local record, channel = KEYS[k], KEYS[k + 1]
    local expected, retention, value = tonumber(ARGV[i]), ARGV[i + 1], ARGV[i + 2]
    k = k + 2
    i = i + 3
    -- The owner's count and whether a claim found the lock held, in one look.
    local mark, awaited = string.byte(retention, 1), false
    local awaited_only, withheld = mark == 45 or mark == 63, mark == 63
    if awaited_only then retention = string.sub(retention, 2) end
    local count = redis.pcall('hmget', key, owner, AWAITED)
    if not count.err then count, awaited = count[1], count[2] end
    if type(count) == 'table' then
      result = count
    elseif not count then
      if withheld then
        result = RECORD_WANTED
      else
        result = redis.pcall('get', record)
        if type(result) ~= 'table' then
          result = result == value and UNLOCKED or NOT_HELD
        end
      end
    else
      count = tonumber(count)
      if count + 1 == expected then
        result = 0
      elseif count ~= expected then
        result = NOT_HELD
      elseif count > 1 then
        redis.call('hincrby', key, owner, -1)
        redis.call('pexpire', key, lease)
        result = 0
      elseif withheld and awaited then
        result = RECORD_WANTED
      else
        if j >= defer then
          deleted[#deleted + 1] = key
        else
          redis.call('del', key)
        end
        if awaited or not awaited_only then
          redis.call('set', record, value, 'px', retention)
        end
        -- Those who wait get the record on tower-lock's channel, before the news that
        -- would have them ask for it.
        if awaited then
          redis.call(PUBLISH, RECORD_CHANNEL .. string.sub(channel, 24), value)
        end
        result = UNLOCKED + redis.call(PUBLISH, channel, UNLOCK_MESSAGE)
      end
    end
  else
    -- `a<n>`: a last release that announces the run of n holds it ends.
    local run
    if string.byte(op, 1) == 97 then
      run = string.sub(op, 2)
      op = '-1'
    end
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
        result = ACQUIRED
      else
        result = LOST
      end
    elseif not count then
      result = NOT_HELD
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
        -- The run's length goes first (Redisson ignores a message other than 0 and 1).
        if run then redis.call(PUBLISH, channel, '-' .. run) end
        result = UNLOCKED + redis.call(PUBLISH, channel, UNLOCK_MESSAGE)
      end
    end
  end
  if type(result) == 'table' and result.err then result = tostring(result.err) end
  if single then return result end
  results[j] = result
  j = j + 1
end
if deleted and #deleted > 0 then redis.call('del', unpack(deleted)) end
return results
