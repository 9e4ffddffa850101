--[[
  The body of an abandon, shared by the hash-mode and the legacy/bridge
  scripts. Expects: rcall, the keys of `state`, owner, drop, channel, and
  the peer hooks (`no-peers` or `legacy`). Returns the script's reply, as
  documented in lua/abandon.lua.
]]
-- @needs rcall stateKey queueKey owner drop channel state peers
local now = serverTime()
spill(now, false, owner, drop)
local changed = 0
-- The owner's place in the queue goes when it is this try's: a newer try of
-- the same owner (an explicit owner may wait in two acquires at once)
-- registered its own hold id, and keeps the place. A bare withdrawal, or a
-- place with no hold id registered (no hand-over: legacy and bridge), goes.
local registered = rcall('HGET', stateKey, 'g:' .. owner)
local ownPlace = not registered or drop == '' or drop == '*' or string.sub(registered, 1, #drop + 1) == drop .. ' '
if ownPlace and rcall('ZSCORE', queueKey, owner) then
  dequeue(owner)
  changed = 1
end
if rcall('HGET', stateKey, 'u') == owner then
  rcall('HDEL', stateKey, 'u', 'ud')
  changed = 1
end
if drop == '*' then
  if deadlineOf(owner) then
    removeOwner(owner)
    changed = 1
  end
  peerMirror(owner, now)
elseif drop ~= '' and liveDeadlineOf(owner, now) then
  local dropped = dropHold('write', owner, drop) or dropHold('read', owner, drop)
  if dropped then
    forgetIfFree(owner)
    changed = 1
  end
  peerMirror(owner, now)
end
if changed == 1 then
  -- Whoever waited behind this owner may go now.
  rcall('SPUBLISH', channel, 'abandon')
  peerWake('abandon')
  refreshExpiry(now)
end
return changed
