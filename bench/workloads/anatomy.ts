/**
 * Server-side anatomy of one uncontended cycle: the µs a master spends per
 * call (INFO commandstats) on the floor's two commands, on the fenced floor's
 * grant (SET NX PX and TIME in one script), on redis-rwlock's
 * scripts, and on reference scripts: one that does nothing, and the bare
 * commands of an uncontended write grant (EXISTS, TIME, HSET of 3 fields,
 * PEXPIRE) and of its release (HGET, DEL), without any of the library's
 * logic. The calls are pipelined on one admin connection, so the figures are
 * the server's own work, not round trips. They bound what any implementation
 * of this key layout can reach. Four more rows price two layouts this one
 * could become (a new layout version each, not made), with the keys and
 * arguments the real scripts would send: a free lock's sole holder in a
 * string key of its own, granted by `SET NX PX` once the hash and leases are
 * seen absent and released by a compare and `DEL`; and the same with that
 * key kept while the lock has any state, so the grant checks nothing else.
 * Two more send redis-rwlock's own scripts only the keys and arguments
 * their common case reads, which prices a protocol whose scripts derive
 * the other keys' names from the hash's.
 */
import type { Redis } from 'ioredis';
import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';
import type { BenchConfig } from '../config.js';
import { FENCED_GRANT_LUA } from '../libs.js';
import { median } from '../stats.js';
import { serverCounters, type Topology } from '../topology.js';

export interface AnatomyRow {
  readonly what: string;
  readonly usecPerCall: number;
  readonly calls: number;
}

const FLOOR_RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const EMPTY = `return 1`;
// The commands of an uncontended cycle alone, with no script logic around them: what any
// implementation of this layout (a hash holding a sole owner and its fence, expiring with its
// lease) must run on the server.
const GRANT_COMMANDS = `if redis.call('EXISTS', KEYS[1], KEYS[2]) ~= 0 then return nil end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'f', t[1] .. t[2], 'o', ARGV[1], 'v', '2')
redis.call('PEXPIRE', KEYS[1], 30000)
return 1`;
const RELEASE_COMMANDS = `redis.call('HGET', KEYS[1], 'o')
redis.call('DEL', KEYS[1])
return 0`;
// The string-holder layout's uncontended cycle. KEYS: holder, state, leases, queue; the grant's
// ARGV as acquire-write.lua's (leaseMs, holder, waitBeatMs, flags), the release's the holder.
// The holder key holds '<fence> <holder>' (a 16-digit fence): a second caller would move it into
// the hash, so a release that finds it unchanged has nobody to wake.
const STRING_HOLDER_GRANT = `if redis.call('EXISTS', KEYS[2], KEYS[3]) == 0 then
local t = redis.call('TIME')
if redis.call('SET', KEYS[1], t[1] .. string.sub('00000' .. t[2], -6) .. ' ' .. ARGV[2], 'NX', 'PX', ARGV[1]) then return t[1] * 1000000 + t[2] end
end
return 0`;
// The same with the holder key kept for as long as the lock has any state (a marker once it
// spills into the hash): the free-lock grant is then SET NX PX alone, with no EXISTS.
const KEPT_HOLDER_GRANT = `local t = redis.call('TIME')
if redis.call('SET', KEYS[1], t[1] .. string.sub('00000' .. t[2], -6) .. ' ' .. ARGV[2], 'NX', 'PX', ARGV[1]) then return t[1] * 1000000 + t[2] end
return 0`;
const STRING_HOLDER_RELEASE = `local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 18) == ARGV[1] then redis.call('DEL', KEYS[1]) return 0 end
return -1`;

/** µs per call of `command` (INFO commandstats) over calls `from` to `to` of `send`, pipelined 100 at a time. */
async function timed(
  node: Redis,
  command: string,
  from: number,
  to: number,
  send: (pipeline: ReturnType<Redis['pipeline']>, i: number) => void,
): Promise<{ usec: number; calls: number }> {
  const before = (await serverCounters(node)).calls.get(command) ?? { calls: 0, usec: 0 };
  for (let i = from; i < to; i += 100) {
    const pipeline = node.pipeline();
    for (let k = i; k < Math.min(to, i + 100); k++) send(pipeline, k);
    await pipeline.exec();
  }
  const after = (await serverCounters(node)).calls.get(command)!;
  return { usec: after.usec - before.usec, calls: after.calls - before.calls };
}

/**
 * Rounds the calls of every row are cut into, the rows taking turns in each
 * (a release right after its acquire), so that a loaded spell of the machine
 * falls on every row alike; a row's figure is the median of its rounds'.
 */
const ROUNDS = 10;

export async function measureAnatomy(topology: Topology, config: BenchConfig, tag: string): Promise<AnatomyRow[]> {
  const n = config.anatomy.calls;
  const node = await topology.masterFor(`{anatomy${tag}}`);
  const load = async (lua: string) => (await node.script('LOAD', lua)) as string;
  const [
    floorRelease,
    fencedGrant,
    empty,
    grantCommands,
    releaseCommands,
    acquireWrite,
    acquireRead,
    release,
    stringGrant,
    stringRelease,
    keptGrant,
  ] = await Promise.all([
    load(FLOOR_RELEASE),
    load(FENCED_GRANT_LUA),
    load(EMPTY),
    load(GRANT_COMMANDS),
    load(RELEASE_COMMANDS),
    load(LUA_SOURCES.acquireWrite),
    load(LUA_SOURCES.acquireRead),
    load(LUA_SOURCES.release),
    load(STRING_HOLDER_GRANT),
    load(STRING_HOLDER_RELEASE),
    load(KEPT_HOLDER_GRANT),
  ]);
  const owner = (i: number) => `${String(i).padStart(8, '0')}-0000-4000-8000-000000000000`;
  // The hold as the scripts take it (holderArg in src/backends/scripts.ts).
  const holder = (mode: 'w' | 'r', i: number) => `${mode} hold-${i} ${owner(i)}`;
  const keys = (kind: string, i: number) => {
    const part = `{anatomy${tag}}:${kind}:${i}`;
    return [`rwlock:${part}`, `rwlock#leases:${part}`, `rwlock#queue:${part}`] as const;
  };
  const rows: { what: string; command: string; send: (p: ReturnType<Redis['pipeline']>, i: number) => void }[] = [];
  const row = (what: string, command: string, send: (p: ReturnType<Redis['pipeline']>, i: number) => void) =>
    rows.push({ what, command, send });

  row('floor acquire: SET key token PX NX', 'set', (p, i) => p.set(`floor:{anatomy${tag}}:${i}`, owner(i), 'PX', 30_000, 'NX'));
  row('floor release: GET == token then DEL (script)', 'evalsha', (p, i) =>
    p.evalsha(floorRelease, 1, `floor:{anatomy${tag}}:${i}`, owner(i)),
  );
  row('fenced floor acquire: SET NX PX and TIME (script)', 'evalsha', (p, i) =>
    p.evalsha(fencedGrant, 1, `fenced:{anatomy${tag}}:${i}`, owner(i), 30_000),
  );
  // Each acquire's keys go in the next row: a database that grew meanwhile would rehash during the rows after.
  row("fenced floor release: the floor's, on its key", 'evalsha', (p, i) =>
    p.evalsha(floorRelease, 1, `fenced:{anatomy${tag}}:${i}`, owner(i)),
  );
  row('redis-rwlock acquire write, free lock', 'evalsha', (p, i) =>
    p.evalsha(acquireWrite, 3, ...keys('w', i), 30_000, holder('w', i), 0, '0h'),
  );
  row('redis-rwlock release write, only holder', 'evalsha', (p, i) => p.evalsha(release, 3, ...keys('w', i), holder('w', i)));
  row('redis-rwlock acquire read, free lock', 'evalsha', (p, i) => p.evalsha(acquireRead, 3, ...keys('r', i), 30_000, holder('r', i), '1'));
  row('redis-rwlock release read, only holder', 'evalsha', (p, i) => p.evalsha(release, 3, ...keys('r', i), holder('r', i)));
  // The same scripts sent only what their common case reads: the keys and arguments a protocol
  // could send if the scripts derived the other keys' names from the hash's (not made: a script
  // must declare every key it touches). Their free-lock paths read nothing else.
  row('redis-rwlock acquire write, free lock, sent only the keys and arguments its common case reads', 'evalsha', (p, i) =>
    p.evalsha(acquireWrite, 2, ...keys('d', i).slice(0, 2), 30_000, holder('w', i)),
  );
  row("redis-rwlock release write, only holder, sent only its hash's key", 'evalsha', (p, i) =>
    p.evalsha(release, 1, keys('d', i)[0], holder('w', i)),
  );
  row('reference: a script that does nothing', 'evalsha', (p) => p.evalsha(empty, 0));
  row("reference: the write grant's commands alone, no logic", 'evalsha', (p, i) =>
    p.evalsha(grantCommands, 2, ...keys('x', i).slice(0, 2), holder('w', i)),
  );
  row("reference: the release's commands alone, no logic", 'evalsha', (p, i) => p.evalsha(releaseCommands, 1, keys('x', i)[0]));
  const holderKey = (kind: string, i: number) => `rwlock#holder:{anatomy${tag}}:${kind}:${i}`;
  row('string-holder layout acquire write, free lock', 'evalsha', (p, i) =>
    p.evalsha(stringGrant, 4, holderKey('s', i), ...keys('s', i), 30_000, holder('w', i), 0, '0h'),
  );
  row('string-holder layout release write, only holder', 'evalsha', (p, i) =>
    p.evalsha(stringRelease, 4, holderKey('s', i), ...keys('s', i), holder('w', i)),
  );
  row('string-holder layout, its key kept while the lock has state: acquire write, free lock', 'evalsha', (p, i) =>
    p.evalsha(keptGrant, 4, holderKey('k', i), ...keys('k', i), 30_000, holder('w', i), 0, '0h'),
  );
  row('string-holder layout, its key kept: release write, only holder', 'evalsha', (p, i) =>
    p.evalsha(stringRelease, 4, holderKey('k', i), ...keys('k', i), holder('w', i)),
  );
  const rounds = rows.map(() => [] as { usec: number; calls: number }[]);
  const chunk = Math.ceil(n / ROUNDS);
  for (let from = 0; from < n; from += chunk) {
    for (const [k, r] of rows.entries()) rounds[k]!.push(await timed(node, r.command, from, Math.min(n, from + chunk), r.send));
  }
  // Leave nothing behind.
  for (let i = 0; i < n; i += 100) {
    const pipeline = node.pipeline();
    for (let k = i; k < Math.min(n, i + 100); k++)
      pipeline.del(`floor:{anatomy${tag}}:${k}`, `fenced:{anatomy${tag}}:${k}`, ...keys('x', k), holderKey('s', k), holderKey('k', k));
    await pipeline.exec();
  }
  return rows.map((r, k) => ({
    what: r.what,
    usecPerCall: median(rounds[k]!.map((t) => t.usec / t.calls)) ?? NaN,
    calls: rounds[k]!.reduce((a, t) => a + t.calls, 0),
  }));
}
