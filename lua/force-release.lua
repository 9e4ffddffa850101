#!lua flags=allow-oom
--[[
  An operator's force-release: delete every key of one lock, whoever holds
  it, and wake its waiters so they try again at once. Holders are not told;
  they find the lock lost at their next renewal. Running it twice deletes
  nothing more (and wakes the waiters again, which is harmless).

  KEYS      every key of the lock (one Cluster slot)
  ARGV      the channels to wake: the lock's, and in legacy/bridge mode its twin's

  Reply: the names of the keys that existed and were deleted
]]
-- UNLINK, not DEL: a lock with thousands of readers has a hash and a sorted set
-- of thousands of entries, which DEL frees while the server waits (4 ms for
-- 10,000 readers); UNLINK frees them on a background thread. A user whose ACL
-- grants DEL but not UNLINK (the documented rules before UNLINK) gets DEL.
local function remove(key)
  local n = redis.pcall('UNLINK', key)
  if type(n) == 'table' and n.err then return redis.call('DEL', key) end
  return n
end

local deleted = {}
for _, key in ipairs(KEYS) do
  if remove(key) == 1 then deleted[#deleted + 1] = key end
end
for _, channel in ipairs(ARGV) do
  redis.call('SPUBLISH', channel, 'release')
end
return deleted
