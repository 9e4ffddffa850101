--[[
  Shared helpers of the hash-mode scripts. Expects these locals to be bound
  by the including script: rcall, stateKey, leasesKey, queueKey, and
  LAYOUT_VERSION (include layout-version first).

  Layout:
    stateKey  (hash)  w      owner token of the writer
                      wc     the writer's holds (a hold list, below)
                      r:<o>  owner o's read holds (a hold list)
                      f      the last fence handed out
                      q:<o>  waiting writer o's heartbeat deadline (ms); it re-tries before then
                      g:<o>  '<holdId> <leaseMs>' of waiting writer o's latest try: a release
                             that frees the lock grants it to the queue's head under that id,
                             for at most that long (handOver in release-body.lua)
                      u, ud  a reader waiting to upgrade, and its heartbeat deadline (ms)
                      qx     the latest heartbeat deadline ever set (keeps the keys alive for it)
                      fa     when the lock was last freed of every holder (server us)
                      sk     how often the longest-waiting writer was passed over since it became first
                      v      the layout version that wrote the hash (layout-version.lua); none: 1
                      o      the sole holder of a fresh lock, kept in the hash alone, as
                             '<w|r> <holdId> <owner>': the hash's expiry is its deadline,
                             leasesKey does not exist, no other field names it, and its
                             fence is `f`; see fresh-grant.lua; its renewal moves the
                             hash's expiry (extend.lua), spill() moves it to the usual layout
    leasesKey (zset)  member = owner token, score = its lease deadline (server ms)
    queueKey  (zset)  waiting writers: member = owner token, score = arrival (server us)
  Apart from the sole holder in `o`, an owner holds something exactly while
  it is a member of leasesKey with a deadline in the future; the hash fields
  of expired owners, and waiters whose heartbeat lapsed, are pruned lazily.

  A hold list is '<fence> <holdId> <holdId> ...': the fence of the owner's
  first hold of that mode (its reentrant holds share it), then one id per
  hold, each naming the acquire that took it. A repeated acquire or release
  (a command resent after its reply was lost, or retried by the caller) finds
  its id already there, or already gone, and adds or drops no hold (a repeated
  write acquire runs the owner's lease from then: acquire-write-body.lua).
]]
-- @needs rcall stateKey leasesKey queueKey layout-version

-- How many expired owners one call prunes at most: bounds every call's work,
-- while each expired owner is pruned once, so pruning is amortised O(1).
local PRUNE_BATCH = 8

-- Server time, in ms and in us. Deadlines are the server's, never a client's.
local function serverTime()
  local t = rcall('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- Integers beyond 1e14 lose digits in Lua's default number formatting.
local function int(n)
  return string.format('%.0f', n)
end

-- Hold lists (see the layout above).
local function holdCount(list)
  local _, n = string.gsub(list, ' ', ' ')
  return n
end

local function hasHold(list, holdId)
  return string.find(list .. ' ', ' ' .. holdId .. ' ', 1, true) ~= nil
end

-- The list without `holdId` (which it must contain).
local function withoutHold(list, holdId)
  local padded = list .. ' '
  local from, to = string.find(padded, ' ' .. holdId .. ' ', 1, true)
  local rest = string.sub(padded, 1, from - 1) .. string.sub(padded, to)
  return string.sub(rest, 1, -2)
end

-- True when `list` (or false) holds exactly the one hold `holdId`.
local function isOnlyHold(list, holdId)
  return list ~= false and string.find(list, ' ', 1, true) == #list - #holdId and string.sub(list, -#holdId) == holdId
end

local function fenceOfHolds(list)
  return tonumber(string.match(list, '^%d+'))
end

-- The hash field of an owner's holds of `mode`.
local function holdField(mode, owner)
  if mode == 'write' then return 'wc' end
  return 'r:' .. owner
end

local function numberField(field)
  return tonumber(rcall('HGET', stateKey, field) or '0')
end

local function deadlineOf(owner)
  local d = rcall('ZSCORE', leasesKey, owner)
  if d then return tonumber(d) end
  return nil
end

-- Forget every hold of `owner`.
local function removeOwner(owner)
  rcall('ZREM', leasesKey, owner)
  if rcall('HGET', stateKey, 'w') == owner then
    rcall('HDEL', stateKey, 'w', 'wc')
  end
  rcall('HDEL', stateKey, 'r:' .. owner)
end

-- The owner's deadline while it holds something; an expired owner's holds
-- are forgotten first, so it acquires afresh.
local function liveDeadlineOf(owner, now)
  local d = deadlineOf(owner)
  if d and d <= now then
    removeOwner(owner)
    return nil
  end
  return d
end

local function pruneExpired(now)
  local expired = rcall('ZRANGE', leasesKey, '-inf', int(now), 'BYSCORE', 'LIMIT', 0, PRUNE_BATCH)
  for _, owner in ipairs(expired) do
    removeOwner(owner)
  end
end

-- Owners whose lease runs past `now`.
local function liveCount(now)
  return rcall('ZCOUNT', leasesKey, '(' .. int(now), '+inf')
end

local function dequeue(owner)
  rcall('ZREM', queueKey, owner)
  rcall('HDEL', stateKey, 'q:' .. owner, 'g:' .. owner)
end

-- The first waiting writer whose heartbeat is live, and that heartbeat;
-- waiters that stopped re-trying are dropped on the way (each once).
local function queueHead(now)
  while true do
    local head = rcall('ZRANGE', queueKey, 0, 0)[1]
    if not head then return nil end
    local beat = numberField('q:' .. head)
    if beat > now then return head, beat end
    dequeue(head)
  end
end

local function isQueued(owner, now)
  return rcall('ZSCORE', queueKey, owner) ~= false and numberField('q:' .. owner) > now
end

-- Sets heartbeat `field` (and any further field/value pairs) to now + ms;
-- returns that deadline.
local function heartbeat(field, now, ms, ...)
  local until_ = now + ms
  rcall('HSET', stateKey, field, int(until_), ...)
  if until_ > numberField('qx') then rcall('HSET', stateKey, 'qx', int(until_)) end
  return until_
end

-- Join (or stay in) the writers' queue, keeping the place of first arrival
-- (the server's clock, nowUs), or at `place` when the caller names one (redlock
-- mode: the same on every node); with `holdId`, as the acquire a release may
-- hand the lock to under that id, for at most `leaseMs`. Returns the new
-- heartbeat deadline. (A waiter may create the hash: in legacy and bridge mode
-- an old process's keys can block it while the hash does not exist; so it
-- writes the version.)
local function enqueue(owner, now, nowUs, place, ms, holdId, leaseMs)
  if place then
    rcall('ZADD', queueKey, int(place), owner)
  else
    rcall('ZADD', queueKey, 'NX', int(nowUs), owner)
  end
  if holdId then return heartbeat('q:' .. owner, now, ms, 'g:' .. owner, holdId .. ' ' .. leaseMs, 'v', LAYOUT_VERSION) end
  return heartbeat('q:' .. owner, now, ms, 'v', LAYOUT_VERSION)
end

-- A reader waiting to upgrade other than `owner`, or nil.
local function otherUpgrader(owner, now)
  local u = rcall('HGET', stateKey, 'u')
  if u and u ~= owner and numberField('ud') > now and rcall('HEXISTS', stateKey, 'r:' .. u) == 1 then
    return u
  end
  return nil
end

-- A live waiting writer other than `owner` (an upgrader first, else the queue's
-- head) and until when it is known to wait; new readers queue behind it.
local function otherIntent(owner, now)
  local u = otherUpgrader(owner, now)
  if u then return u, numberField('ud') end
  local head, beat = queueHead(now)
  if head and head ~= owner then return head, beat end
  return nil
end

-- What a release publishes: its mode, and, when one waiting writer is next
-- (a live reader waiting to upgrade, else the queue's head once no holder is
-- left), ':' and that writer's token. Waiting writers other than the one
-- named sleep on (they could not get in), so a release wakes one writer, not
-- the herd; waiting readers wake on every message.
local function wakeMessage(mode, live, now)
  local u = otherUpgrader('', now)
  if u and (deadlineOf(u) or 0) > now then return mode .. ':' .. u end
  if live == 0 then
    local head = queueHead(now)
    if head then return mode .. ':' .. head end
  end
  return mode
end

-- Make every key of the lock expire with the latest live deadline or waiter
-- heartbeat (an abandoned lock disappears by itself), or delete them all when
-- nothing is held and nobody waits.
local function refreshExpiry(now)
  local top = rcall('ZRANGE', leasesKey, 0, 0, 'REV', 'WITHSCORES')
  local latest = tonumber(top[2] or '0')
  if rcall('EXISTS', queueKey) == 1 or rcall('HEXISTS', stateKey, 'u') == 1 then
    local beats = numberField('qx')
    if beats > latest then latest = beats end
  end
  if latest > now then
    rcall('PEXPIREAT', stateKey, int(latest))
    rcall('PEXPIREAT', leasesKey, int(latest))
    rcall('PEXPIREAT', queueKey, int(latest))
  else
    rcall('DEL', stateKey, leasesKey, queueKey)
  end
end

-- Refuses a lock written by another layout version (its `v`): the script ends
-- with this error reply, naming both versions, before it has written
-- anything (src/backends/replies.ts turns it into a LayoutVersionError).
local function refuseLayout(version)
  error({ err = 'RWLOCK_LAYOUT ' .. version .. ' ' .. LAYOUT_VERSION })
end

-- The layout version that wrote the hash, from its fields `v`, `f` and `qx`,
-- or nil when there is no hash: one without `v` was written by layout 1
-- (layout-version.lua), and every hash has `v` (this layout writes it), `f`
-- (any grant) or `qx` (any waiter).
local function layoutOf(v, f, qx)
  if v then return v end
  if f or qx then return '1' end
  return nil
end

-- For inspect, which reads the lock but no spill.
local function checkLayout()
  local held = rcall('HMGET', stateKey, 'v', 'f', 'qx')
  local layout = layoutOf(held[1], held[2], held[3])
  if layout and layout ~= LAYOUT_VERSION then refuseLayout(layout) end
end

-- Every path but the fresh grant and its release starts here (the hash-mode
-- scripts run those before any of this is defined): a lock of another layout
-- version is refused (its `v` comes with the fields spill reads anyway: no
-- command more), and a sole holder kept in the hash alone moves into
-- leasesKey, with the hash's expiry as its deadline, and its holds into the
-- field of its mode, with the fence in front, so the code below sees one
-- layout. (While `o` is set, nothing but the holder's own renewals has
-- touched the lock since the grant, and those keep the hash's expiry at its
-- deadline, so the hash expires exactly then, and `f` is its fence.)
-- A sole holder whose deadline is `now` or past holds nothing: it goes
-- (moved, it would keep its holds in the hash while its leasesKey, expiring
-- at that deadline, is gone at once, so its next grant would take up its
-- expired holds and their fence again).
-- Renewing, another layout's lock is not refused but reported: false, and
-- nothing written (one such lock must not fail a whole batch).
-- With `owner` (a script that acts on that owner's own holds or place), a sole
-- holder that is another owner stays where it is: then nothing of `owner` is
-- in the lock (whoever queues, or holds beside it, moved it out first), and
-- moving it would only grow the lock, where a release, renewal or give-back
-- must never need memory (they run when the server is out of memory). So does
-- the owner's own, with `holdId` (a script that acts on that one hold: '*'
-- every hold, '' none) when it is another hold: the script has nothing to do.
local function spill(now, renewing, owner, holdId)
  local held = rcall('HMGET', stateKey, 'o', 'f', 'v', 'qx')
  local layout = layoutOf(held[3], held[2], held[4])
  if layout and layout ~= LAYOUT_VERSION then
    if renewing then return false end
    refuseLayout(layout)
  end
  local sole = held[1]
  if not sole then return true end
  local m, hold, o = string.match(sole, '^(%a) (%S+) (.*)$')
  if owner and (o ~= owner or (holdId and holdId ~= '*' and holdId ~= hold)) then return true end
  local deadline = rcall('PEXPIRETIME', stateKey)
  rcall('HDEL', stateKey, 'o')
  if deadline <= now then return true end
  rcall('ZADD', leasesKey, deadline, o)
  rcall('PEXPIREAT', leasesKey, deadline)
  local holds = held[2] .. ' ' .. hold
  if m == 'w' then
    rcall('HSET', stateKey, 'w', o, 'wc', holds)
  else
    rcall('HSET', stateKey, 'r:' .. o, holds)
  end
  return true
end

-- The owner's deadline in leasesKey, for scripts that act on the caller's own
-- hold (release, extend). Only when the owner is not there can it be a sole
-- holder kept in the hash alone (`o` and leasesKey never coexist), so only
-- then is spill() needed (and only when that holder is the owner): a renewal
-- of the usual layout reads nothing more.
-- (Nor does it check the layout: only this layout put the owner there, and
-- another one refuses this lock rather than write it.) Renewing, false when
-- the lock is another layout version's (see spill).
local function spilledDeadlineOf(owner, now, renewing)
  local d = deadlineOf(owner)
  if d then return d end
  if not spill(now, renewing, owner) then return false end
  return deadlineOf(owner)
end

-- Record a grant of hold `holdId` of `mode` to `owner` until now + leaseMs
-- (never shortening a longer deadline it already has) and return the reply:
-- the bare fence when the lease runs exactly leaseMs, else { 1, fence,
-- leaseRemainingMs }. The owner's first hold of a mode gets a fence strictly
-- larger than the last one stored, and never below the server clock in us,
-- so fences keep growing across the deletion or expiry of the hash; its
-- reentrant holds get the same fence.
local function grant(mode, owner, holdId, now, nowUs, leaseMs)
  local deadline = now + leaseMs
  local current = deadlineOf(owner)
  if current and current > deadline then deadline = current end
  rcall('ZADD', leasesKey, int(deadline), owner)
  local field = holdField(mode, owner)
  local list = rcall('HGET', stateKey, field)
  local fence
  if list then
    fence = fenceOfHolds(list)
    list = list .. ' ' .. holdId
  else
    fence = numberField('f') + 1
    if nowUs > fence then fence = nowUs end
    -- A grant may create the hash (the legacy and bridge scripts have no fresh grant).
    rcall('HSET', stateKey, 'f', int(fence), 'v', LAYOUT_VERSION)
    list = int(fence) .. ' ' .. holdId
  end
  if mode == 'write' then
    rcall('HSET', stateKey, 'w', owner, 'wc', list)
  else
    rcall('HSET', stateKey, field, list)
  end
  refreshExpiry(now)
  if deadline - now == leaseMs then return fence end
  return { 1, fence, deadline - now }
end

-- The reply again when `holdId` is already one of the owner's live holds of
-- `mode` (a repeated acquire: it adds no hold), else nil.
local function repeatedGrant(mode, owner, holdId, mine, now, leaseMs)
  if not mine then return nil end
  local list = rcall('HGET', stateKey, holdField(mode, owner))
  if not list or not hasHold(list, holdId) then return nil end
  if mode == 'write' and rcall('HGET', stateKey, 'w') ~= owner then return nil end
  local fence = fenceOfHolds(list)
  if mine - now == leaseMs then return fence end
  return { 1, fence, mine - now }
end

-- Drop hold `holdId` of `mode` from `owner`, if it has it; returns the holds
-- of that mode left, or nil when it did not have that hold.
local function dropHold(mode, owner, holdId)
  if mode == 'write' and rcall('HGET', stateKey, 'w') ~= owner then return nil end
  local field = holdField(mode, owner)
  local list = rcall('HGET', stateKey, field)
  if not list or not hasHold(list, holdId) then return nil end
  list = withoutHold(list, holdId)
  local left = holdCount(list)
  if left > 0 then
    rcall('HSET', stateKey, field, list)
  elseif mode == 'write' then
    rcall('HDEL', stateKey, 'w', 'wc')
  else
    rcall('HDEL', stateKey, field)
  end
  return left
end

-- After an owner's holds changed: it leaves leasesKey once it holds nothing.
local function forgetIfFree(owner)
  if rcall('HGET', stateKey, 'w') ~= owner and rcall('HEXISTS', stateKey, 'r:' .. owner) == 0 then
    rcall('ZREM', leasesKey, owner)
  end
end
