#!lua
--[[
  Acquire a write hold on one lock: reentrant for its writer, an in-place
  upgrade for its sole reader; writers that wait queue in arrival order.

  KEYS[1] stateKey   the lock's hash
  KEYS[2] leasesKey  the lock's owner -> deadline sorted set
  KEYS[3] queueKey   the lock's waiting writers, in arrival order
  ARGV[1] leaseMs    lease length in ms
  ARGV[2] holder     'w <holdId> <owner>': the owner token, last (it may hold
                     spaces), and the hold id, which names this acquire: a
                     repeated call with the same id (a resend after a lost
                     reply, or the writer's next try finding the hold a
                     release handed it) returns the first grant again, its
                     lease running leaseMs from now (never shortened).
                     A free lock keeps this string as its sole holder (see
                     fresh-grant.lua)
  ARGV[3] waitBeatMs a refused caller waits and re-tries within this many ms:
                     it queues (new readers and writers then go behind it) and
                     drops out of the queue if it stops re-trying; 0 for a try
                     that does not wait
  ARGV[4] queueing   first character: '1' (fair): only the longest-waiting
                     writer may take a free lock; '0': so may any writer that
                     was already waiting when the lock was last freed, but the
                     longest-waiting one is passed over at most MAX_SKIPS times
                     in a row; newcomers (the releaser among them) never pass
                     waiters. Then 'h' if a release that frees the lock may
                     hand it to this writer while it queues (handOver in
                     release-body.lua)
  ARGV[5] place      optional: the writer's place in the queue (us), which
                     replaces the one it had. In redlock mode the same on every
                     node (the median of the places the nodes gave its first
                     queued try, by their own clocks: no client's clock), so
                     every node's queue has one order and their releases hand
                     the lock to the same writer; without it, the server's
                     clock at its first refused try here

  Reply: fence                            granted for exactly leaseMs (an integer:
                                          the common reply is the cheapest to decode)
         { 1, fence, leaseRemainingMs }   granted; the owner already held it for longer
         { 0, retryAfterMs, reason[, queuedUntil, place] }
                                          refused; a writer that queued gets its queue
                                          heartbeat deadline (server ms), which a release
                                          that hands it the lock names, and its place in
                                          the queue (us, a string); reason is
           'write'   another owner holds write (retryAfterMs: its lease left)
           'read'    other owners hold read (retryAfterMs: until the first of their leases ends)
           'queue'   the lock is free but earlier waiting writers go first
           'upgrade' the caller reads and another reader already waits to upgrade:
                     waiting would deadlock both, so the caller must give up

  Refused with the error reply 'RWLOCK_LAYOUT <the lock's layout version>
  <this one>' when another layout version wrote the lock (layout-version.lua);
  nothing is written then.
]]
local rcall = redis.call
local stateKey = KEYS[1]
local leasesKey = KEYS[2]

-- @include layout-version
-- @include fresh-grant

local holdId, owner = string.match(ARGV[2], '^w (%S+) (.*)$')

local queueKey = KEYS[3]
local leaseMs = tonumber(ARGV[1])
local waitBeatMs = tonumber(ARGV[3])
local fair = string.sub(ARGV[4], 1, 1) == '1'
local acceptsHandOver = string.sub(ARGV[4], 2) == 'h'
local place = tonumber(ARGV[5])
-- @include state
-- @include no-peers
-- @include acquire-write-body
