#!lua
--[[
  Acquire a read hold on one lock.

  KEYS[1] stateKey   the lock's hash
  KEYS[2] leasesKey  the lock's owner -> deadline sorted set
  KEYS[3] queueKey   the lock's waiting writers, in arrival order
  ARGV[1] leaseMs    lease length in ms
  ARGV[2] holder     'r <holdId> <owner>', as in lua/acquire-write.lua
  ARGV[3] honourIntent  '1': queue behind a waiting writer (writer preference)

  Reply: fence                            granted for exactly leaseMs (an integer:
                                          the common reply is the cheapest to decode)
         { 1, fence, leaseRemainingMs }   granted; the owner already held it for longer
         { 0, retryAfterMs, reason }      refused; reason is
           'write'  another owner holds the write lock (retryAfterMs: its lease left)
           'intent' a writer waits, or a reader waits to upgrade (retryAfterMs: until it
                    must have re-tried)

  Refused with the error reply 'RWLOCK_LAYOUT <the lock's layout version>
  <this one>' when another layout version wrote the lock (layout-version.lua);
  nothing is written then.
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]

-- @include layout-version
-- @include fresh-grant

local holdId, owner = string.match(ARGV[2], '^r (%S+) (.*)$')
local queueKey = KEYS[3]
local leaseMs = tonumber(ARGV[1])
local honourIntent = ARGV[3] == '1'
-- @include state
-- @include no-peers
-- @include acquire-read-body
