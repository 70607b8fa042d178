-- tower-lock's inspection of one name, read only: what each of Redisson's layouts holds
-- under it now. User input only as KEYS/ARGV.
--
-- KEYS: the name, the fair queue (`redisson_lock_queue:{name}`), the fair deadlines
-- (`redisson_lock_timeout:{name}`), the fencing tokens (`redisson_lock_token:{name}`), the
-- semaphore's permits (`{name}:timeout`). ARGV: the read-write lock's key prefix (`{name}`),
-- the most queue entries and permits to list.
--
-- Reply: {type of the name, its PTTL, the hash's fields and values (a lock) with, for each
-- read-write holder, the PTTL of its last hold's timeout key, the queue (owner, deadline
-- left or -1 …), the queue's length, the token or false, the name's string value or false,
-- the permits (id, lease left …), how many permits in all, how many with a live lease}.
local key, queue, deadlines, tokens, permits = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local prefix, listed = ARGV[1], tonumber(ARGV[2])
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local kind = redis.call('type', key)['ok']
local pttl = redis.call('pttl', key)
local fields, value = {}, false
if kind == 'hash' then
  local flat = redis.call('hgetall', key)
  local mode = false
  for i = 1, #flat, 2 do
    if flat[i] == 'mode' then mode = true end
  end
  for i = 1, #flat, 2 do
    local field, count = flat[i], flat[i + 1]
    local lease = pttl
    if mode and field ~= 'mode' then
      -- A read-write holder: its last hold's own timeout key (Redisson's layout).
      local owner = field
      if string.sub(field, -6) == ':write' then owner = string.sub(field, 1, -7) end
      local n = tonumber(count)
      if n and string.sub(field, -6) ~= ':write' then
        lease = redis.call('pttl', prefix .. ':' .. owner .. ':rwlock_timeout:' .. n)
      end
    end
    -- The work a lock with a record was taken for and the mark that its record is awaited
    -- (`batch.lua`'s claim) are no holders.
    if field ~= 'tower_lock:work' and field ~= 'tower_lock:awaited' then
      fields[#fields + 1] = field
      fields[#fields + 1] = count
      fields[#fields + 1] = lease
    end
  end
elseif kind == 'string' then
  value = redis.call('get', key)
end
local waiting, queued = {}, 0
if redis.call('type', queue)['ok'] == 'list' then
  queued = redis.call('llen', queue)
  for _, owner in ipairs(redis.call('lrange', queue, 0, listed - 1)) do
    local deadline = redis.call('zscore', deadlines, owner)
    waiting[#waiting + 1] = owner
    waiting[#waiting + 1] = deadline and math.max(tonumber(deadline) - now, 0) or -1
  end
end
local token = false
if redis.call('type', tokens)['ok'] == 'string' then token = redis.call('get', tokens) end
local held, all, live = {}, 0, 0
if redis.call('type', permits)['ok'] == 'zset' then
  all = redis.call('zcard', permits)
  live = redis.call('zcount', permits, '(' .. now, '+inf')
  local flat = redis.call('zrange', permits, 0, listed - 1, 'WITHSCORES')
  for i = 1, #flat, 2 do
    held[#held + 1] = flat[i]
    -- Redisson's "no lease" score.
    if flat[i + 1] == '922337203685477' then
      held[#held + 1] = -1
    else
      held[#held + 1] = math.max(tonumber(flat[i + 1]) - now, 0)
    end
  end
end
return {kind, pttl, fields, waiting, queued, token, value, held, all, live}
