--[[
  Read one lock's whole state in legacy or bridge mode: the hash state and
  the two-key layout, with the server time it was read at.

  KEYS[1..6] as in lua/legacy-acquire-read.lua

  Reply: { nowMs, stateFields (flat HGETALL array), leases (flat owner, deadline array),
           queue (waiting writers' owner tokens, first come first),
           readValue or false, readTtlMs, writeValue or false, writeTtlMs
           (PTTL: -1 without expiry, -2 missing),
           readers (flat member, deadline array; member '' = old readers) }
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]
local queueKey = KEYS[3]
local readKey = KEYS[4]
local writeKey = KEYS[5]
local readersKey = KEYS[6]

-- @include layout-version
-- @include state

checkLayout()
local now = serverTime()
return {
  now,
  rcall('HGETALL', stateKey),
  leaseList(),
  rcall('ZRANGE', queueKey, 0, -1),
  rcall('GET', readKey),
  rcall('PTTL', readKey),
  rcall('GET', writeKey),
  rcall('PTTL', writeKey),
  rcall('ZRANGE', readersKey, 0, -1, 'WITHSCORES'),
}
