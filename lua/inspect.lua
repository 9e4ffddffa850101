--[[
  Read one lock's whole state, with the server time it was read at.

  KEYS[1] stateKey   the lock's hash
  KEYS[2] leasesKey  the lock's owner -> deadline sorted set
  KEYS[3] queueKey   the lock's waiting writers, in arrival order

  Reply: { nowMs, stateFields (flat HGETALL array), leases (flat owner, deadline array),
           queue (waiting writers' owner tokens, first come first) }

  Refused with the error reply 'RWLOCK_LAYOUT <the lock's layout version>
  <this one>' when another layout version wrote the lock (layout-version.lua);
  nothing is written then.
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]
local queueKey = KEYS[3]

-- @include layout-version
-- @include state

checkLayout()
local now = serverTime()
return { now, rcall('HGETALL', stateKey), leaseList(), rcall('ZRANGE', queueKey, 0, -1) }
