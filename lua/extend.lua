#!lua flags=allow-oom
--[[
  Extend the leases of one or many owners, each on its own lock: one call
  renews many leases a client holds. Every lock's keys are declared in KEYS,
  so servers and proxies that route by, or enforce, declared keys run it
  (ElastiCache Serverless, key-routing proxies). A Redis Cluster
  refuses declared keys of several slots (CROSSSLOT, whatever the script's
  flags), so there one call carries the locks of one slot, and only where
  the Cluster refuses lua/extend-across-slots.lua (src/backends/scripted.ts);
  on one server, every lock, in as few calls as the budget allows.

  One call may hold thousands of leases, and Redis runs nothing else while
  it runs: the call stops once it has run for its budget (by the clock of
  includes/clock.lua, read after each lease; where that clock stands still,
  the caller's size of the call is the bound) and replies for the locks it
  reached; the caller sends the rest in another call. It always reaches the
  first lock.

  KEYS[3k-2..3k]   lock k: stateKey, leasesKey, queueKey
  ARGV[1]          the budget in microseconds
  ARGV[2k..2k+1]   lock k: owner, new lease length in ms

  Reply: when the call started (server us) and how long it ran by its clock
         (us; 0 where the clock stands still), for the caller's sizing
         (src/backends/call-sizer.ts); then one integer per lock k reached,
         in order (fewer than the locks sent when the budget ran out): the
         lease left in ms (> 0) after
         extending, or 0 when the owner no longer holds lock k (it is then
         lost; also when another layout version took the lock since:
         nothing of it is written then).
]]
local rcall = redis.call
local stateKey, leasesKey, queueKey

-- @include layout-version
-- @include state
-- @include clock
-- @include extend-one

local now, startUs = serverTime()
local budgetUs = tonumber(ARGV[1])
local locks = #KEYS / 3
local results = { startUs, 0 }
for k = 1, locks do
  stateKey, leasesKey, queueKey = KEYS[3 * k - 2], KEYS[3 * k - 1], KEYS[3 * k]
  results[k + 2] = renewOne(ARGV[2 * k], ARGV[2 * k + 1], now)
  if k < locks and elapsedUs() >= budgetUs then break end
end
results[2] = elapsedUs()
return results
