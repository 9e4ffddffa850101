/**
 * Server-side anatomy of one uncontended cycle: the µs a master spends per
 * call (INFO commandstats) on the floor's two commands, on redis-rwlock's
 * scripts, and on two reference scripts: one that does nothing, and one
 * that makes exactly the writes of an uncontended write grant (TIME, EXISTS,
 * HSET of 3 fields, ZADD, 2 PEXPIREAT) without any of the library's logic.
 * The calls are pipelined on one admin connection, so the figures are the
 * server's own work, not round trips. They bound what any implementation of
 * this key layout can reach.
 */
import type { Redis } from 'ioredis';
import type { BenchConfig } from '../config.js';
import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';
import { serverCounters, type Topology } from '../topology.js';

export interface AnatomyRow {
  readonly what: string;
  readonly usecPerCall: number;
  readonly calls: number;
}

const FLOOR_RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const EMPTY = `return 1`;
const SAME_WRITES = `local t = redis.call('TIME')
if redis.call('EXISTS', KEYS[1], KEYS[2]) ~= 0 then return nil end
redis.call('HSET', KEYS[1], 'w', ARGV[1], 'wc', 1, 'f', t[1] .. t[2])
redis.call('ZADD', KEYS[2], t[1] * 1000 + 30000, ARGV[1])
redis.call('PEXPIREAT', KEYS[1], t[1] * 1000 + 30000)
redis.call('PEXPIREAT', KEYS[2], t[1] * 1000 + 30000)
return { 1, 1, 30000 }`;
// A layout that keeps a sole holder in the hash alone (no deadline set until a second owner comes).
const HASH_ONLY_GRANT = `local t = redis.call('TIME')
if redis.call('EXISTS', KEYS[1]) ~= 0 then return nil end
local deadline = t[1] * 1000 + 30000
redis.call('HSET', KEYS[1], 'w', ARGV[1], 'wc', 1, 'd', deadline, 'f', t[1] .. t[2])
redis.call('PEXPIREAT', KEYS[1], deadline)
return { 1, 1, 30000 }`;
const HASH_ONLY_RELEASE = `local held = redis.call('HMGET', KEYS[1], 'w', 'wc')
if held[1] ~= ARGV[1] or held[2] ~= '1' then return { 0 } end
redis.call('DEL', KEYS[1])
redis.call('SPUBLISH', KEYS[1], 'write')
return { 1, 0 }`;

async function timed(node: Redis, command: string, calls: number, send: (pipeline: ReturnType<Redis['pipeline']>, i: number) => void): Promise<AnatomyRow> {
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
  const [floorRelease, empty, sameWrites, hashOnlyGrant, hashOnlyRelease, acquireWrite, acquireRead, release] = await Promise.all(
    [FLOOR_RELEASE, EMPTY, SAME_WRITES, HASH_ONLY_GRANT, HASH_ONLY_RELEASE, LUA_SOURCES.acquireWrite, LUA_SOURCES.acquireRead, LUA_SOURCES.release].map(load),
  );
  const owner = (i: number) => `${String(i).padStart(8, '0')}-0000-4000-8000-000000000000`;
  const keys = (kind: string, i: number) => {
    const part = `{anatomy${tag}}:${kind}:${i}`;
    return [`rwlock:${part}`, `rwlock#leases:${part}`, `rwlock#queue:${part}`];
  };
  const rows: AnatomyRow[] = [];
  const row = async (what: string, command: string, send: (p: ReturnType<Redis['pipeline']>, i: number) => void) =>
    rows.push({ ...(await timed(node, command, n, send)), what });

  await row('floor acquire: SET key token PX NX', 'set', (p, i) => p.set(`floor:{anatomy${tag}}:${i}`, owner(i), 'PX', 30_000, 'NX'));
  await row('floor release: GET == token then DEL (script)', 'evalsha', (p, i) => p.evalsha(floorRelease, 1, `floor:{anatomy${tag}}:${i}`, owner(i)));
  await row('redis-rwlock acquire write, free lock', 'evalsha', (p, i) => p.evalsha(acquireWrite, 3, ...keys('w', i), owner(i), 30_000, 0, '0'));
  await row('redis-rwlock release write, only holder', 'evalsha', (p, i) => p.evalsha(release, 3, ...keys('w', i), owner(i), 'write', keys('w', i)[0]!));
  await row('redis-rwlock acquire read, free lock', 'evalsha', (p, i) => p.evalsha(acquireRead, 3, ...keys('r', i), owner(i), 30_000, '1'));
  await row('redis-rwlock release read, only holder', 'evalsha', (p, i) => p.evalsha(release, 3, ...keys('r', i), owner(i), 'read', keys('r', i)[0]!));
  await row('reference: a script that does nothing', 'evalsha', (p) => p.evalsha(empty, 0));
  await row('reference: only the writes of a write grant, no logic', 'evalsha', (p, i) => p.evalsha(sameWrites, 2, ...keys('x', i).slice(0, 2), owner(i)));
  await row('reference: a write grant kept in the hash alone', 'evalsha', (p, i) => p.evalsha(hashOnlyGrant, 1, keys('h', i)[0]!, owner(i)));
  await row('reference: its release (HMGET, DEL, SPUBLISH)', 'evalsha', (p, i) => p.evalsha(hashOnlyRelease, 1, keys('h', i)[0]!, owner(i)));
  // Leave nothing behind.
  for (let i = 0; i < n; i += 100) {
    const pipeline = node.pipeline();
    for (let k = i; k < Math.min(n, i + 100); k++) pipeline.del(`floor:{anatomy${tag}}:${k}`, ...keys('x', k), ...keys('h', k));
    await pipeline.exec();
  }
  return rows;
}
