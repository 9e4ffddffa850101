--[[
  Acquire a write hold on one lock: reentrant for its writer, an in-place
  upgrade for its sole reader; writers that wait queue in arrival order.

  KEYS[1] stateKey   the lock's hash
  KEYS[2] leasesKey  the lock's owner -> deadline sorted set
  KEYS[3] queueKey   the lock's waiting writers, in arrival order
  ARGV[1] owner      owner token
  ARGV[2] leaseMs    lease length in ms
  ARGV[3] waitBeatMs a refused caller waits and re-tries within this many ms:
                     it queues (new readers and writers then go behind it) and
                     drops out of the queue if it stops re-trying; 0 for a try
                     that does not wait
  ARGV[4] fair       '1': only the longest-waiting writer may take a free lock;
                     '0': so may any writer that was already waiting when the
                     lock was last freed, but the longest-waiting one is passed
                     over at most MAX_SKIPS times in a row; newcomers (the
                     releaser among them) never pass waiters

  Reply: { 1, fence, leaseRemainingMs }   granted
         { 0, retryAfterMs, reason }      refused; reason is
           'write'   another owner holds write (retryAfterMs: its lease left)
           'read'    other owners hold read (retryAfterMs: until the first of their leases ends)
           'queue'   the lock is free but earlier waiting writers go first
           'upgrade' the caller reads and another reader already waits to upgrade:
                     waiting would deadlock both, so the caller must give up
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]
local queueKey = KEYS[3]
local owner = ARGV[1]
local leaseMs = tonumber(ARGV[2])
local waitBeatMs = tonumber(ARGV[3])
local fair = ARGV[4] == '1'

-- @include state

local MAX_SKIPS = 2

local now, nowUs = serverTime()
local fast = grantToFreshLock(owner, now, nowUs, leaseMs, { 'w', owner, 'wc', 1 })
if fast then return fast end
pruneExpired(now)

local mine = deadlineOf(owner)
if mine and mine <= now then
  removeOwner(owner)
  mine = nil
end

-- A refused caller that will wait announces itself: a holder (upgrader) in `u`,
-- anyone else in the queue.
local function refuse(retryAfterMs, reason)
  if waitBeatMs > 0 then
    if mine then
      if not otherUpgrader(owner, now) then
        rcall('HSET', stateKey, 'u', owner)
        heartbeat('ud', now, waitBeatMs)
      end
    else
      enqueue(owner, now, nowUs, waitBeatMs)
    end
    refreshExpiry(now)
  end
  return { 0, retryAfterMs, reason }
end

local writer = rcall('HGET', stateKey, 'w')
if writer == owner then
  rcall('HINCRBY', stateKey, 'wc', 1)
  return grant(owner, now, nowUs, leaseMs)
end
if writer then
  local until_ = deadlineOf(writer)
  if until_ and until_ > now then
    return refuse(until_ - now, 'write')
  end
  removeOwner(writer)
end

local others = liveCount(now)
if mine then others = others - 1 end
if others > 0 then
  if mine and otherUpgrader(owner, now) then
    return { 0, 0, 'upgrade' }
  end
  -- The first live lease to end, other than ours, bounds the wait.
  local first = rcall('ZRANGE', leasesKey, '(' .. int(now), '+inf', 'BYSCORE', 'LIMIT', 0, 2, 'WITHSCORES')
  local retry = tonumber(first[2]) - now
  if first[1] == owner and first[4] then retry = tonumber(first[4]) - now end
  return refuse(retry, 'read')
end

-- No other holder. A holder (upgrading) goes ahead; anyone else goes behind
-- the writers already waiting, so a releaser cannot take the lock straight back.
if not mine then
  local head, beat = queueHead(now)
  if head == owner then
    rcall('HDEL', stateKey, 'sk')
  elseif head then
    local arrival = rcall('ZSCORE', queueKey, owner)
    local mayPass = not fair and arrival and isQueued(owner, now)
      and tonumber(arrival) < numberField('fa') and numberField('sk') < MAX_SKIPS
    if not mayPass then
      return refuse(beat - now, 'queue')
    end
    rcall('HINCRBY', stateKey, 'sk', 1)
  end
end

dequeue(owner)
if rcall('HGET', stateKey, 'u') == owner then
  rcall('HDEL', stateKey, 'u', 'ud')
end
rcall('HSET', stateKey, 'w', owner, 'wc', 1)
return grant(owner, now, nowUs, leaseMs)
