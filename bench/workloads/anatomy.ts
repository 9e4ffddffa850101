/**
 * Server-side anatomy of one uncontended cycle: the µs a master spends per
 * call (INFO commandstats) on the floor's two commands, on redis-rwlock's
 * scripts, and on reference scripts: one that does nothing, and the bare
 * commands of an uncontended write grant (EXISTS, TIME, HSET of 3 fields,
 * PEXPIRE) and of its release (HGET, DEL), without any of the library's
 * logic. The calls are pipelined on one admin connection, so the figures are
 * the server's own work, not round trips. They bound what any implementation
 * of this key layout can reach.
 */
import type { Redis } from 'ioredis';
import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';
import type { BenchConfig } from '../config.js';
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

async function timed(
  node: Redis,
  command: string,
  calls: number,
  send: (pipeline: ReturnType<Redis['pipeline']>, i: number) => void,
): Promise<AnatomyRow> {
  const before = (await serverCounters(node)).calls.get(command) ?? { calls: 0, usec: 0 };
  for (let i = 0; i < calls; i += 100) {
    const pipeline = node.pipeline();
    for (let k = i; k < Math.min(calls, i + 100); k++) send(pipeline, k);
    await pipeline.exec();
  }
  const after = (await serverCounters(node)).calls.get(command)!;
  return { what: '', usecPerCall: (after.usec - before.usec) / (after.calls - before.calls), calls: after.calls - before.calls };
}

export async function measureAnatomy(topology: Topology, config: BenchConfig, tag: string): Promise<AnatomyRow[]> {
  const n = config.anatomy.calls;
  const node = await topology.masterFor(`{anatomy${tag}}`);
  const load = async (lua: string) => (await node.script('LOAD', lua)) as string;
  const [floorRelease, empty, grantCommands, releaseCommands, acquireWrite, acquireRead, release] = await Promise.all([
    load(FLOOR_RELEASE),
    load(EMPTY),
    load(GRANT_COMMANDS),
    load(RELEASE_COMMANDS),
    load(LUA_SOURCES.acquireWrite),
    load(LUA_SOURCES.acquireRead),
    load(LUA_SOURCES.release),
  ]);
  const owner = (i: number) => `${String(i).padStart(8, '0')}-0000-4000-8000-000000000000`;
  // The hold as the scripts take it (holderArg in src/backends/scripts.ts).
  const holder = (mode: 'w' | 'r', i: number) => `${mode} hold-${i} ${owner(i)}`;
  const keys = (kind: string, i: number) => {
    const part = `{anatomy${tag}}:${kind}:${i}`;
    return [`rwlock:${part}`, `rwlock#leases:${part}`, `rwlock#queue:${part}`] as const;
  };
  const rows: AnatomyRow[] = [];
  const row = async (what: string, command: string, send: (p: ReturnType<Redis['pipeline']>, i: number) => void) =>
    rows.push({ ...(await timed(node, command, n, send)), what });

  await row('floor acquire: SET key token PX NX', 'set', (p, i) => p.set(`floor:{anatomy${tag}}:${i}`, owner(i), 'PX', 30_000, 'NX'));
  await row('floor release: GET == token then DEL (script)', 'evalsha', (p, i) =>
    p.evalsha(floorRelease, 1, `floor:{anatomy${tag}}:${i}`, owner(i)),
  );
  await row('redis-rwlock acquire write, free lock', 'evalsha', (p, i) =>
    p.evalsha(acquireWrite, 3, ...keys('w', i), 30_000, holder('w', i), 0, '0'),
  );
  await row('redis-rwlock release write, only holder', 'evalsha', (p, i) => p.evalsha(release, 3, ...keys('w', i), holder('w', i)));
  await row('redis-rwlock acquire read, free lock', 'evalsha', (p, i) =>
    p.evalsha(acquireRead, 3, ...keys('r', i), 30_000, holder('r', i), '1'),
  );
  await row('redis-rwlock release read, only holder', 'evalsha', (p, i) => p.evalsha(release, 3, ...keys('r', i), holder('r', i)));
  await row('reference: a script that does nothing', 'evalsha', (p) => p.evalsha(empty, 0));
  await row("reference: the write grant's commands alone, no logic", 'evalsha', (p, i) =>
    p.evalsha(grantCommands, 2, ...keys('x', i).slice(0, 2), holder('w', i)),
  );
  await row("reference: the release's commands alone, no logic", 'evalsha', (p, i) => p.evalsha(releaseCommands, 1, keys('x', i)[0]));
  // Leave nothing behind.
  for (let i = 0; i < n; i += 100) {
    const pipeline = node.pipeline();
    for (let k = i; k < Math.min(n, i + 100); k++) pipeline.del(`floor:{anatomy${tag}}:${k}`, ...keys('x', k));
    await pipeline.exec();
  }
  return rows;
}
