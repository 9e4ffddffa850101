#!lua flags=allow-oom
--[[
  Keep a waiting writer's place while the server refuses its tries because it
  is out of memory (maxmemory reached): its queue heartbeat (or, for a reader
  waiting to upgrade, its upgrade heartbeat) moves on, as its try would have
  moved it, so the place does not lapse and a release may still hand it the
  lock. It runs when the server is out of memory, so it only rewrites what is
  there: a deadline of the same length, and the keys' expiry (never sooner).
  It queues nobody, grants nothing, and leaves a lapsed place lapsed. Any
  layout: the queue and the heartbeats live in the hash-mode keys of every
  layout. Running it twice moves the heartbeat on twice (as two tries would).

  KEYS[1] stateKey   the lock's hash
  KEYS[2] leasesKey  the lock's owner -> deadline sorted set
  KEYS[3] queueKey   the lock's waiting writers, in arrival order
  ARGV[1] owner      the waiting writer's owner token
  ARGV[2] beatMs     how long its place lasts without another try (its waitBeatMs)

  Reply: the new heartbeat deadline (server ms; a release that hands it the
         lock names it), or 0 when it holds no live place.
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]
local queueKey = KEYS[3]
local owner = ARGV[1]
local beatMs = tonumber(ARGV[2])

-- @include layout-version
-- @include state

local now = serverTime()
local field
if rcall('ZSCORE', queueKey, owner) then
  field = 'q:' .. owner
elseif rcall('HGET', stateKey, 'u') == owner then
  field = 'ud'
else
  return 0
end
if numberField(field) <= now then return 0 end
local until_ = now + beatMs
rcall('HSET', stateKey, field, int(until_))
if until_ > numberField('qx') then rcall('HSET', stateKey, 'qx', int(until_)) end
rcall('PEXPIREAT', stateKey, int(until_), 'GT')
rcall('PEXPIREAT', leasesKey, int(until_), 'GT')
rcall('PEXPIREAT', queueKey, int(until_), 'GT')
return until_
