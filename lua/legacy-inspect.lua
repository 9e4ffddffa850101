#!lua flags=no-writes
--[[
  Read one page of a lock's state in legacy or bridge mode: the hash state
  and the two-key layout, with the server time it was read at; from a
  cursor, for a budget of server time (lua/includes/inspect-page.lua). A
  lock that fits the budget is read whole, atomically, in one call.

  KEYS[1..6] as in lua/legacy-acquire-read.lua
  ARGV[1..3] cursor, budget and steps, as in lua/inspect.lua

  Reply: { nowMs, next cursor, stateFields, deadlines, queue, clock (as in lua/inspect.lua),
           readValue or false, readTtlMs, writeValue or false, writeTtlMs
           (PTTL: -1 without expiry, -2 missing),
           readers (flat member, deadline; member '' = old readers) }
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
-- @include clock
-- @include inspect-page

checkLayout()
local now, cursor, fields, deadlines, queue, readers, clock = inspectPage(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]) or math.huge, readersKey)
return {
  now,
  cursor,
  fields,
  deadlines,
  queue,
  clock,
  rcall('GET', readKey),
  rcall('PTTL', readKey),
  rcall('GET', writeKey),
  rcall('PTTL', writeKey),
  readers,
}
