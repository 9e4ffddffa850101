#!lua flags=allow-oom
--[[
  Clean up after an owner that stops waiting or whose acquire had an unknown
  outcome, in legacy or bridge mode: as lua/abandon.lua (here no place
  registers a hold id, so a place always goes), and dropping the owner's
  holds also drops them from the two-key layout.

  KEYS[1] stateKey    the lock's hash
  KEYS[2] leasesKey   the lock's owner -> deadline sorted set
  KEYS[3] queueKey    the lock's waiting writers, in arrival order
  KEYS[4] readKey     the old processes' read key
  KEYS[5] writeKey    the old processes' write key
  KEYS[6] readersKey  everybody known to hold readKey -> deadline
  ARGV[1] owner       owner token
  ARGV[2] drop        '': only withdraw; '*': also drop every hold the owner
                      has on this lock; else the id of one hold to drop (the
                      acquire whose outcome was unknown), if the owner has it
  ARGV[3] peerChannel the other mode's wake-up channel (same slot), or ''

  Wakes waiters on the lock's channel, named as stateKey, and on peerChannel.

  Reply: 1 if anything changed, else 0
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]
local queueKey = KEYS[3]
local readKey = KEYS[4]
local writeKey = KEYS[5]
local readersKey = KEYS[6]
local owner = ARGV[1]
local drop = ARGV[2]
local channel = stateKey
local peerChannel = ARGV[3]

-- @include layout-version
-- @include state
-- @include legacy
-- @include abandon-body
