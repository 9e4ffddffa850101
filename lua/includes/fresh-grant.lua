--[[
  The uncontended acquire, run by the hash-mode scripts before anything else
  is defined (every `local function` costs a closure per call): when the lock
  has no state at all (nothing held, nobody waiting), grant at once and keep
  the holder in the hash alone, in one field: `o` = '<w|r> <holdId> <owner>',
  ARGV[2] as the client sent it (the release sends the same string, so its
  common case compares one field). The hash's expiry is the holder's
  deadline, so no leases zset is written, and the holding's fence is the
  lock's, `f`; while nobody else touches the lock its release only compares
  `o` and deletes the hash (release.lua), its renewal only moves the hash's
  expiry (extend.lua), and any other script first moves the holder into the
  usual layout (spill in state.lua).
  Expects: rcall, stateKey, leasesKey, LAYOUT_VERSION (which it writes in
  `v`, in the same HSET), and the lease in ms as sent, in ARGV[1]: passed on
  as the string it came as, since a Lua number given to redis.call is
  formatted back into a string first, which cost the grant ~1 us, a tenth of
  its server time. The scripts bind this include's names before any other
  local, so the common case runs nothing else; every key and argument costs
  the server 0.2-0.4 us per call, so the common case reads two arguments.
  The fence is the server clock in us (written as a string: Lua's number
  formatting would lose digits); the lock had no earlier fence to stay above.
  The reply is the bare fence: granted for exactly leaseMs.
]]
-- @needs rcall stateKey leasesKey layout-version
if rcall('EXISTS', stateKey, leasesKey) == 0 then
  local t = rcall('TIME')
  rcall('HSET', stateKey, 'f', t[1] .. string.sub('00000' .. t[2], -6), 'o', ARGV[2], 'v', LAYOUT_VERSION)
  rcall('PEXPIRE', stateKey, ARGV[1])
  return t[1] * 1000000 + t[2]
end
