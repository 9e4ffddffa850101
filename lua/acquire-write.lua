--[[
  Acquire a write hold on one lock: reentrant for its writer, an in-place
  upgrade for its sole reader.

  KEYS[1] stateKey   the lock's hash
  KEYS[2] leasesKey  the lock's owner -> deadline sorted set
  ARGV[1] owner      owner token
  ARGV[2] leaseMs    lease length in ms
  ARGV[3] intentMs   how long a refused writer's intent keeps new readers out (0: leave none)

  Reply: { 1, fence, leaseRemainingMs }   granted
         { 0, retryAfterMs, reason }      refused; reason is
           'write'   another owner holds write (retryAfterMs: its lease left)
           'read'    other owners hold read (retryAfterMs: until the first of their leases ends)
           'upgrade' the caller reads and another reader already waits to upgrade:
                     waiting would deadlock both, so the caller must give up
  A refused caller leaves (or renews) its writer intent, unless another live
  writer's intent is there; a waiting upgrader's intent takes precedence over
  a plain writer's, so that a second upgrader always sees it.
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]
local owner = ARGV[1]
local leaseMs = tonumber(ARGV[2])
local intentMs = tonumber(ARGV[3])

-- @include state

local now, nowUs = serverTime()
pruneExpired(now)

local mine = deadlineOf(owner)
if mine and mine <= now then
  removeOwner(owner)
  mine = nil
end

local function isReader(o)
  return rcall('HEXISTS', stateKey, 'r:' .. o) == 1
end

local function refuse(retryAfterMs, reason, upgrading)
  local intentOwner = otherIntent(owner, now)
  if intentMs > 0 and (not intentOwner or (upgrading and not isReader(intentOwner))) then
    rcall('HSET', stateKey, 'i', owner, 'id', int(now + intentMs))
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
    return refuse(until_ - now, 'write', false)
  end
  removeOwner(writer)
end

local others = liveCount(now)
if mine then others = others - 1 end
if others > 0 then
  local upgrading = mine ~= nil
  if upgrading then
    local intentOwner = otherIntent(owner, now)
    if intentOwner and isReader(intentOwner) then
      return { 0, 0, 'upgrade' }
    end
  end
  -- The first live lease to end, other than ours, bounds the wait.
  local first = rcall('ZRANGE', leasesKey, '(' .. int(now), '+inf', 'BYSCORE', 'LIMIT', 0, 2, 'WITHSCORES')
  local retry = tonumber(first[2]) - now
  if first[1] == owner and first[4] then retry = tonumber(first[4]) - now end
  return refuse(retry, 'read', upgrading)
end

if rcall('HGET', stateKey, 'i') == owner then
  rcall('HDEL', stateKey, 'i', 'id')
end
rcall('HSET', stateKey, 'w', owner, 'wc', 1)
return grant(owner, now, nowUs, leaseMs)
