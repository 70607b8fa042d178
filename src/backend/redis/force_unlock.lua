-- tower-lock's force-unlock of one name: frees it whatever holds it, in Redisson's layouts,
-- and wakes its waiters with the kind's own message so that Redisson's wake too. Holders
-- learn it at their next renewal (their hold is gone). Anything it does not recognise is
-- left alone. User input only as KEYS/ARGV.
--
-- KEYS: the name, the fair queue, the lock's channel, the read-write lock's channel, the
-- semaphore's permits (`{name}:timeout`), the semaphore's channel. ARGV: the read-write
-- lock's key prefix (`{name}`).
--
-- Reply: {what it was: 'lock', 'read_write', 'semaphore', 'none' (nothing there) or
-- 'foreign' (left alone), holds or permits freed, the foreign type}.
local PUBLISH = 'publish'
local WORK = 'tower_lock:work'
local AWAITED = 'tower_lock:awaited'
local key, queue, channel, rw_channel, permits, sem_channel =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local prefix = ARGV[1]
local kind = redis.call('type', key)['ok']
if kind == 'hash' then
  local flat = redis.call('hgetall', key)
  local mode = false
  for i = 1, #flat, 2 do
    local field, value = flat[i], flat[i + 1]
    if field == 'mode' and (value == 'read' or value == 'write') then
      mode = true
    elseif field == WORK or field == AWAITED then
      -- The work a lock with a record was taken for, the mark that its record is awaited
      -- (`batch.lua`'s claim): no holders.
    elseif not (string.find(field, ':', 1, true) and tonumber(value)) then
      -- Not a lock's hash (owner ids as fields, hold counts as values): somebody else's.
      return {'foreign', 0, 'hash'}
    end
  end
  local holds = 0
  for i = 1, #flat, 2 do
    local field, count = flat[i], tonumber(flat[i + 1])
    if field ~= 'mode' and field ~= WORK and field ~= AWAITED then
      holds = holds + count
      if mode and string.sub(field, -6) ~= ':write' then
        for n = 1, count do
          redis.call('del', prefix .. ':' .. field .. ':rwlock_timeout:' .. n)
        end
      end
    end
  end
  redis.call('del', key)
  if mode then
    -- Redisson's READ_UNLOCK: every waiter looks.
    redis.call(PUBLISH, rw_channel, '1')
    return {'read_write', holds, ''}
  end
  -- Redisson's UNLOCK; a fair lock's head is told on its own channel too.
  redis.call(PUBLISH, channel, '0')
  local head = redis.call('lindex', queue, 0)
  if head then redis.call(PUBLISH, channel .. ':' .. head, '0') end
  return {'lock', holds, ''}
end
if redis.call('type', permits)['ok'] == 'zset' and (kind == 'string' or kind == 'none') then
  -- A semaphore: every permit goes back to the count (the limit stays).
  local freed = redis.call('zcard', permits)
  redis.call('del', permits)
  if kind == 'string' then
    local value = redis.call('incrby', key, freed)
    if value > 0 then redis.call(PUBLISH, sem_channel, value) end
  end
  return {'semaphore', freed, ''}
end
if kind == 'string' and tonumber(redis.call('get', key)) then
  -- A semaphore with no permit held.
  return {'semaphore', 0, ''}
end
if kind == 'none' then return {'none', 0, ''} end
return {'foreign', 0, kind}
