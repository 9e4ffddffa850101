/**
 * A server out of memory: `maxmemory` reached with `noeviction`, as the cache
 * Redis that teams share with their locks is when it fills up.
 *
 * - The script flags (the guard of the choice, as the declared-keys guard is
 *   of the keys): every script states its flags on its first line, and the
 *   scripts that run out of memory (`allow-oom`) are exactly those that only
 *   rewrite or delete what is there: renewal, release, give-back,
 *   force-release and a waiting writer's heartbeat. Each of them, in every
 *   state a lock can be in, on a server out of memory, runs and leaves the
 *   lock's keys no larger (`MEMORY USAGE`); every acquire is refused whole and
 *   writes nothing.
 * - The episode: leases held by every mode (hash, legacy, bridge, redlock) ride
 *   out `OOM_EPISODE_MS` (3 s here; `OOM_EPISODE_MS=10000` for the long one)
 *   with 1.5 s leases renewed throughout; a release runs and frees; a new
 *   acquire is refused with `ServerOutOfMemoryError`; a waiting writer keeps
 *   its place, is handed the lock by a release during the episode where the
 *   mode hands over, and otherwise gets it once memory is back, before a
 *   writer that came later.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { AcquireRequest, LockBackend } from '../../src/backends/backend.js';
import { hashLayout, type Layout, legacyLayout } from '../../src/backends/layouts.js';
import { ScriptedBackend } from '../../src/backends/scripted.js';
import { driverFor, type LockRedisClient } from '../../src/clients/index.js';
import { type Lease, LockClient, type LockClientMode, type LockKeys, ServerOutOfMemoryError } from '../../src/index.js';
import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';
import { type RedisServerHandle, startFaultProxy, startRedisServer } from '../../src/testing/index.js';
import { type ClientKind, disconnect, forEachTopology, NODE_REDIS_IN_CI_AND_GLIDE, nodeRedisClient } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { glideClient } from '../support/glide-clients.js';
import { outOfMemory } from '../support/out-of-memory.js';
import { masters } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';
import { connectTarget, targetThrough } from '../support/targets.js';

/** How long the episode of the lease suite lasts. */
const EPISODE_MS = Number(process.env.OOM_EPISODE_MS ?? 3_000);
/** The lease of the episode's renewed leases: renewed every 500 ms, lost after 1.5 s without. */
const LEASE_MS = 1_500;

/** The scripts that run on a server out of memory (`allow-oom`): each only rewrites or deletes what is there. */
const RUN_OUT_OF_MEMORY = [
  'abandon',
  'extend',
  'extendAcrossSlots',
  'forceRelease',
  'keepPlace',
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

  it('those that run out of memory (allow-oom) are renewal, release, give-back, force-release and keeping a place', () => {
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
      // Its other holds, not there: answered as in the usual layout (a hold of that mode left, or none).
      'a repeated release of its earlier hold': async (b, k) => expect(await b.release(k, 'write', 'W', 'earlier')).to.equal(true),
      'a release of the mode it does not hold': async (b, k, _r, h) => expect(await b.release(k, 'read', 'W', h.w!)).to.equal(false),
      'a give-back of its other acquire': (b, k) => b.abandon(k, 'W', 'other'),
      'a withdrawal from a queue it is not in': (b, k) => b.abandon(k, 'W', ''),
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
      "the queued writer's heartbeat": (b, k, r, h) => b.keepPlace({ ...request(k, r, 'write', QUEUED, 2_000), holdId: h.q! }),
      'the release that hands the lock over': (b, k, _r, h) => b.release(k, 'write', 'W', h.w!),
      "the queued writer's withdrawal": (b, k) => b.abandon(k, QUEUED, ''),
    },
  },
  {
    state: 'two readers, one waiting to upgrade',
    make: all(take('r', 'read', 'R'), take('s', 'read', 'S'), take('u', 'write', 'R', 2_000)),
    ops: {
      "the upgrader's heartbeat": (b, k, r, h) => b.keepPlace({ ...request(k, r, 'write', 'R', 2_000), holdId: h.u! }),
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

/** A client of `kind` on one server (the redlock nodes beside the topology's), connected. */
async function clientOn(kind: ClientKind, server: RedisServerHandle): Promise<LockRedisClient> {
  if (kind === 'ioredis') return server.client();
  if (kind === 'glide') return glideClient({ addresses: [server] });
  const client = nodeRedisClient(kind, { socket: { host: server.host, port: server.port } });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

forEachTopology('a server out of memory: leases', { clients: NODE_REDIS_IN_CI_AND_GLIDE }, (ctx) => {
  /** Two servers beside the topology: `redlock` mode's other nodes. */
  let others: RedisServerHandle[] = [];
  before(async function () {
    this.timeout(60_000);
    others = await Promise.all([startRedisServer(), startRedisServer()]);
  });
  after(async () => {
    await Promise.all(others.map((s) => s.stop()));
  });

  it('a waiting acquire tries until its waitMs, then rejects with ServerOutOfMemoryError within its bound, leaving nothing', async function () {
    this.timeout(30_000);
    const redis = ctx.client();
    const locks = new LockClient(await ctx.lockRedis(), { leaseMs: LEASE_MS });
    try {
      const holder = await locks.lock('{oom-wait}').acquireWrite();
      const restore = await outOfMemory(await masters(redis));
      try {
        const waitMs = 1_500;
        for (const resource of ['{oom-wait}', '{oom-free}']) {
          const started = performance.now();
          const error = await rejection(locks.lock(resource).acquireWrite({ waitMs }));
          const took = performance.now() - started;
          expect(error, resource).to.be.instanceOf(ServerOutOfMemoryError);
          expect(took, `${resource}: rejected after (ms)`).to.be.at.least(waitMs - 1);
          expect(took, `${resource}: within the bound, waitMs + 250 ms (and event-loop slack)`).to.be.below(waitMs + 250 + 750);
        }
        // The writer that waited behind the holder left the queue when it gave up, out of memory still.
        expect((await locks.lock('{oom-wait}').inspect()).queue).to.deep.equal([]);
        expect(holder.held).to.equal(true);
      } finally {
        await restore();
      }
      await holder.release();
      const { state, leases, queue } = locks.lock('{oom-wait}').keys;
      expect(await redis.exists(state, leases, queue), "the lock's keys").to.equal(0);
    } finally {
      await locks.close();
    }
  });

  // The hand-over lands between the waiter's refused try and its heartbeat, which then finds no place
  // left: before, the waiter forgot the place the hand-over named, and waited out its waitMs out of memory.
  if (ctx.kind === 'standalone' && ctx.clientKind === 'ioredis')
    it('a waiting writer takes the lock a release handed it while its heartbeat was on the way', async function () {
      this.timeout(30_000);
      const redis = ctx.client();
      const proxy = await startFaultProxy({ target: { port: ctx.server.port } });
      const through = connectTarget(targetThrough(proxy));
      through.on('error', () => undefined);
      const holderLocks = new LockClient(redis, { leaseMs: LEASE_MS });
      const waiterLocks = new LockClient(through, { leaseMs: LEASE_MS });
      try {
        const holder = await holderLocks.lock('{oom-handed}').acquireWrite();
        const waiting = waiterLocks.lock('{oom-handed}').acquireWrite({ waitMs: 20_000, owner: 'waiter' });
        waiting.catch(() => undefined);
        await eventually('the writer queued', async () => (await holderLocks.lock('{oom-handed}').inspect()).queue.length === 1);
        const restore = await outOfMemory(await masters(redis));
        try {
          // Its next heartbeat held back before the server sees it; the release hands the lock over meanwhile.
          const keepPlaceSha = createHash('sha1').update(LUA_SOURCES.keepPlace).digest('hex');
          await proxy.stallAtCommand({ command: 'evalsha', argument: keepPlaceSha });
          await holder.release();
          expect((await holderLocks.lock('{oom-handed}').inspect()).writer?.owner, 'handed to').to.equal('waiter');
          proxy.resume();
          const lease = await Promise.race([waiting, sleep(5_000).then(() => undefined)]);
          expect(lease?.held, 'the handed lease, taken within 5 s, out of memory still').to.equal(true);
          await lease!.release();
        } finally {
          await restore();
        }
      } finally {
        await waiterLocks.close();
        await holderLocks.close();
        through.disconnect();
        await proxy.close();
      }
    });

  it(`every lease held rides out ${EPISODE_MS} ms, in every mode; releases free, new grants are refused, a waiting writer keeps its place`, async function () {
    this.timeout(EPISODE_MS + 60_000);
    const redis = ctx.client();
    const nodes = [...(await masters(redis)), ...others.map((s) => s.client())];
    await Promise.all(others.map((s) => s.flush()));
    const extra: LockRedisClient[] = [];
    const lockClients = new Map<LockClientMode, LockClient>();
    const lost: string[] = [];
    for (const mode of ['hash', 'legacy', 'bridge', 'redlock'] as const) {
      let on: LockRedisClient | LockRedisClient[] = await ctx.lockRedis();
      if (mode === 'redlock') {
        const beside = await Promise.all(others.map((s) => clientOn(ctx.clientKind, s)));
        extra.push(...beside);
        on = [on, ...beside];
      }
      const locks = new LockClient(on, { mode, leaseMs: LEASE_MS });
      locks.on('lost', (error: Error) => lost.push(`${mode}: ${error.message}`));
      lockClients.set(mode, locks);
    }
    try {
      const held = new Map<LockClientMode, Lease[]>();
      const freed = new Map<LockClientMode, Lease>();
      const writers = new Map<LockClientMode, Lease>();
      const waiting = new Map<LockClientMode, Promise<Lease>>();
      for (const [mode, locks] of lockClients) {
        const lock = (name: string) => locks.lock(`{oom-${mode}-${name}}`);
        held.set(mode, [
          await lock('sole-1').acquireWrite(),
          await lock('sole-2').acquireRead(),
          await lock('shared').acquireRead(),
          await lock('shared').acquireRead(),
          await lock('twice').acquireWrite({ owner: 'twice' }),
          await lock('twice').acquireWrite({ owner: 'twice' }),
        ]);
        freed.set(mode, await lock('freed').acquireWrite());
        writers.set(mode, await lock('queue').acquireWrite());
        const queued = lock('queue').acquireWrite({ waitMs: EPISODE_MS + 20_000 });
        queued.catch(() => undefined);
        waiting.set(mode, queued);
        await eventually(`${mode}: a writer queued`, async () => (await lock('queue').inspect()).queue.length === 1);
      }

      const restore = await outOfMemory(nodes);
      let restored = false;
      try {
        const started = performance.now();
        for (const [mode, locks] of lockClients) {
          // Nothing new is granted: refused at once, with the error of its own.
          const refused = await rejection(locks.lock(`{oom-${mode}-new}`).tryAcquireWrite());
          expect(refused, mode).to.be.instanceOf(ServerOutOfMemoryError);
          expect(refused.message, mode).to.match(/out of memory.*raise maxmemory/);
          // A release runs, and frees.
          await freed.get(mode)!.release();
          expect(await locks.lock(`{oom-${mode}-freed}`).inspect(), mode).to.include({ mode: 'free' });
        }
        // Past the waiting writers' queue heartbeat (1.1 s: 2 × recheckMs + 100 ms).
        await sleep(Math.max(0, EPISODE_MS / 2 - (performance.now() - started)));
        for (const [mode, locks] of lockClients) {
          const queue = (await locks.lock(`{oom-${mode}-queue}`).inspect()).queue;
          expect(queue.length, `${mode}: the waiting writer's place, ${EPISODE_MS / 2} ms in`).to.equal(1);
          await writers.get(mode)!.release();
        }
        // Where a release hands the lock over, the waiting writer holds it now, out of memory still.
        for (const mode of ['hash', 'redlock'] as const) held.get(mode)!.push(await waiting.get(mode)!);
        await sleep(Math.max(0, EPISODE_MS - (performance.now() - started)));
        for (const [mode, leases] of held) {
          expect(
            leases.filter((l) => !l.held),
            `${mode}: leases lost during the episode (${lost.join('; ')})`,
          ).to.deep.equal([]);
        }
        const summary = [...held].map(([mode, leases]) => `${mode} ${leases.filter((l) => l.held).length}/${leases.length}`);
        console.log(`      [${ctx.kind}, ${ctx.clientKind}] held through ${EPISODE_MS} ms out of memory: ${summary.join(', ')}`);
        await restore();
        restored = true;
      } finally {
        if (!restored) await restore();
      }
      // Memory back: the writers still waiting (no hand-over in legacy and bridge mode) get the lock
      // before a writer that comes now.
      for (const mode of ['legacy', 'bridge'] as const) {
        const locks = lockClients.get(mode)!;
        const later = locks.lock(`{oom-${mode}-queue}`).acquireWrite({ waitMs: 20_000, owner: 'later' });
        const first = await waiting.get(mode)!;
        expect(first.token, mode).to.not.equal('later');
        await first.release();
        await (await later).release();
      }
      expect(lost).to.deep.equal([]);
    } finally {
      for (const locks of lockClients.values()) await locks.close();
      for (const client of extra) disconnect(client);
      for (const node of nodes.slice(-others.length)) node.disconnect();
    }
  });
});
