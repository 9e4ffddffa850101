/**
 * The model checker's build of the scripts: every `redis.call` goes through a
 * local wrapper that reads the time from a virtual clock and keeps key expiry
 * on it, and records what the script publishes instead of publishing it.
 *
 * - `TIME` answers the virtual clock, {@link NOW_KEY} (ms), with one more
 *   microsecond for each script run since the checker set it
 *   ({@link TICK_KEY}): TIME stands still within a script (as on Redis 7.2
 *   and later), and two calls never see the same microsecond.
 * - Expiry: a deadline `t` (virtual ms) is stored as `t + OFFSET_MS`, far in
 *   the real future, so no key ever expires by the real clock; PEXPIRETIME
 *   and PTTL answer by the virtual clock, and a deadline at or before the
 *   virtual now deletes the key, as Redis does. The checker deletes the keys
 *   whose deadline the virtual clock passed (a key lives while now <= its
 *   deadline, as in Redis).
 * - `SPUBLISH channel message` appends both to {@link PUBLISHED_KEY}.
 *
 * The wrapped commands are the ones the scripts use with a time argument;
 * every other command runs as it is.
 */
import { LUA_SOURCES, type LuaScriptName } from '../../src/lua/scripts.generated.js';

/** The virtual clock, in ms. */
export const NOW_KEY = 'model:now';
/** Script runs since the clock was set: the microsecond within the ms of the next run's TIME. */
export const TICK_KEY = 'model:tick';
/** What the scripts published: channel, message, channel, message, ... */
export const PUBLISHED_KEY = 'model:published';
/** Virtual ms 0 is this real ms (the year 2096): no key of the model expires by the real clock. */
export const OFFSET_MS = 4_000_000_000_000;

const PROLOGUE = `local modelCall
do
  local realCall = redis.call
  local OFFSET = ${OFFSET_MS}
  local nowMs = tonumber(realCall('GET', '${NOW_KEY}'))
  local tick = realCall('INCR', '${TICK_KEY}')
  local function fmt(n) return string.format('%.0f', n) end
  local function expireAt(key, at, gt)
    if gt then return realCall('PEXPIREAT', key, fmt(at + OFFSET), 'GT') end
    if at <= nowMs then return realCall('DEL', key) end
    return realCall('PEXPIREAT', key, fmt(at + OFFSET))
  end
  modelCall = function(command, ...)
    local name = string.upper(command)
    local args = { ... }
    if name == 'TIME' then
      return { fmt(math.floor(nowMs / 1000)), fmt((nowMs % 1000) * 1000 + tick) }
    elseif name == 'PEXPIRE' then
      return expireAt(args[1], nowMs + tonumber(args[2]), args[3] == 'GT')
    elseif name == 'PEXPIREAT' then
      return expireAt(args[1], tonumber(args[2]), args[3] == 'GT')
    elseif name == 'PEXPIRETIME' or name == 'PTTL' then
      local t = realCall('PEXPIRETIME', args[1])
      if t < 0 then return t end
      if name == 'PTTL' then return t - OFFSET - nowMs end
      return t - OFFSET
    elseif name == 'SET' and args[3] then
      local unit, value = string.upper(args[3]), tonumber(args[4])
      local at = value
      if unit == 'PX' then at = nowMs + value elseif unit == 'EX' then at = nowMs + 1000 * value end
      if at <= nowMs then
        realCall('DEL', args[1])
        return { ok = 'OK' }
      end
      return realCall('SET', args[1], args[2], 'PXAT', fmt(at + OFFSET))
    elseif name == 'SPUBLISH' then
      realCall('RPUSH', '${PUBLISHED_KEY}', args[1], args[2])
      return 0
    end
    return realCall(command, ...)
  end
end
`;

/** `source` on the virtual clock (after a `#!lua` line, which must stay first). */
export function onVirtualClock(source: string): string {
  const body = source.replace(/\bredis\.call\b/g, 'modelCall');
  const shebang = /^#!lua[^\n]*\n/.exec(body)?.[0] ?? '';
  return shebang + PROLOGUE + body.slice(shebang.length);
}

/** Every script of `sources` (the library's by default) on the virtual clock. */
export function virtualClockScripts(sources: Readonly<Record<string, string>> = LUA_SOURCES): Record<LuaScriptName, string> {
  return Object.fromEntries(Object.entries(sources).map(([name, source]) => [name, onVirtualClock(source)])) as Record<
    LuaScriptName,
    string
  >;
}
