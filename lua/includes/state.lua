--[[
  Shared helpers of the hash-mode scripts. Expects these locals to be bound
  by the including script: rcall, stateKey, leasesKey.

  Layout:
    stateKey  (hash)  w      owner token of the writer
                      wc     the writer's hold count (reentrancy)
                      r:<o>  owner o's read hold count
                      f      the last fence handed out
                      i, id  writer intent: owner of a waiting writer, and its deadline (ms)
    leasesKey (zset)  member = owner token, score = its lease deadline (server ms)
  An owner holds something exactly while it is a member of leasesKey with a
  deadline in the future; the hash fields of expired owners are pruned lazily.
]]

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

local function pruneExpired(now)
  local expired = rcall('ZRANGE', leasesKey, '-inf', now, 'BYSCORE', 'LIMIT', 0, PRUNE_BATCH)
  for _, owner in ipairs(expired) do
    removeOwner(owner)
  end
end

-- Owners whose lease runs past `now`.
local function liveCount(now)
  return rcall('ZCOUNT', leasesKey, '(' .. int(now), '+inf')
end

-- Live writer intent other than `owner`'s: its owner and deadline, or nil.
local function otherIntent(owner, now)
  local i = rcall('HGET', stateKey, 'i')
  if i and i ~= owner then
    local id = tonumber(rcall('HGET', stateKey, 'id') or '0')
    if id > now then return i, id end
  end
  return nil
end

-- Make both keys expire with the latest live deadline (an abandoned lock
-- disappears by itself), or delete them when nothing is held or pending.
local function refreshExpiry(now)
  local top = rcall('ZRANGE', leasesKey, 0, 0, 'REV', 'WITHSCORES')
  local latest = tonumber(top[2] or '0')
  local intentUntil = tonumber(rcall('HGET', stateKey, 'id') or '0')
  if intentUntil > latest then latest = intentUntil end
  if latest > now then
    rcall('PEXPIREAT', stateKey, int(latest))
    if top[2] then rcall('PEXPIREAT', leasesKey, int(latest)) end
  else
    rcall('DEL', stateKey, leasesKey)
  end
end

-- Record a grant to `owner` until now + leaseMs (never shortening a longer
-- deadline it already has) and return the fence: strictly larger than the
-- last one stored, and never below the server clock in us, so fences keep
-- growing across the deletion or expiry of the hash.
local function grant(owner, now, nowUs, leaseMs)
  local deadline = now + leaseMs
  local current = deadlineOf(owner)
  if current and current > deadline then deadline = current end
  rcall('ZADD', leasesKey, int(deadline), owner)
  local fence = tonumber(rcall('HGET', stateKey, 'f') or '0') + 1
  if nowUs > fence then fence = nowUs end
  rcall('HSET', stateKey, 'f', int(fence))
  refreshExpiry(now)
  return { 1, fence, deadline - now }
end
