--[[
  Peer hooks of the legacy and bridge scripts: they keep the two-key layout of
  old processes in step with the lock's hash state, so that an old process and
  a library process refuse each other exactly as two old processes would.
  (The hash-mode scripts include `no-peers` instead: same hooks, doing nothing.)
  Expects these locals bound by the including script, besides those of
  `state`: readKey, writeKey, readersKey, peerChannel.

  The old scripts, which keep running next to the library during a migration:
    read acquire:  EXISTS writeKey -> 0; else SET readKey 1 EX ttl -> 1
    write acquire: EXISTS readKey  -> 0; else SET writeKey 1 EX ttl NX -> 1 if set
    release:       DEL the key
  They never read a value, so the library stores owner tokens in them:
    writeKey   (string) the library writer's token, expiring at its deadline;
               '1' when an old process holds it
    readKey    (string) exists while anybody reads. Its value names a live
               library reader while the library manages it, and is '1' when
               only old readers hold it. A value that names no live library
               reader was written by an old process: its TTL is that reader's
               lease (SET ... EX resets it).
    readersKey (zset)   everybody known to hold readKey, score = deadline
               (server ms): library readers of every mode and state by token,
               and old readers, once seen, as the member '' (an empty string is
               never an owner token). Shared by legacy-mode and bridge-mode
               processes, so neither deletes readKey under the other's readers.
               Old readers count only while readKey exists: an old release
               deletes it for every reader, so old writers go ahead, and so
               does the library.
  syncReadKey keeps readKey existing exactly while readersKey has a live
  member, expiring with the latest of them.

  What old processes can still do to a library holder (documented in
  docs/migration.md): an old reader's release DELs readKey under every reader,
  and an old reader's SET may shorten its TTL. The library restores readKey at
  its holders' next renewal and reports the lease lost if a writer got in.
]]
-- @provides peers
-- @needs rcall stateKey readKey writeKey readersKey peerChannel state

-- No hand-over at release: the two-key layout would have to show the new
-- holder, and a release by a process of the other mode (hash or bridge) could
-- not write it there, nor the holder's own mode keep it in step. Waiting
-- writers take the lock with their own acquire, as before.
local HANDS_OVER = false

local OLD = ''
-- The deadline of an old key without a TTL: it is held until deleted.
local FOREVER = 9e15

local function liveReaderScore(member, now)
  if member == OLD then return nil end
  local s = rcall('ZSCORE', readersKey, member)
  if s and tonumber(s) > now then return tonumber(s) end
  return nil
end

-- Until when (server ms) `key` is held going by its TTL, or nil if it is gone.
local function heldUntil(key, now)
  local ttl = rcall('PTTL', key)
  if ttl == -2 then return nil end
  if ttl == -1 then return FOREVER end
  return now + ttl
end

-- A writer other than `owner` outside this hash state (an old process, or a
-- library writer of another mode): how long it still holds, in ms, or nil.
local function peerWriter(owner, now)
  local value = rcall('GET', writeKey)
  if value == false or value == owner then return nil end
  return math.max(0, (heldUntil(writeKey, now) or now) - now)
end

-- Readers other than `owner` outside this hash state (old processes, or
-- library readers of any state): until the first of them ends, in ms, or nil.
local function peerReaders(owner, now)
  local first
  local value = rcall('GET', readKey)
  if value ~= false and not liveReaderScore(value, now) then
    first = heldUntil(readKey, now)
  end
  local live = rcall('ZRANGE', readersKey, '(' .. int(now), '+inf', 'BYSCORE', 'LIMIT', 0, 3, 'WITHSCORES')
  for i = 1, #live, 2 do
    if live[i] ~= owner and (live[i] ~= OLD or value ~= false) then
      local s = tonumber(live[i + 1])
      if not first or s < first then first = s end
      break
    end
  end
  if first then return math.max(0, first - now) end
  return nil
end

-- Old readers that (re)set readKey since the library last wrote it: remember
-- them as OLD until the key's TTL, before the library rewrites the key; or
-- forget them if readKey is gone.
local function noteOldReaders(now)
  local value = rcall('GET', readKey)
  if value == false then
    rcall('ZREM', readersKey, OLD)
    return
  end
  if liveReaderScore(value, now) then return end
  local untilMs = heldUntil(readKey, now)
  if untilMs and untilMs > now then rcall('ZADD', readersKey, 'GT', int(untilMs), OLD) end
end

-- Make readKey agree with readersKey: it exists while a reader is live,
-- expires with the latest, and names a library reader if one is left, else
-- holds '1' as an old process would have left it. Call noteOldReaders first,
-- before readersKey changes (the value may name a reader just removed).
local function syncReadKey(now)
  rcall('ZREMRANGEBYSCORE', readersKey, '-inf', int(now))
  local top = rcall('ZRANGE', readersKey, 0, 1, 'REV', 'WITHSCORES')
  if #top == 0 then
    rcall('DEL', readKey)
    return
  end
  local latest = tonumber(top[2])
  local value = top[1]
  if value == OLD then value = top[3] or '1' end
  if latest >= FOREVER then
    rcall('SET', readKey, value)
    rcall('PERSIST', readersKey)
  else
    rcall('SET', readKey, value, 'PXAT', int(latest))
    rcall('PEXPIREAT', readersKey, int(latest))
  end
end

-- Make the two-key layout show what `owner` holds in the hash state now: its
-- token on writeKey while it writes (never overwriting another holder's), and
-- its deadline in readersKey while it reads.
local function peerMirror(owner, now)
  noteOldReaders(now)
  local deadline = deadlineOf(owner)
  if deadline and deadline <= now then deadline = nil end
  local current = rcall('GET', writeKey)
  if deadline and rcall('HGET', stateKey, 'w') == owner then
    if current == false or current == owner then
      rcall('SET', writeKey, owner, 'PXAT', int(deadline))
    end
  elseif current == owner then
    rcall('DEL', writeKey)
  end
  if deadline and rcall('HEXISTS', stateKey, 'r:' .. owner) == 1 then
    rcall('ZADD', readersKey, int(deadline), owner)
  else
    rcall('ZREM', readersKey, owner)
  end
  syncReadKey(now)
end

-- False when the two-key layout no longer backs what `owner` holds: its write
-- key is gone or taken, or it reads while somebody else holds the write key.
-- (A read key deleted by an old reader's release is restored by peerMirror.)
local function peerIntact(owner)
  local value = rcall('GET', writeKey)
  if rcall('HGET', stateKey, 'w') == owner then return value == owner end
  return value == false or value == owner
end

-- Wake the waiters of the other layout too.
local function peerWake(message)
  if peerChannel ~= '' then rcall('SPUBLISH', peerChannel, message) end
end
