--[[
  The version of the lock's storage layout (docs/upgrades.md), kept in the
  state hash's field `v`. It changes only when a change to the layout cannot
  be shared with the code before it; two library versions share a lock
  exactly when their layout versions are equal. A hash without `v` was
  written before the version existed, by layout 1. Layout 2 keeps a fresh
  lock's sole holder in one field, `o` = '<w|r> <holdId> <owner>', where
  layout 1 kept its token there and its holds in `w`/`wc` or `r:<owner>`.
  Written where a script creates the hash (fresh-grant.lua; grant and enqueue
  in state.lua), checked where a script first reads the state (spill and
  checkLayout in state.lua). A bare local, so that the fresh grant, which
  runs before any helper is defined, can write it at no cost.
]]
local LAYOUT_VERSION = '2'
