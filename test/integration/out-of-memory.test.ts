/**
 * A server out of memory: `maxmemory` reached with `noeviction`, as the cache
 * Redis that teams share with their locks is when it fills up.
 *
 * - The script flags (the guard of the choice, as the declared-keys guard is
 *   of the keys): every script states its flags on its first line, and the
 *   scripts that run out of memory (`allow-oom`) are exactly those that only
 *   rewrite or delete what is there: renewal, release, give-back and
 *   force-release. Each of them, in every state a lock can be in, on a server
 *   out of memory, runs and leaves the lock's keys no larger (`MEMORY USAGE`);
 *   every acquire is refused whole and writes nothing.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { AcquireRequest, LockBackend } from '../../src/backends/backend.js';
import { hashLayout, type Layout, legacyLayout } from '../../src/backends/layouts.js';
import { ScriptedBackend } from '../../src/backends/scripted.js';
import { driverFor, type LockRedisClient } from '../../src/clients/index.js';
import type { LockKeys } from '../../src/index.js';
import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';
import { forEachTopology } from '../setup/topologies.js';
import { outOfMemory } from '../support/out-of-memory.js';
import { masters } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';

/** The scripts that run on a server out of memory (`allow-oom`): each only rewrites or deletes what is there. */
const RUN_OUT_OF_MEMORY = [
  'abandon',
  'extend',
  'extendAcrossSlots',
  'forceRelease',
  'legacyAbandon',
  'legacyExtend',
  'legacyRelease',
  'release',
];
/** The scripts that read only (`no-writes`): they run there too, and on replicas. */
const READ_ONLY = ['inspect', 'legacyInspect'];

/** The flags on a script's first line (`#!lua flags=a,b`), or undefined when it has no `#!lua` line. */
function flagsOf(source: string): string[] | undefined {
  const line = /^#!lua(?: flags=(\S*))?\n/.exec(source);
  if (line === null) return undefined;
  return line[1] === undefined ? [] : line[1].split(',');
}

describe('script flags', () => {
  it('every script states its flags on its first line', () => {
    const unflagged = Object.entries(LUA_SOURCES).filter(([, source]) => flagsOf(source) === undefined);
    expect(unflagged.map(([name]) => name)).to.deep.equal([]);
  });

  it('those that run out of memory (allow-oom) are renewal, release, give-back and force-release', () => {
    const names = (flag: string) =>
      Object.entries(LUA_SOURCES)
        .filter(([, source]) => flagsOf(source)!.includes(flag))
        .map(([name]) => name)
        .sort();
    expect(names('allow-oom')).to.deep.equal(RUN_OUT_OF_MEMORY);
    expect(names('no-writes')).to.deep.equal(READ_ONLY);
    // The rest (the acquires, the fenced writes) are refused whole there: a grant adds a hold.
    const rest = Object.keys(LUA_SOURCES).filter((name) => !RUN_OUT_OF_MEMORY.includes(name) && !READ_ONLY.includes(name));
    for (const name of rest) expect(flagsOf(LUA_SOURCES[name as keyof typeof LUA_SOURCES]), name).to.deep.equal([]);
  });
});

/** A lock's operation under test, on a backend of one layout; `holds` names the holds the state made. */
type Step = (backend: LockBackend, keys: LockKeys, resource: string, holds: Record<string, string>) => Promise<unknown>;

let ids = 0;
function request(
  keys: LockKeys,
  resource: string,
  mode: 'read' | 'write',
  owner: string,
  waitBeatMs = 0,
  leaseMs = 10_000,
): AcquireRequest {
  return { resource, keys, mode, owner, holdId: `oom-${++ids}`, leaseMs, honourIntent: true, waitBeatMs, fair: false };
}
const take =
  (name: string, mode: 'read' | 'write', owner: string, waitBeatMs = 0, leaseMs?: number): Step =>
  async (backend, keys, resource, holds) => {
    const r = request(keys, resource, mode, owner, waitBeatMs, leaseMs);
    holds[name] = r.holdId;
    await backend.acquire(r);
  };
const all =
  (...steps: Step[]): Step =>
  async (...args) => {
    for (const step of steps) await step(...args);
  };
const extend =
  (owner: string, leaseMs = 10_000): Step =>
  (backend, keys) =>
    backend.extend([{ keys, owner, leaseMs, holdIds: [] }]);
/** A writer long enough to make a handed lease's holder larger than the writer it replaces. */
const QUEUED = 'a-waiting-writer-with-an-owner-token-longer-than-the-holder-s';

/** Lock states, and the operations that must run on them out of memory. */
const STATES: readonly { state: string; make: Step; ops: Record<string, Step> }[] = [
  {
    state: 'a fresh lock, its writer kept inline',
    make: take('w', 'write', 'W'),
    ops: {
      'its renewal': extend('W'),
      'a renewal of a lease lost': extend('S'),
      'its release': (b, k, _r, h) => b.release(k, 'write', 'W', h.w!),
      'a release of a hold not there': (b, k) => b.release(k, 'read', 'S', 'gone'),
      'its give-back, by hold': (b, k, _r, h) => b.abandon(k, 'W', h.w!),
      'a give-back of an owner not there': (b, k) => b.abandon(k, 'S', 'gone'),
    },
  },
  {
    state: 'two readers',
    make: all(take('a', 'read', 'A'), take('b', 'read', 'B')),
    ops: {
      'a renewal': extend('A'),
      'a renewal for a lease far longer': extend('A', 100_000_000),
      'a release': (b, k, _r, h) => b.release(k, 'read', 'A', h.a!),
      'a give-back of every hold': (b, k) => b.abandon(k, 'B', '*'),
    },
  },
  {
    state: 'a writer holding twice',
    make: all(take('w1', 'write', 'W'), take('w2', 'write', 'W')),
    ops: { 'its inner release': (b, k, _r, h) => b.release(k, 'write', 'W', h.w2!), 'its renewal': extend('W') },
  },
  {
    state: 'a writer, and a writer queued behind it',
    make: all(take('w', 'write', 'W'), take('q', 'write', QUEUED, 2_000)),
    ops: {
      'the release that hands the lock over': (b, k, _r, h) => b.release(k, 'write', 'W', h.w!),
      "the queued writer's withdrawal": (b, k) => b.abandon(k, QUEUED, ''),
    },
  },
  {
    state: 'two readers, one waiting to upgrade',
    make: all(take('r', 'read', 'R'), take('s', 'read', 'S'), take('u', 'write', 'R', 2_000)),
    ops: {
      "the upgrader's release of its read hold": (b, k, _r, h) => b.release(k, 'read', 'R', h.r!),
      "the upgrader's withdrawal": (b, k) => b.abandon(k, 'R', ''),
    },
  },
  {
    state: 'a writer whose lease ran out, and a reader',
    make: async (b, k, r, h) => {
      await take('w', 'write', 'W', 0, 20)(b, k, r, h);
      await sleep(40);
      await take('x', 'read', 'X')(b, k, r, h);
    },
    ops: { "the lost writer's renewal": extend('W') },
  },
];

/** The layouts the scripts run: hash, and bridge (the hash state and the old keys together). */
const LAYOUTS: Record<string, (cluster: boolean) => Layout<LockKeys>> = {
  hash: () => hashLayout('rwlock') as Layout<LockKeys>,
  bridge: (cluster) =>
    legacyLayout('rwlock', (r) => ({ read: `{${r}}:read`, write: `{${r}}:write` }), 'bridge', cluster) as Layout<LockKeys>,
};

forEachTopology('a server out of memory: the scripts that run there', (ctx) => {
  /** The bytes of a lock's keys, as `MEMORY USAGE` counts them (a key that is gone counts 0). */
  const sizeOf = async (redis: LockRedisClient & { call(...args: string[]): Promise<unknown> }, keys: readonly string[]) => {
    let bytes = 0;
    for (const key of keys) bytes += Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
    return bytes;
  };

  for (const [layoutName, makeLayout] of Object.entries(LAYOUTS)) {
    for (const { state, make, ops } of STATES) {
      it(`${layoutName}, ${state}: each runs, and leaves the lock's keys no larger`, async function () {
        this.timeout(60_000);
        const redis = ctx.client();
        const nodes = await masters(redis);
        const layout = makeLayout(ctx.kind === 'cluster');
        const backend = new ScriptedBackend(driverFor(redis), layout);
        for (const [op, run] of Object.entries(ops)) {
          const resource = `oom-${layoutName}-${++ids}`;
          const keys = backend.keysFor(resource);
          const names = layout.names(keys);
          const holds: Record<string, string> = {};
          await make(backend, keys, resource, holds);
          const before = await sizeOf(redis as never, names);
          expect(before, `${op}: the lock before`).to.be.above(0);
          const restore = await outOfMemory(nodes);
          try {
            await run(backend, keys, resource, holds);
          } finally {
            await restore();
          }
          const after = await sizeOf(redis as never, names);
          expect(after, `${op}: the bytes of the lock's keys after, against ${before} before`).to.be.at.most(before);
        }
      });
    }

    it(`${layoutName}: every acquire is refused whole, and writes nothing`, async () => {
      const redis = ctx.client();
      const nodes = await masters(redis);
      const layout = makeLayout(ctx.kind === 'cluster');
      const backend = new ScriptedBackend(driverFor(redis), layout);
      const resource = `oom-${layoutName}-acquires`;
      const keys = backend.keysFor(resource);
      await take('r', 'read', 'R')(backend, keys, resource, {});
      const dump = async () => Promise.all(layout.names(keys).map((key) => redis.dumpBuffer(key)));
      const before = await dump();
      const restore = await outOfMemory(nodes);
      try {
        for (const r of [
          request(keys, resource, 'read', 'R'),
          request(keys, resource, 'read', 'N'),
          request(keys, resource, 'write', 'N', 2_000),
          request(keys, resource, 'write', 'R', 2_000),
          request(backend.keysFor(`${resource}-fresh`), `${resource}-fresh`, 'write', 'N'),
        ]) {
          const error = await rejection(backend.acquire(r));
          expect(error.message, `${r.mode} by ${r.owner}`).to.match(/^OOM /);
        }
      } finally {
        await restore();
      }
      expect(await dump()).to.deep.equal(before);
    });
  }
});
