#!lua
--[[
  Acquire a write hold on one lock in legacy or bridge mode: the hash-mode
  write acquire (lua/acquire-write.lua), which also refuses while an old
  process holds the write key or anybody else holds the read key, and on a
  grant also sets the write key as old processes do (see
  lua/includes/legacy.lua for the two-key layout).

  KEYS[1] stateKey    the lock's hash (bridge: the hash-mode lock itself;
                      legacy: its twin beside the legacy keys)
  KEYS[2] leasesKey   the lock's owner -> deadline sorted set
  KEYS[3] queueKey    the lock's waiting writers, in arrival order
  KEYS[4] readKey     the old processes' read key
  KEYS[5] writeKey    the old processes' write key
  KEYS[6] readersKey  everybody known to hold readKey -> deadline
  ARGV[1] leaseMs     lease length in ms
  ARGV[2] holder      'w <holdId> <owner>', as in lua/acquire-write.lua
  ARGV[3] waitBeatMs  as in lua/acquire-write.lua
  ARGV[4] queueing    as in lua/acquire-write.lua (this layout never hands over)

  Reply: as lua/acquire-write.lua; 'write' also when an old process holds
         writeKey, 'read' also when old processes (or library readers of the
         other mode) hold readKey, retryAfterMs = until the first of them ends.
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]
local queueKey = KEYS[3]
local readKey = KEYS[4]
local writeKey = KEYS[5]
local readersKey = KEYS[6]
local holdId, owner = string.match(ARGV[2], '^w (%S+) (.*)$')
local leaseMs = tonumber(ARGV[1])
local waitBeatMs = tonumber(ARGV[3])
local fair = string.sub(ARGV[4], 1, 1) == '1'
local acceptsHandOver = false
local place = nil -- never in redlock mode
local peerChannel = ''

-- @include layout-version
-- @include state
-- @include legacy
-- @include acquire-write-body
