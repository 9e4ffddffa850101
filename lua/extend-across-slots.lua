#!lua flags=allow-cross-slot-keys,allow-oom
--[[
  lua/extend.lua for a Redis Cluster node's locks of many slots in one call:
  the only script that touches keys it does not declare. A Cluster refuses
  declared keys of several slots (CROSSSLOT), so this one declares the first
  lock's keys (they route the call) and names every lock's keys in ARGV; the
  flag lets it reach the other slots of that node. An OSS Cluster runs it,
  so renewal there takes a few calls per node per round, not one per slot.
  A server or proxy that refuses it (undeclared keys, keys of several slots:
  ElastiCache Serverless, key-routing proxies) gets lua/extend.lua
  instead, one slot per call, from the refused call's leases on
  (src/backends/scripted.ts). The declared-keys guard of the tests
  (test/support/declared-keys.ts) leaves this script alone.

  KEYS[1..3]        stateKey, leasesKey, queueKey of the first lock (for routing)
  ARGV[1]           the budget in microseconds
  ARGV[5k-3..5k+1]  lock k: stateKey, leasesKey, queueKey, owner, new lease length in ms

  Reply: as lua/extend.lua's (the budget too).
]]
local rcall = redis.call
local stateKey, leasesKey, queueKey

-- @include layout-version
-- @include state
-- @include clock
-- @include extend-one

local now, startUs = serverTime()
local budgetUs = tonumber(ARGV[1])
local locks = (#ARGV - 1) / 5
local results = { startUs, 0 }
for k = 1, locks do
  local at = 5 * (k - 1) + 1
  stateKey, leasesKey, queueKey = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  results[k + 2] = renewOne(ARGV[at + 4], ARGV[at + 5], now)
  if k < locks and elapsedUs() >= budgetUs then break end
end
results[2] = elapsedUs()
return results
