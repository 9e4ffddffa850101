/**
 * The declared-keys guard: a test-only build of the scripts in
 * which every `redis.call` / `redis.pcall` goes through a local wrapper that
 * checks the command's keys against KEYS and raises an error naming any key
 * the script did not declare. Servers and proxies that route by declared keys
 * or enforce them (Dragonfly, ElastiCache Serverless, key-routing proxies)
 * refuse such a script; Redis runs it, so only this guard sees it. The
 * one script that does so by design, for an OSS Cluster, is left alone
 * ({@link UNDECLARED_BY_DESIGN}).
 *
 * With `TEST_DECLARED_KEYS=1`, the mocha root hooks (test/setup/hooks.ts)
 * rewrite `LUA_SOURCES` in place before any driver hashes a script, and
 * record every guard error a driver's script call meets, so that one a
 * caller swallows (a renewal round's failed call is only retried) still
 * fails the run. `npm test` runs the script suites so
 * (`.mocharc.declared-keys.json`).
 */
import { GlideDriver } from '../../src/clients/glide.js';
import { IoredisDriver } from '../../src/clients/ioredis.js';
import { NodeRedisClusterDriver, NodeRedisDriver } from '../../src/clients/node-redis.js';
import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';

/** The start of the error the guard raises; the key and command follow. */
export const UNDECLARED = 'RWLOCK_UNDECLARED_KEY';

/**
 * Where each command the scripts run takes its keys: `all` its arguments,
 * `none` (a shard channel is not a key), or `first`. A command missing here
 * fails the script, so a new one must be placed.
 */
export const KEY_POSITIONS: Readonly<Record<string, 'first' | 'all' | 'none'>> = {
  DEL: 'all',
  EXISTS: 'all',
  UNLINK: 'all',
  TIME: 'none',
  SPUBLISH: 'none',
  GET: 'first',
  SET: 'first',
  HGET: 'first',
  HSET: 'first',
  HDEL: 'first',
  HMGET: 'first',
  HINCRBY: 'first',
  HEXISTS: 'first',
  HSCAN: 'first',
  PERSIST: 'first',
  PEXPIRE: 'first',
  PEXPIREAT: 'first',
  PEXPIRETIME: 'first',
  PTTL: 'first',
  ZADD: 'first',
  ZREM: 'first',
  ZSCORE: 'first',
  ZRANGE: 'first',
  ZCOUNT: 'first',
  ZCARD: 'first',
  ZREMRANGEBYSCORE: 'first',
};

const positions = Object.entries(KEY_POSITIONS)
  .map(([command, where]) => `${command} = '${where}'`)
  .join(', ');

/** Defines the wrappers; bare locals (Redis 7 refuses new globals in a script). */
const PROLOGUE = `local guardedCall, guardedPcall
do
  local declared = {}
  for _, key in ipairs(KEYS) do declared[key] = true end
  local realCall, realPcall = redis.call, redis.pcall
  local positions = { ${positions} }
  local function check(command, ...)
    local name = string.upper(command)
    local where = positions[name]
    if where == nil then error({ err = '${UNDECLARED} the guard has no key positions for ' .. name }) end
    if where == 'none' then return end
    local args = { ... }
    local last = #args
    if where == 'first' then last = 1 end
    for i = 1, last do
      if not declared[args[i]] then
        error({ err = '${UNDECLARED} ' .. tostring(args[i]) .. ' (' .. name .. ') is not in KEYS' })
      end
    end
  end
  guardedCall = function(command, ...)
    check(command, ...)
    return realCall(command, ...)
  end
  guardedPcall = function(command, ...)
    check(command, ...)
    return realPcall(command, ...)
  end
end
`;

/** `source` with every `redis.call` and `redis.pcall` checked against KEYS (after a `#!lua` line, which must stay first). */
export function guardedSource(source: string): string {
  const body = source.replace(/\bredis\.pcall\b/g, 'guardedPcall').replace(/\bredis\.call\b/g, 'guardedCall');
  const shebang = /^#!lua[^\n]*\n/.exec(body)?.[0] ?? '';
  return shebang + PROLOGUE + body.slice(shebang.length);
}

/** The commands a script names in `rcall('X'`, `redis.call('X'` or `redis.pcall('X'`. */
export function commandsOf(source: string): string[] {
  return [...source.matchAll(/(?:rcall|redis\.p?call)\('([A-Za-z]+)'/g)].map((m) => m[1]!.toUpperCase());
}

/** Guard errors the drivers' script calls met (see {@link recordViolations}). */
export const violations: string[] = [];

/**
 * The one script that touches keys it does not declare, by design: a Cluster
 * node's renewal of many slots in one call, where the Cluster allows it
 * (lua/extend-across-slots.lua). A server that refuses it gets lua/extend.lua.
 */
export const UNDECLARED_BY_DESIGN: readonly string[] = ['extendAcrossSlots'];

/** Rewrites every library script in place (before any driver hashes one), but {@link UNDECLARED_BY_DESIGN}. */
export function guardLibraryScripts(): void {
  const sources = LUA_SOURCES as Record<string, string>;
  for (const name of Object.keys(sources)) {
    if (!UNDECLARED_BY_DESIGN.includes(name)) sources[name] = guardedSource(sources[name]!);
  }
}

/** Records each guard error a driver's script call meets, whatever the caller then does with it. */
export function recordViolations(): void {
  for (const driver of [IoredisDriver, NodeRedisDriver, NodeRedisClusterDriver, GlideDriver]) {
    const proto = driver.prototype as { script(...args: unknown[]): Promise<unknown> };
    const script = proto.script;
    proto.script = function (this: unknown, ...args: unknown[]) {
      return script.apply(this, args).catch((error: unknown) => {
        const message = error instanceof Error ? error.message : String(error);
        if (message.includes(UNDECLARED)) violations.push(`${String(args[0])}: ${message}`);
        throw error;
      });
    };
  }
}
