-- One operation on a fair lock, in Redisson's RFairLock layout: the lock hash at KEYS[1]
-- (as the plain lock's: one field, the owner's hold count, and the lease as PEXPIRE); the
-- waiters' list KEYS[2] (`redisson_lock_queue:{name}`, first come first); the places'
-- deadlines KEYS[3] (`redisson_lock_timeout:{name}`, a sorted set of epoch ms); and one
-- channel per waiter, `<KEYS[4]>:<owner>`, on which only the queue's head is told `0`.
--
-- KEYS: [1] the lock, [2] the waiters, [3] the deadlines, [4] the channel prefix
-- (`redisson_lock__channel:{name}`).
-- ARGV: [1] the operation: 'a' acquire without queueing (a single try, or a holder's
-- reentry), 'q' acquire or queue (and keep the place alive), 'r' release, 'l' leave the
-- queue; [2] lease ms; [3] owner id; [4] for 'a' and 'r' the owner's holds before this
-- operation, for 'q' and 'l' its queue timeout ms; [5] for 'q' '1' when an earlier attempt
-- of this owner was answered queued.
--
-- Like Redisson's, a new place's deadline is the last place's plus one queue timeout; when
-- the head takes the lock (or a waiter leaves) the places behind move up by one timeout.
-- Unlike Redisson's:
-- - the time is the Redis server's (TIME), not each client's clock;
-- - a waiter that is still waiting keeps its place: each 'q' attempt raises its deadline to
--   at least now plus one timeout per place up to its own (Redisson #3004), and a waiter
--   dropped as the head while it still waited goes back to the front;
-- - so the first place needs no padding with the holder's lease (Redisson's: its waiters
--   never renew theirs), and a dead waiter's place runs out one timeout after its last
--   attempt;
-- - a 'q' attempt drops the heads whose place ran out and moves the places behind up by
--   one timeout for each, as a head taking the lock does: dead waiters (a killed
--   process's) cost one queue timeout in all, however many there are (Redisson drops them
--   one timeout after another);
-- - 'a' and 'r' carry no queue timeout and drop nobody: they tell the first waiter whose
--   place is alive that the lock is free, and its own 'q' drops the dead ones ahead of it;
--   'a' takes a free lock whose places have all run out;
-- - a head without a deadline (a half-written entry) counts as run out instead of blocking
--   the queue for ever; a release that finds the lock gone (its lease ran out) and a head
--   that leaves tell the next waiter too (#3730);
-- - every operation applies at most once, like the plain lock's (the counts it carries).
--
-- Replies: 'a' ACQUIRED, LOST, or how long the lock stays busy (the holder's PTTL,
-- BUSY_FOREVER without expiry, or until the head's place runs out when the lock is free
-- but others queue first); 'q' ACQUIRED or {retry in ms, the holder's PTTL}; 'r' NOT_HELD,
-- 0 (a reentrant hold remains) or UNLOCKED plus the subscribers the head's message reached;
-- 'l' 1.
local ACQUIRED, BUSY_FOREVER, LOST = -1, -2, -3
local NOT_HELD, UNLOCKED = -1, 1
local UNLOCK_MESSAGE = '0'
local PUBLISH = 'publish'

local name, queue, deadlines, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, lease, owner = ARGV[1], tonumber(ARGV[2]), ARGV[3]

if redis.replicate_commands then redis.replicate_commands() end

-- The server's clock in ms, read once and only when a deadline is looked at (each
-- redis.call costs Redis a few thousand instructions: the common paths make few).
local now
local function clock()
  if not now then
    local time = redis.call('time')
    now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  end
  return now
end

-- Drops the heads whose place ran out (or that have none); the places behind move up by
-- `step` for each one dropped, as they do when a head takes the lock. So a run of dead
-- waiters (a killed process's) costs one queue timeout in all, not one each (Redisson #3004,
-- #3730): each dead place ran out one timeout after its last renewal, counted from where
-- it stands now. Whether any was dropped, and the head now (false: nobody queues).
local function evict(step)
  local dropped, moved = 0, 0
  local head
  while true do
    head = redis.call('lindex', queue, 0)
    if not head then break end
    local deadline = tonumber(redis.call('zscore', deadlines, head))
    if deadline and deadline - moved > clock() then break end
    redis.call('lpop', queue)
    redis.call('zrem', deadlines, head)
    dropped = dropped + 1
    moved = moved + step
  end
  if moved > 0 and head then
    for _, waiter in ipairs(redis.call('zrange', deadlines, 0, -1)) do
      redis.call('zincrby', deadlines, -moved, waiter)
    end
  end
  return dropped > 0, head
end

-- The first waiter whose place has not run out, and true, without dropping anyone;
-- operations that carry no queue timeout (a single try, a release) leave the dropping to
-- the waiters' own attempts, which know by how much to move the places behind up, and
-- only tell that waiter that the lock is free. When every place ran out: the head, and
-- false (its own attempt drops what is dead and sorts the rest out: a place can run out
-- while its waiter lives, cut off from Redis for a timeout, or moved up by a Redisson
-- client's longer timeout). Nobody queues: false, false.
local function first_alive()
  local at = 0
  while true do
    local waiter = redis.call('lindex', queue, at)
    if not waiter then return redis.call('lindex', queue, 0), false end
    local deadline = tonumber(redis.call('zscore', deadlines, waiter))
    if deadline and deadline > clock() then return waiter, true end
    at = at + 1
  end
end

-- Tells the queue's head (only) that it may take the lock: the subscribers reached.
local function wake(head)
  if not head or head == owner then return 0 end
  return redis.call(PUBLISH, channel .. ':' .. head, UNLOCK_MESSAGE)
end

-- The owner takes the free lock; if it is the head, it leaves the queue and the places
-- behind move up by `step`.
local function take(step, is_head)
  if is_head then
    redis.call('lpop', queue)
    redis.call('zrem', deadlines, owner)
    for _, waiter in ipairs(redis.call('zrange', deadlines, 0, -1)) do
      redis.call('zincrby', deadlines, -step, waiter)
    end
  end
  redis.call('hset', name, owner, 1)
  redis.call('pexpire', name, lease)
  return ACQUIRED
end

local function deadline_in(head)
  return math.max(1, tonumber(redis.call('zscore', deadlines, head)) - clock())
end

if op == 'a' then
  local expected = tonumber(ARGV[4])
  local count = tonumber(redis.call('hget', name, owner) or '0')
  if count == expected + 1 then return ACQUIRED end
  if expected > 0 or count > 0 then
    if count ~= expected then return LOST end
    redis.call('hincrby', name, owner, 1)
    redis.call('pexpire', name, lease)
    return ACQUIRED
  end
  if redis.call('exists', name) == 0 then
    local head, alive = first_alive()
    if not alive then
      -- Nobody queues, or every place ran out: the queue is over.
      redis.call('del', queue, deadlines)
      return take(0, false)
    end
    -- Places that ran out are ahead of it: it may not know that its turn came.
    if head ~= redis.call('lindex', queue, 0) then wake(head) end
    return deadline_in(head)
  end
  local pttl = redis.call('pttl', name)
  if pttl < 0 then return BUSY_FOREVER end
  return pttl
end

if op == 'q' then
  local step, was_head = tonumber(ARGV[4]), ARGV[5] == '1'
  -- A re-sent attempt that took the lock already.
  if redis.call('hexists', name, owner) == 1 then return ACQUIRED end
  local free = redis.call('exists', name) == 0
  local dropped, head = evict(step)
  -- Nobody queues: the lock is taken without a place.
  if free and not head then return take(step, false) end
  local pos
  if head == owner then pos = 0 else pos = redis.call('lpos', queue, owner) end
  if not pos then
    if was_head and head then
      -- Dropped as the head while it still waited: back to the front, where it was. The
      -- places behind move back by one timeout, as they moved up when it was dropped.
      for _, waiter in ipairs(redis.call('zrange', deadlines, 0, -1)) do
        redis.call('zincrby', deadlines, step, waiter)
      end
      redis.call('lpush', queue, owner)
      pos = 0
    else
      -- Behind the last place (Redisson's rule), but not padded with the holder's lease
      -- as Redisson's first place is: ours are kept alive, and a dead one must not block
      -- the queue for a whole lease after the lock was freed.
      local last = redis.call('lindex', queue, -1)
      local base = last and tonumber(redis.call('zscore', deadlines, last)) or clock()
      redis.call('zadd', deadlines, base + step, owner)
      pos = redis.call('rpush', queue, owner) - 1
    end
    if pos == 0 then head = owner end
  end
  -- Keep the place alive: at least one timeout per place up to its own.
  local alive = clock() + (pos + 1) * step
  if alive > (tonumber(redis.call('zscore', deadlines, owner)) or 0) then
    redis.call('zadd', deadlines, alive, owner)
  end
  if free and pos == 0 then return take(step, true) end
  if free and dropped then wake(head) end
  local pttl = redis.call('pttl', name)
  local retry = step
  if pos > 0 then
    retry = deadline_in(head)
  elseif pttl >= 0 then
    retry = pttl
  end
  local at_head = 0
  if pos == 0 then at_head = 1 end
  return {retry, pttl, at_head}
end

if op == 'r' then
  local expected = tonumber(ARGV[4])
  local count = tonumber(redis.call('hget', name, owner))
  if count and count + 1 == expected then return 0 end
  if count ~= expected then
    -- Not held (its lease ran out, or it was deleted). If the lock is free, its head must
    -- not wait for a message nobody else will send.
    if redis.call('exists', name) == 0 then wake(first_alive()) end
    return NOT_HELD
  end
  if count > 1 then
    redis.call('hincrby', name, owner, -1)
    redis.call('pexpire', name, lease)
    return 0
  end
  redis.call('del', name)
  return UNLOCKED + wake(first_alive())
end

if op == 'l' then
  local step = tonumber(ARGV[4])
  local waiters = redis.call('lrange', queue, 0, -1)
  local at
  for i, waiter in ipairs(waiters) do
    if waiter == owner then
      at = i
      break
    end
  end
  if at then
    for i = at + 1, #waiters do redis.call('zincrby', deadlines, -step, waiters[i]) end
    redis.call('lrem', queue, 0, owner)
  end
  redis.call('zrem', deadlines, owner)
  -- A head that leaves while the lock is free passes the turn on.
  if at == 1 and redis.call('exists', name) == 0 then
    local _, head = evict(step)
    wake(head)
  end
  return 1
end

return redis.error_reply('unknown fair lock operation')
