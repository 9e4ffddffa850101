#!lua flags=no-writes
--[[
  Read one page of a lock's state, with the server time it was read at: from
  a cursor, for a budget of server time (lua/includes/inspect-page.lua). A
  lock that fits the budget is read whole, atomically, in one call.

  KEYS[1] stateKey   the lock's hash
  KEYS[2] leasesKey  the lock's owner -> deadline sorted set
  KEYS[3] queueKey   the lock's waiting writers, in arrival order
  ARGV[1] cursor     '0' to start, else the cursor the last page replied
  ARGV[2] budget     in microseconds
  ARGV[3] steps      full steps one call reads at most (none: no limit but the budget)

  Reply: { nowMs, next cursor ('0': read to the end), stateFields (flat field,
           value), deadlines (flat owner, deadline, of the holders those
           fields name), queue (waiting writers' owner tokens, first come first),
           clock ({ started at, server us; ran for, us by its clock; full steps read }) }

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
-- @include clock
-- @include inspect-page

checkLayout()
local now, cursor, fields, deadlines, queue, _, clock = inspectPage(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]) or math.huge)
return { now, cursor, fields, deadlines, queue, clock }
