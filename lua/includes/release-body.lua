--[[
  The body of a release, shared by the hash-mode and the legacy/bridge
  scripts. Expects: rcall, the keys of `state`, owner, mode, channel, and the
  peer hooks (`no-peers` or `legacy`). Returns the script's reply, as
  documented in lua/release.lua.
]]
local now, nowUs = serverTime()
local mine = spilledDeadlineOf(owner)

-- The caller is the only holder, with one hold, and nobody queues: everything
-- goes in a handful of commands, and waiters that saw it held are woken.
if mine and mine > now and rcall('ZCARD', leasesKey) == 1 and rcall('EXISTS', queueKey) == 0 then
  local held = rcall('HMGET', stateKey, 'w', 'wc', 'r:' .. owner)
  local onlyThisHold
  if mode == 'write' then
    onlyThisHold = held[1] == owner and held[2] == '1' and not held[3]
  else
    onlyThisHold = held[3] == '1' and not held[1]
  end
  if onlyThisHold then
    rcall('DEL', stateKey, leasesKey)
    peerMirror(owner, now)
    rcall('SPUBLISH', channel, mode)
    peerWake(mode)
    return 0
  end
end

pruneExpired(now)
if not mine then return -1 end
if mine <= now then
  removeOwner(owner)
  peerMirror(owner, now)
  refreshExpiry(now)
  return -1
end

local left
if mode == 'write' then
  if rcall('HGET', stateKey, 'w') ~= owner then return -1 end
  left = rcall('HINCRBY', stateKey, 'wc', -1)
  if left == 0 then rcall('HDEL', stateKey, 'w', 'wc') end
else
  local field = 'r:' .. owner
  if not rcall('HGET', stateKey, field) then return -1 end
  left = rcall('HINCRBY', stateKey, field, -1)
  if left == 0 then rcall('HDEL', stateKey, field) end
end
if left > 0 then return left end

if rcall('HGET', stateKey, 'w') ~= owner and rcall('HEXISTS', stateKey, 'r:' .. owner) == 0 then
  rcall('ZREM', leasesKey, owner)
end
peerMirror(owner, now)
-- With one live holder or none left, a waiter may now get in (a writer, a
-- reader behind a writer, or the last reader upgrading). Writers waiting from
-- before this moment may take a lock freed of every holder.
local live = liveCount(now)
if live == 0 then rcall('HSET', stateKey, 'fa', int(nowUs)) end
if live <= 1 then
  rcall('SPUBLISH', channel, wakeMessage(mode, live, now))
  peerWake(mode)
end
refreshExpiry(now)
return 0
