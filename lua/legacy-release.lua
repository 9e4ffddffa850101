#!lua flags=allow-oom
--[[
  Release one read or write hold of an owner in legacy or bridge mode: the
  hash-mode release (lua/release.lua); when the owner's last hold of a mode
  goes, its write key is deleted (only if it is still the owner's), or its
  entry in readersKey, and the read key is deleted once no reader is left
  (an old reader seen meanwhile keeps it, as '1', until that reader's TTL).

  KEYS[1] stateKey    the lock's hash
  KEYS[2] leasesKey   the lock's owner -> deadline sorted set
  KEYS[3] queueKey    the lock's waiting writers, in arrival order
  KEYS[4] readKey     the old processes' read key
  KEYS[5] writeKey    the old processes' write key
  KEYS[6] readersKey  everybody known to hold readKey -> deadline
  ARGV[1] holder      as in lua/release.lua
  ARGV[2] peerChannel the other mode's wake-up channel (same slot), or ''

  Wakes waiters on the lock's channel, named as stateKey, and on peerChannel.

  Reply: as lua/release.lua
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]
local queueKey = KEYS[3]
local readKey = KEYS[4]
local writeKey = KEYS[5]
local readersKey = KEYS[6]
local m, holdId, owner = string.match(ARGV[1], '^(%a) (%S+) (.*)$')
local mode = m == 'w' and 'write' or 'read'
local channel = stateKey
local peerChannel = ARGV[2]
-- Only redlock mode, on the hash-mode scripts, keeps a giving-back writer queued.
local requeue = nil

-- @include layout-version
-- @include state
-- @include legacy
-- @include release-body
