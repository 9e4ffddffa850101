#!lua
--[[
  Write a value guarded by a fencing token: refused when the key has already
  seen a higher fence. A writer whose lease ran out while it was paused holds
  an older, lower fence than the holder that took the lock after it, so its
  late write cannot overwrite the newer holder's.

  KEYS[1] key       the guarded key (a string)
  KEYS[2] fenceKey  the highest fence seen for key; same slot as key; no expiry
  ARGV[1] value     the value to write
  ARGV[2] fence     the writer's fence (lease.fence), a whole number
  ARGV[3] ttlMs     the key's time to live in ms; '0' for none

  Reply: { 1, fence }       written; fence is now the highest seen (a string)
         { 0, lastFence }   refused: the key has seen lastFence > fence (a string)
]]
local rcall = redis.call
local key = KEYS[1]
local fenceKey = KEYS[2]
local value = ARGV[1]
local fence = tonumber(ARGV[2])
local ttlMs = tonumber(ARGV[3])

local last = rcall('GET', fenceKey)
if last and tonumber(last) > fence then
  return { 0, last }
end
-- An equal fence is the same holder writing again.
local stored = string.format('%.0f', fence)
rcall('SET', fenceKey, stored)
if ttlMs > 0 then
  rcall('SET', key, value, 'PX', ttlMs)
else
  rcall('SET', key, value)
end
return { 1, stored }
