--[[
  The renewal of one lease, shared by lua/extend.lua and
  lua/extend-across-slots.lua: renewOne(owner, leaseArg, now) renews the
  lease of `owner` on the lock whose keys stateKey, leasesKey and queueKey
  name now (the scripts bind them to each lock in turn), by leaseArg ms (as
  sent: a PEXPIRE passes it on unchanged). Returns the lease left in ms, or
  0 when the owner no longer holds the lock (also when another layout
  version took it since: nothing of it is written then).
  A sole holder kept in the hash alone (fresh-grant.lua) stays there: its
  renewal moves the hash's expiry, which is its deadline, and nothing else.
]]
-- @needs rcall stateKey leasesKey queueKey layout-version state
local function renewOne(owner, leaseArg, now)
  local leaseMs = tonumber(leaseArg)
  local mine = deadlineOf(owner)
  if not mine then
    -- Not in leasesKey: a sole holder kept in the hash alone, or lost. Inline,
    -- its deadline is the hash's expiry, so its renewal is one PEXPIRE and it
    -- stays inline (no sorted set; its release stays the two-command one).
    -- Another owner inline, a lock of another layout version, or a deadline
    -- that is now (the hash lives through the ms of its expiry, the lease
    -- does not): this lease is lost, and nothing is written.
    local sole = rcall('HMGET', stateKey, 'o', 'v')
    if sole[1] and sole[2] == LAYOUT_VERSION and string.match(sole[1], '^%a %S+ (.*)$') == owner
      and rcall('PEXPIRETIME', stateKey) > now then
      rcall('PEXPIRE', stateKey, leaseArg)
      return leaseMs
    else
      return 0
    end
  elseif mine > now then
    local deadline = int(now + leaseMs)
    rcall('ZADD', leasesKey, deadline, owner)
    -- The keys must live at least until the new deadline, and never need to
    -- go sooner than they already do (GT): no scan for the latest deadline.
    rcall('PEXPIREAT', stateKey, deadline, 'GT')
    rcall('PEXPIREAT', leasesKey, deadline, 'GT')
    rcall('PEXPIREAT', queueKey, deadline, 'GT')
    return leaseMs
  else
    removeOwner(owner)
    refreshExpiry(now)
    return 0
  end
end
