#!lua flags=allow-oom
--[[
  Extend the leases of one or many owners in legacy or bridge mode, each on
  its own lock (every lock's keys declared; on a Cluster, the caller sends
  the locks of one slot per call). As
  lua/extend.lua, and the two-key layout must still back the hold: a writer
  whose write key is gone or taken, or a reader while somebody else holds
  the write key, has lost the lock. A reader's read key deleted by an old
  reader's release is restored.

  KEYS[6k-5..6k]  lock k: stateKey, leasesKey, queueKey, readKey, writeKey,
                  readersKey, as in lua/legacy-acquire-read.lua
  ARGV[1]         the budget in microseconds (as in lua/extend.lua)
  ARGV[2k..2k+1]  lock k: owner, new lease length in ms

  Reply: as lua/extend.lua's, when the call started and how long it ran by
         its clock, then one integer per lock k reached within the budget,
         in order: the
         lease left in ms (> 0) after extending, or 0 when the owner no
         longer holds lock k (it is then lost; also when another layout
         version took the lock since: nothing of it is written then).
]]
local rcall = redis.call
local stateKey, leasesKey, queueKey, readKey, writeKey, readersKey
local peerChannel = ''

-- @include layout-version
-- @include state
-- @include clock
-- @include legacy

local now, startUs = serverTime()
local budgetUs = tonumber(ARGV[1])
local locks = #KEYS / 6
local results = { startUs, 0 }
for k = 1, locks do
  local at = 6 * (k - 1)
  stateKey, leasesKey, queueKey = KEYS[at + 1], KEYS[at + 2], KEYS[at + 3]
  readKey, writeKey, readersKey = KEYS[at + 4], KEYS[at + 5], KEYS[at + 6]
  local owner, leaseMs = ARGV[2 * k], tonumber(ARGV[2 * k + 1])
  -- (false: the lock is another layout version's, so this lease is lost; nothing is written.)
  local mine = spilledDeadlineOf(owner, now, true)
  if mine and mine > now and peerIntact(owner) then
    rcall('ZADD', leasesKey, int(now + leaseMs), owner)
    refreshExpiry(now)
    peerMirror(owner, now)
    results[k + 2] = leaseMs
  else
    if mine then
      removeOwner(owner)
      refreshExpiry(now)
    end
    if mine ~= false then peerMirror(owner, now) end
    results[k + 2] = 0
  end
  if k < locks and elapsedUs() >= budgetUs then break end
end
results[2] = elapsedUs()
return results
