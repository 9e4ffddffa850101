#!lua
--[[
  Acquire a read hold on one lock in legacy or bridge mode: the hash-mode read
  acquire (lua/acquire-read.lua), which also refuses while an old process
  holds the write key, and on a grant also holds the read key as old
  processes do (see lua/includes/legacy.lua for the two-key layout).

  KEYS[1] stateKey    the lock's hash (bridge: the hash-mode lock itself;
                      legacy: its twin beside the legacy keys)
  KEYS[2] leasesKey   the lock's owner -> deadline sorted set
  KEYS[3] queueKey    the lock's waiting writers, in arrival order
  KEYS[4] readKey     the old processes' read key
  KEYS[5] writeKey    the old processes' write key
  KEYS[6] readersKey  everybody known to hold readKey -> deadline
  ARGV[1] leaseMs     lease length in ms
  ARGV[2] holder      'r <holdId> <owner>', as in lua/acquire-read.lua
  ARGV[3] honourIntent  '1': queue behind a waiting writer (writer preference)

  Reply: as lua/acquire-read.lua; 'write' also when an old process (or a
         library writer of the other mode) holds writeKey, retryAfterMs = its TTL.
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]
local queueKey = KEYS[3]
local readKey = KEYS[4]
local writeKey = KEYS[5]
local readersKey = KEYS[6]
local holdId, owner = string.match(ARGV[2], '^r (%S+) (.*)$')
local leaseMs = tonumber(ARGV[1])
local honourIntent = ARGV[3] == '1'
local peerChannel = ''

-- @include layout-version
-- @include state
-- @include legacy
-- @include acquire-read-body
