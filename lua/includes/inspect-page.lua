--[[
  One page of a lock's state, for inspect: the lock may have thousands of
  readers or waiting writers, and Redis runs nothing else while a script
  runs, so one call reads from a cursor for a budget of server time (by the
  clock of clock.lua, read after each step that read a full INSPECT_STEP
  entries), and for at most the caller's count of such steps (the bound
  where that clock stands still), and replies with the cursor to go on
  from. A lock that fits the budget is read in one call, and so is one
  whose every part fits a step, whatever the clock.

  The cursor walks the state hash (HSCAN), then the writers' queue (by rank),
  then, when `readersKey` is given (legacy and bridge mode), the two-key
  layout's readers (by rank): 'h<HSCAN cursor>', 'q<rank>', 'r<rank>';
  '0' starts, and a reply of '0' says the lock was read to its end. An entry
  that stays through the walk is read at least once, possibly twice.

  Reply parts: nowMs, the next cursor, hash fields (flat field, value), the
  deadline of each holder named by the fields read (flat owner, deadline:
  `w`, `u`, `r:<owner>` and the owner in `o`; the sole holder kept in the
  hash alone has the hash's expiry), waiting writers' owner tokens in queue order, the
  two-key layout's readers (flat member, deadline), and the call's clock: when it started
  (server us), how long it ran by its clock (us; 0 where the clock stands still) and the
  full steps it read, for the caller's sizing (src/backends/call-sizer.ts).
]]
-- @needs rcall stateKey leasesKey queueKey state clock

-- Entries one step reads: the budget is checked after each step, so a call
-- runs for at most its budget and one step (30-100 us).
local INSPECT_STEP = 32

local function inspectPage(cursor, budgetUs, maxSteps, readersKey)
  local now, startUs = serverTime()
  -- The owner of the sole holder kept in the hash alone, if any ('<w|r> <holdId> <owner>').
  local sole = string.match(rcall('HGET', stateKey, 'o') or '', '^%a %S+ (.*)$')
  local fields, deadlines, queue, readers, seen = {}, {}, {}, {}, {}
  if cursor == '0' then cursor = 'h0' end
  local function deadline(owner)
    if seen[owner] then return end
    seen[owner] = true
    local d = rcall('ZSCORE', leasesKey, owner)
    if not d and owner == sole then d = tostring(rcall('PEXPIRETIME', stateKey)) end
    if d then
      deadlines[#deadlines + 1] = owner
      deadlines[#deadlines + 1] = d
    end
  end
  -- One step from `cursor`; returns the cursor after it.
  local function step(at)
    local phase, n = string.sub(at, 1, 1), string.sub(at, 2)
    if phase == 'h' then
      local scanned = rcall('HSCAN', stateKey, n, 'COUNT', INSPECT_STEP)
      local flat = scanned[2]
      for i = 1, #flat, 2 do
        local field, value = flat[i], flat[i + 1]
        fields[#fields + 1] = field
        fields[#fields + 1] = value
        if field == 'w' or field == 'u' then
          deadline(value)
        elseif field == 'o' and sole then
          deadline(sole)
        elseif string.sub(field, 1, 2) == 'r:' then
          deadline(string.sub(field, 3))
        end
      end
      if scanned[1] ~= '0' then return 'h' .. scanned[1], true end
      return 'q0', false
    end
    local from = tonumber(n)
    if phase == 'q' then
      local page = rcall('ZRANGE', queueKey, from, from + INSPECT_STEP - 1)
      for _, owner in ipairs(page) do queue[#queue + 1] = owner end
      if #page == INSPECT_STEP then return 'q' .. (from + INSPECT_STEP), true end
      if readersKey then return 'r0', false end
      return '0', false
    end
    local page = rcall('ZRANGE', readersKey, from, from + INSPECT_STEP - 1, 'WITHSCORES')
    for _, entry in ipairs(page) do readers[#readers + 1] = entry end
    if #page == 2 * INSPECT_STEP then return 'r' .. (from + INSPECT_STEP), true end
    return '0', false
  end
  -- The budget ends a call only after a full step: a part read to its end in fewer
  -- entries than a step leaves little to read, so a lock whose every part fits a
  -- step is read in one call, whatever the clock (a slow or loaded server too).
  local full, steps = false, 0
  repeat
    cursor, full = step(cursor)
    if full then steps = steps + 1 end
  until cursor == '0' or (full and (steps >= maxSteps or elapsedUs() >= budgetUs))
  return now, cursor, fields, deadlines, queue, readers, { startUs, elapsedUs(), steps }
end
