#!lua flags=allow-oom
--[[
  Release one read or write hold of an owner, and wake waiters when that may
  let one of them in. The hold is named by the id of the acquire that took it,
  so a repeated release (a resend after a lost reply, or a retry) finds it gone
  and changes nothing.

  KEYS[1] stateKey   the lock's hash
  KEYS[2] leasesKey  the lock's owner -> deadline sorted set
  KEYS[3] queueKey   the lock's waiting writers, in arrival order
  ARGV[1] holder     '<w|r> <holdId> <owner>': the mode ('w' write, 'r'
                     read), the id of the acquire whose hold this releases,
                     and the owner token, last (as the acquire sent it)
  ARGV[2..4]         optional (redlock mode): placeUs, beatMs, leaseMs of a
                     waiting writer giving back a grant that no majority
                     joined; it stays queued at that place, so the lock goes
                     to the earliest place, which may be its own

  Wakes waiters on the lock's channel, named as stateKey; the message is the
  mode, or 'mode:<token>' naming the one waiting writer that may get in next
  (see wakeMessage), or, when this release freed the lock and handed it to
  the longest-waiting writer, 'handed <holdId> <heartbeat> <fence> <token>'
  (see handOver in release-body.lua).

  Reply: holdsLeft (>= 0)  released (now, or by an earlier delivery of this
                          release); the owner's remaining holds of that mode
         -1               the owner holds nothing of that mode (expired, released
                          by force, or this was its last hold and an earlier
                          delivery of this release already released it)
  (Integers, not arrays: the client decodes an integer reply at a fraction
  of the cost, and a release is on every cycle.)

  Refused with the error reply 'RWLOCK_LAYOUT <the lock's layout version>
  <this one>' when another layout version wrote the lock (layout-version.lua);
  nothing is written then.
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]
local queueKey = KEYS[3]
-- Not an argument: one fewer to send and parse on every release.
local channel = stateKey

-- The sole holder of a fresh lock (kept in the hash alone, see fresh-grant.lua)
-- releasing its one hold, before anything else is defined: nobody else has
-- touched the lock since the grant (that would have moved the holder into
-- leasesKey; its own renewals keep it inline), so nobody waits for it, and
-- the whole state goes. `o` is the string the acquire sent, and this
-- release sends the same one.
if rcall('HGET', stateKey, 'o') == ARGV[1] then
  rcall('DEL', stateKey)
  return 0
end

local m, holdId, owner = string.match(ARGV[1], '^(%a) (%S+) (.*)$')
local mode = m == 'w' and 'write' or 'read'
local requeue = nil
if ARGV[2] then requeue = { place = tonumber(ARGV[2]), beatMs = tonumber(ARGV[3]), leaseMs = ARGV[4] } end

-- @include layout-version
-- @include state
-- @include no-peers
-- The owner's other hold, kept in the hash alone: this one is not there (a
-- resend of an earlier release, or a release of the mode it does not hold).
-- Answered as the usual layout would, without moving that holder into it (a
-- release must never need memory).
local sole = rcall('HMGET', stateKey, 'o', 'v')
if sole[1] and sole[2] == LAYOUT_VERSION and string.match(sole[1], '^%a %S+ (.*)$') == owner then
  if string.sub(sole[1], 1, 1) == m then return 1 end
  return -1
end
-- @include release-body
