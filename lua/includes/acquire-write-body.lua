--[[
  The body of a write acquire, shared by the hash-mode and the legacy/bridge
  scripts. Expects: rcall, the keys of `state`, owner, holdId, leaseMs, waitBeatMs,
  fair, and the peer hooks (`no-peers` or `legacy`). Returns the script's
  reply, as documented in lua/acquire-write.lua.
]]
-- @needs rcall stateKey leasesKey queueKey owner holdId leaseMs waitBeatMs fair acceptsHandOver place state peers
local MAX_SKIPS = 2

local now, nowUs = serverTime()
spill(now)
pruneExpired(now)

local mine = liveDeadlineOf(owner, now)
local again = repeatedGrant('write', owner, holdId, mine, now, leaseMs)
if again then
  -- Written by another client (a release that handed it over, for the writer's
  -- queue heartbeat only) or by an earlier delivery. Either way the writer is
  -- alive and asks for its lease: the hold runs that long from now, as a renewal
  -- would make it (never shorter than it was), so the writer need not extend a
  -- handed hold with a call of its own before the heartbeat runs out. The keys'
  -- expiry is written in any case, so that this call propagates, and a WAIT
  -- after it (replicaAck) counts the grant's replication (Redis 7.2+ moves a
  -- client's replication offset only for commands that propagated something).
  if mine - now < leaseMs then
    rcall('ZADD', leasesKey, int(now + leaseMs), owner)
    again = fenceOfHolds(rcall('HGET', stateKey, 'wc'))
  end
  refreshExpiry(now)
  peerMirror(owner, now)
  return again
end

-- A refused caller that will wait announces itself: a holder (upgrader) in `u`,
-- anyone else in the queue. One a release may hand the lock to (HANDS_OVER
-- and acceptsHandOver) registers its hold id, and the reply carries its heartbeat
-- deadline, which such a release names (handOver in release-body.lua).
local function refuse(retryAfterMs, reason)
  if waitBeatMs > 0 then
    local beat
    if mine then
      if not otherUpgrader(owner, now) then
        rcall('HSET', stateKey, 'u', owner)
        heartbeat('ud', now, waitBeatMs)
      end
    elseif HANDS_OVER and acceptsHandOver then
      beat = enqueue(owner, now, nowUs, place, waitBeatMs, holdId, leaseMs)
    else
      enqueue(owner, now, nowUs, place, waitBeatMs)
    end
    refreshExpiry(now)
    if beat then return { 0, retryAfterMs, reason, beat, rcall('ZSCORE', queueKey, owner) } end
  end
  return { 0, retryAfterMs, reason }
end

local writer = rcall('HGET', stateKey, 'w')
if writer == owner then
  local reply = grant('write', owner, holdId, now, nowUs, leaseMs)
  peerMirror(owner, now)
  return reply
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

-- Holders outside this hash state (old processes, in legacy and bridge modes).
local peerRetry = peerWriter(owner, now)
if peerRetry then return refuse(peerRetry, 'write') end
peerRetry = peerReaders(owner, now)
if peerRetry then return refuse(peerRetry, 'read') end

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
local reply = grant('write', owner, holdId, now, nowUs, leaseMs)
peerMirror(owner, now)
return reply
