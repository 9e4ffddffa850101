--[[
  The uncontended acquire, run by the hash-mode scripts before anything else
  is defined (every `local function` costs a closure per call): when the lock
  has no state at all (nothing held, nobody waiting), grant at once and keep
  the holder in the hash alone. `o` names it and the hash's expiry is its
  deadline, so no leases zset is written, and its hold list is the hold id
  alone (the holding's fence is the lock's, `f`); while nobody else touches
  the lock its release only compares that id and deletes the hash
  (release.lua), and any other script first moves it into the usual layout
  (spill in state.lua).
  Expects: rcall, stateKey, leasesKey, owner, holdId, LAYOUT_VERSION (which
  it writes in `v`, in the same HSET), FRESH_WRITE (true for a write hold,
  false for a read hold), and the lease in ms as sent, in ARGV[2]: passed on
  as the string it came as, since a Lua number given to redis.call is
  formatted back into a string first, which cost the grant ~1 us, a tenth of
  its server time. The scripts bind this include's names before any other
  local, so the common case runs nothing else.
  The fence is the server clock in us (written as a string: Lua's number
  formatting would lose digits); the lock had no earlier fence to stay above.
  The reply is the bare fence: granted for exactly leaseMs.
]]
-- @needs rcall stateKey leasesKey owner holdId FRESH_WRITE layout-version
if rcall('EXISTS', stateKey, leasesKey) == 0 then
  local t = rcall('TIME')
  local fence = t[1] .. string.sub('00000' .. t[2], -6)
  if FRESH_WRITE then
    rcall('HSET', stateKey, 'f', fence, 'o', owner, 'w', owner, 'wc', holdId, 'v', LAYOUT_VERSION)
  else
    rcall('HSET', stateKey, 'f', fence, 'o', owner, 'r:' .. owner, holdId, 'v', LAYOUT_VERSION)
  end
  rcall('PEXPIRE', stateKey, ARGV[2])
  return t[1] * 1000000 + t[2]
end
