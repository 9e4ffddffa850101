--[[
  Peer hooks of the hash-mode scripts. The acquire, release and abandon bodies
  call these hooks so that the legacy and bridge scripts can keep a second
  layout in step (see lua/includes/legacy.lua); hash mode has none, so every
  hook does nothing.
]]
-- @provides peers

-- A release hands a freed lock to the longest-waiting writer (release-body.lua):
-- nothing outside the hash has to show the new holder.
local HANDS_OVER = true

-- A writer outside this hash state: ms it still holds, or nil.
local function peerWriter(_, _) return nil end
-- Readers outside this hash state other than the owner: ms until the first ends, or nil.
local function peerReaders(_, _) return nil end
-- Make the other layout show what the owner holds now.
local function peerMirror(_, _) end
-- Wake the other layout's waiters.
local function peerWake(_) end
