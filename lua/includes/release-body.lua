--[[
  The body of a release, shared by the hash-mode and the legacy/bridge
  scripts. Expects: rcall, the keys of `state`, owner, mode, holdId, channel, and the
  peer hooks (`no-peers` or `legacy`). Returns the script's reply, as
  documented in lua/release.lua.
]]
-- @needs rcall stateKey leasesKey queueKey owner mode holdId channel requeue state peers
local now, nowUs = serverTime()
local mine = spilledDeadlineOf(owner, now)

-- The caller is the only holder, with one hold (this one), and nobody
-- queues: everything goes in a handful of commands, and waiters that saw it
-- held are woken.
if mine and mine > now and rcall('ZCARD', leasesKey) == 1 and rcall('EXISTS', queueKey) == 0 then
  local held = rcall('HMGET', stateKey, 'w', 'wc', 'r:' .. owner)
  local onlyThisHold
  if mode == 'write' then
    onlyThisHold = held[1] == owner and isOnlyHold(held[2], holdId) and not held[3]
  else
    onlyThisHold = isOnlyHold(held[3], holdId) and not held[1]
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
if not mine or mine <= now then
  -- In redlock mode a writer that a majority of nodes handed the lock to may
  -- still queue on this node, under this hold's id, when this node's release
  -- of the writer before comes only after this one: that release must not
  -- hand the lock to a writer that is done with it. (An owner that holds here
  -- is not queued under this id: a grant takes it out of the queue; another
  -- acquire of the same owner queues under another id.) An owner whose holds
  -- all expired holds nothing either.
  -- A give-back (requeue) finds it queued under this id only when an earlier
  -- delivery of the same give-back queued it there: a resend leaves it queued.
  local registered = rcall('HGET', stateKey, 'g:' .. owner)
  if registered and not requeue and string.sub(registered, 1, #holdId + 1) == holdId .. ' ' then dequeue(owner) end
  if mine then
    removeOwner(owner)
    peerMirror(owner, now)
    refreshExpiry(now)
  end
  return -1
end

if mode == 'write' and rcall('HGET', stateKey, 'w') ~= owner then return -1 end
local list = rcall('HGET', stateKey, holdField(mode, owner))
if not list then return -1 end
-- Already released by an earlier delivery of this release: the owner's other
-- holds of the mode stay as they are.
if not hasHold(list, holdId) then return holdCount(list) end

-- A redlock writer giving back a grant no majority joined, at a place that
-- comes first here: the lock would come straight back to it (handOver below).
-- It keeps the hold as it is (its next try finds it, a repeated acquire) and
-- is woken as that hand-over would wake it. Given back and handed again, the
-- hold would look the same as before to a resend of this give-back, which
-- would give it back once more (a new fence, and the lock to any writer that
-- queued earlier meanwhile): kept, the resend finds the same and does the same.
if requeue and HANDS_OVER and mode == 'write' and isOnlyHold(list, holdId) and rcall('HEXISTS', stateKey, 'r:' .. owner) == 0
  and not rcall('ZSCORE', queueKey, owner) and liveCount(now) == 1 then
  local head = queueHead(now)
  local first = head == nil
  if head then
    local at = tonumber(rcall('ZSCORE', queueKey, head))
    first = requeue.place < at or (requeue.place == at and owner < head)
  end
  if first then
    local clientId = string.match(holdId, '^([^.]+)%.')
    local to = channel
    if clientId then to = channel .. '\n' .. clientId end
    rcall('SPUBLISH', to, 'handed ' .. holdId .. ' ' .. int(mine) .. ' ' .. int(fenceOfHolds(list)) .. ' ' .. owner)
    return 0
  end
end
local left = dropHold(mode, owner, holdId)
if left > 0 then return left end

-- Hands a lock freed of every holder to the longest-waiting writer, under the
-- hold id its acquire queued with, so the wake-up message is the grant and the
-- writer holds the lock without another round trip. The handed lease ends
-- with the writer's queue heartbeat (or its own lease length, if shorter): a
-- writer that died frees the lock when its place in the queue would have
-- lapsed, and a live one extends it to its own lease length once it reads the
-- message (or its next try finds the hold, as a repeated acquire). Returns
-- that message,
--   'handed <holdId> <heartbeat deadline> <fence> <token>',
-- and the channel of the writer's client to publish it on (handedChannel in
-- src/keys/keys.ts: only that client hears it; a hold id of another form
-- gets the lock's channel), or nil when nobody queues.
local function handOver()
  local head, beat = queueHead(now)
  if not head then return nil end
  local registered = rcall('HGET', stateKey, 'g:' .. head)
  if not registered then return nil end
  local holdId, leaseMs = string.match(registered, '^(%S+) (%d+)$')
  dequeue(head)
  rcall('HDEL', stateKey, 'sk')
  local granted = grant('write', head, holdId, now, nowUs, math.min(beat - now, tonumber(leaseMs)))
  peerMirror(head, now)
  local fence = granted
  if type(granted) == 'table' then fence = granted[2] end
  local clientId = string.match(holdId, '^([^.]+)%.')
  local to = channel
  if clientId then to = channel .. '\n' .. clientId end
  return 'handed ' .. holdId .. ' ' .. int(beat) .. ' ' .. int(fence) .. ' ' .. head, to
end

forgetIfFree(owner)
peerMirror(owner, now)
-- A redlock writer giving back a grant no majority joined queues again at its
-- place before the hand-over: two such writers each holding one node handed
-- it to each other, for good; now both nodes go to the earlier place.
if requeue then enqueue(owner, now, nowUs, requeue.place, requeue.beatMs, holdId, requeue.leaseMs) end
-- With one live holder or none left, a waiter may now get in (a writer, a
-- reader behind a writer, or the last reader upgrading). Writers waiting from
-- before this moment may take a lock freed of every holder.
local live = liveCount(now)
if live == 0 and HANDS_OVER then
  local handed, writerChannel = handOver()
  if handed then
    rcall('SPUBLISH', writerChannel, handed)
    return 0
  end
  rcall('HSET', stateKey, 'fa', int(nowUs))
end
if live <= 1 then
  rcall('SPUBLISH', channel, wakeMessage(mode, live, now))
  peerWake(mode)
end
refreshExpiry(now)
return 0
