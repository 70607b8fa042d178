-- A plain lock with a record: an acquisition that takes the lock only while the lock has no
-- record, and a last release that stores one. The lock is Redisson's `RLock` hash (renewed
-- by the batch script like any plain lock); the record is a string key in its slot that
-- expires with its retention. User input only as KEYS/ARGV.
--
-- KEYS: [1] the lock, [2] its record (`tower_lock_record:{name}`), [3] its unlock channel.
-- ARGV: [1] the operation: 'a' acquire unless recorded, 'r' release and record; [2] lease
-- ms; [3] owner id; for 'a': [4] the work the lock is taken for ('' for none); for 'r':
-- [4] the owner's holds before the release, [5] the record's retention ms, [6] the record.
--
-- The work an acquisition names is kept in the lock's hash, in the field WORK beside the
-- owner's count (written by the same HSET): an acquisition for other work that finds the
-- lock held answers at once rather than wait for an outcome that can never be its own. A
-- release deletes the hash, and the work with it.
--
-- 'a' replies {ACQUIRED}, {RECORDED, record}, {HELD_FOR_OTHER_WORK}, {pttl} or
-- {BUSY_FOREVER}. It applies at most once: a re-sent acquisition finds the owner holding
-- the lock and answers ACQUIRED.
-- 'r' replies NOT_HELD (the owner does not hold the lock: nothing stored), 0 (a reentrant
-- hold remains: nothing stored yet), or UNLOCKED plus the subscribers its message reached
-- (the lock deleted, the record stored, Redisson's UNLOCK `0` published). A re-sent release
-- that already took effect finds the same record and answers UNLOCKED again.
-- Reply codes, checked against scripts.rs by a test:
local ACQUIRED, BUSY_FOREVER, RECORDED, HELD_FOR_OTHER_WORK = -1, -2, -5, -7
local WORK = 'tower_lock:work'
local NOT_HELD, UNLOCKED = -1, 1
local UNLOCK_MESSAGE = '0'
local PUBLISH = 'publish'

local lock, record, channel = KEYS[1], KEYS[2], KEYS[3]
local op, lease, owner = ARGV[1], ARGV[2], ARGV[3]

if op == 'a' then
  local work = ARGV[4]
  local stored = redis.call('get', record)
  if stored then return {RECORDED, stored} end
  if redis.call('exists', lock) == 0 then
    if work == '' then
      redis.call('hset', lock, owner, '1')
    else
      redis.call('hset', lock, owner, '1', WORK, work)
    end
    redis.call('pexpire', lock, lease)
    return {ACQUIRED}
  end
  local count = redis.pcall('hget', lock, owner)
  if type(count) == 'table' then return count end
  if count then
    redis.call('pexpire', lock, lease)
    return {ACQUIRED}
  end
  if work ~= '' then
    local held_for = redis.call('hget', lock, WORK)
    if held_for and held_for ~= work then return {HELD_FOR_OTHER_WORK} end
  end
  local pttl = redis.call('pttl', lock)
  if pttl < 0 then return {BUSY_FOREVER} end
  return {pttl}
end

if op == 'r' then
  local expected, retention, value = tonumber(ARGV[4]), ARGV[5], ARGV[6]
  local count = redis.pcall('hget', lock, owner)
  if type(count) == 'table' then return count end
  if not count then
    if redis.call('get', record) == value then return UNLOCKED end
    return NOT_HELD
  end
  count = tonumber(count)
  if count + 1 == expected then return 0 end
  if count ~= expected then return NOT_HELD end
  if count > 1 then
    redis.call('hincrby', lock, owner, -1)
    redis.call('pexpire', lock, lease)
    return 0
  end
  redis.call('del', lock)
  redis.call('set', record, value, 'px', retention)
  return UNLOCKED + redis.call(PUBLISH, channel, UNLOCK_MESSAGE)
end

return redis.error_reply('unknown record operation')
