--[[
  The body of a read acquire, shared by the hash-mode and the legacy/bridge
  scripts. Expects: rcall, the keys of `state`, owner, holdId, leaseMs, honourIntent,
  and the peer hooks (`no-peers` or `legacy`). Returns the script's reply, as
  documented in lua/acquire-read.lua.
]]
-- @needs rcall stateKey owner holdId leaseMs honourIntent state peers
local now, nowUs = serverTime()
spill(now)
pruneExpired(now)

local mine = liveDeadlineOf(owner, now)
local again = repeatedGrant('read', owner, holdId, mine, now, leaseMs)
if again then return again end

local writer = rcall('HGET', stateKey, 'w')
if writer and writer ~= owner then
  local until_ = deadlineOf(writer)
  if until_ and until_ > now then
    return { 0, until_ - now, 'write' }
  end
  removeOwner(writer)
end
-- A writer outside this hash state (an old process, in legacy and bridge modes).
local peerRetry = peerWriter(owner, now)
if peerRetry then
  return { 0, peerRetry, 'write' }
end

-- A caller that already holds the lock (reentrant read, or the writer taking
-- read to downgrade) never queues behind a waiting writer: that would deadlock.
if honourIntent and not mine then
  local _, intentUntil = otherIntent(owner, now)
  if intentUntil then
    return { 0, intentUntil - now, 'intent' }
  end
end

local reply = grant('read', owner, holdId, now, nowUs, leaseMs)
peerMirror(owner, now)
return reply
