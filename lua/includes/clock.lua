--[[
  A clock that moves while a script runs, for the scripts that stop after a
  budget of server time (extend, inspect). TIME stands still inside a script
  on Redis 7.2 and later and on Valkey (it answers the time the script
  started); `os.clock()` (the server's CPU time: Redis 7.4 and later, Valkey
  8 and later) moves. Redis 7.0 has no `os`, and its TIME moves. On Redis
  7.2 and Valkey 7.2, which have neither, elapsedUs() stays 0: the caller
  sizes its calls by what they are measured to cost
  (src/backends/call-sizer.ts).
]]
-- @needs rcall

-- (rawget: reading a missing global is an error in a script.)
local osLib = rawget(_G, 'os')
local cpuClock = osLib and osLib.clock

local function clockUs()
  if cpuClock then return cpuClock() * 1000000 end
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local clockStartUs = clockUs()

-- Microseconds since the script started, by a clock that moves where the server has one.
local function elapsedUs()
  return math.floor(clockUs() - clockStartUs)
end
