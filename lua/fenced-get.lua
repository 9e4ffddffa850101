#!lua
--[[
  Read a value guarded by fencing tokens, as a reader of the lock: the key's
  fence is raised to the reader's, atomically with the read, so a writer whose
  lease ran out before this reader was granted (it holds a lower fence) can no
  longer write the key. Never refused: readers hold the lock together, and one
  reader's higher fence says nothing against another's.

  KEYS[1] key       the guarded key (a string)
  KEYS[2] fenceKey  the highest fence seen for key; same slot as key; no expiry
  ARGV[1] fence     the reader's fence (lease.fence), a whole number

  Reply: the key's value, or nil
]]
local rcall = redis.call
local key = KEYS[1]
local fenceKey = KEYS[2]
local fence = tonumber(ARGV[1])

local last = rcall('GET', fenceKey)
if not last or tonumber(last) < fence then
  rcall('SET', fenceKey, string.format('%.0f', fence))
end
return rcall('GET', key)
