#!lua flags=allow-oom
--[[
  Clean up after an owner that stops waiting or whose acquire had an unknown
  outcome: take it out of the writers' queue (or the upgrade slot) and, if
  asked, drop that acquire's hold or all its holds. With a hold id, the
  queue place goes only if that acquire registered it (not a newer try of
  the same owner). Running it twice changes nothing more.

  KEYS[1] stateKey   the lock's hash
  KEYS[2] leasesKey  the lock's owner -> deadline sorted set
  KEYS[3] queueKey   the lock's waiting writers, in arrival order
  ARGV[1] owner      owner token
  ARGV[2] drop       '': only withdraw; '*': also drop every hold the owner has
                     on this lock; else the id of one hold to drop (the acquire
                     whose outcome was unknown), if the owner has it

  Wakes waiters on the lock's channel, named as stateKey.

  Reply: 1 if anything changed, else 0

  Refused with the error reply 'RWLOCK_LAYOUT <the lock's layout version>
  <this one>' when another layout version wrote the lock (layout-version.lua);
  nothing is written then.
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]
local queueKey = KEYS[3]
local owner = ARGV[1]
local drop = ARGV[2]
local channel = stateKey

-- @include layout-version
-- @include state
-- @include no-peers
-- @include abandon-body
