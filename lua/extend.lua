#!lua flags=allow-cross-slot-keys
--[[
  Extend the leases of one or many owners, each on its own lock: one call
  renews every lease a client holds on one Redis node (Cluster slots may
  differ, the node must be the same).

  KEYS[3k-2] stateKey of lock k   KEYS[3k-1] leasesKey of lock k   KEYS[3k] queueKey of lock k
  ARGV[2k-1] owner on lock k      ARGV[2k]   new lease length in ms

  Reply: one integer per lock k: the lease left in ms (> 0) after extending,
         or 0 when the owner no longer holds lock k (it is then lost).
]]
local rcall = redis.call
local stateKey, leasesKey, queueKey

-- @include state

local now = serverTime()
local results = {}
for k = 1, #KEYS / 3 do
  stateKey, leasesKey, queueKey = KEYS[3 * k - 2], KEYS[3 * k - 1], KEYS[3 * k]
  local owner, leaseMs = ARGV[2 * k - 1], tonumber(ARGV[2 * k])
  local mine = deadlineOf(owner)
  if mine and mine > now then
    rcall('ZADD', leasesKey, int(now + leaseMs), owner)
    refreshExpiry(now)
    results[k] = leaseMs
  else
    if mine then
      removeOwner(owner)
      refreshExpiry(now)
    end
    results[k] = 0
  end
end
return results
