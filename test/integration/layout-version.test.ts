/**
 * Rolling upgrades: a lock's state carries its layout version (the hash's
 * `v`, lua/includes/layout-version.lua). Today's library shares a lock with
 * the build from before the version existed (its scripts, from commit
 * 168a3c6, run as an old process would), both ways, and refuses a lock of
 * another version, in every layout and operation, before it writes anything.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { type AcquireRequest, ALL_HOLDS, type LockBackend } from '../../src/backends/backend.js';
import { hashLayout, type Layout, legacyLayout } from '../../src/backends/layouts.js';
import { ScriptedBackend } from '../../src/backends/scripted.js';
import { driverFor } from '../../src/clients/index.js';
import { LayoutVersionError, LockClient, type LockKeys, lockKeys } from '../../src/index.js';
import type { LegacyLockKeys } from '../../src/keys/legacy.js';
import { LAYOUT_VERSION } from '../../src/lua/scripts.generated.js';
import type { RedisClient } from '../../src/redis.js';
import { type RedisMastersHandle, startRedisMasters } from '../../src/testing/index.js';
import { forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { BeforeVersionProcess } from '../support/layout-before-version.js';
import { taggedLegacyKeys } from '../support/old-scripts.js';

const PREFIX = 'rwlock';
const FUTURE = LAYOUT_VERSION + 1;

forEachTopology('layout version', (ctx) => {
  let locks: LockClient;
  afterEach(async () => {
    await locks?.close();
  });

  describe('next to the build before the layout version', () => {
    it('shares a lock both ways: each refuses what the other holds, and a release of either lets the other in', async () => {
      const redis = ctx.client();
      locks = new LockClient(redis, { recheckMs: 50 });
      const R = 'shared:1';
      const keys = lockKeys(PREFIX, R);
      const old = new BeforeVersionProcess(redis, 'old-process');

      // The old build's fresh grant writes no version: today's library reads the lock as its own layout.
      expect(await old.acquireWrite(keys, 'old.1')).to.be.a('number');
      expect(await redis.hget(keys.state, 'v')).to.equal(null);
      expect(await locks.lock(R).tryAcquireRead()).to.equal(null);
      expect(await locks.lock(R).tryAcquireWrite()).to.equal(null);
      expect((await locks.inspect(R)).writer?.owner).to.equal('old-process');
      expect(await old.extend(keys)).to.be.greaterThan(0);
      expect(await old.release(keys, 'write', 'old.1')).to.equal(0);

      // Today's grant writes the version; the old build ignores it and still refuses and shares.
      const write = await locks.lock(R).acquireWrite();
      expect(await redis.hget(keys.state, 'v')).to.equal(String(LAYOUT_VERSION));
      const refused = await old.acquireRead(keys, 'old.2');
      expect(refused).to.be.an('array').with.property('2', 'write');
      await write.release();

      // Readers of both builds share it; a grant of today's on the old build's lock writes the version there.
      expect(await old.acquireRead(keys, 'old.3')).to.be.a('number');
      expect(await redis.hget(keys.state, 'v')).to.equal(null);
      const read = await locks.lock(R).acquireRead();
      expect(await redis.hget(keys.state, 'v')).to.equal(String(LAYOUT_VERSION));
      expect((await locks.inspect(R)).readers.map((r) => r.owner)).to.have.members(['old-process', read.token]);
      expect(await old.acquireWrite(keys, 'old.4'))
        .to.be.an('array')
        .with.property('2', 'read');

      // A writer of today's waits; the old build's release, freeing the lock, lets it in.
      const waiting = locks.lock(R).acquireWrite({ waitMs: 10_000 });
      await eventually('the writer queued', async () => (await locks.inspect(R)).queue.length === 1);
      await read.release();
      expect(await old.release(keys, 'read', 'old.3')).to.equal(0);
      const handed = await waiting;
      expect((await locks.inspect(R)).writer?.owner).to.equal(handed.token);
      await handed.release();
      expect(await redis.exists(keys.state, keys.leases, keys.queue)).to.equal(0);
    });
  });

  describe('a lock of another layout version', () => {
    const layouts = {
      hash: () => hashLayout(PREFIX) as Layout<LockKeys>,
      legacy: (cluster: boolean) => legacyLayout(PREFIX, taggedLegacyKeys, 'legacy', cluster) as Layout<LockKeys>,
      bridge: (cluster: boolean) => legacyLayout(PREFIX, taggedLegacyKeys, 'bridge', cluster) as Layout<LockKeys>,
    };
    let holdIds = 0;
    const request = (resource: string, keys: LockKeys, mode: 'read' | 'write', waitBeatMs = 0): AcquireRequest => ({
      resource,
      keys,
      mode,
      owner: 'me',
      holdId: `me.${++holdIds}`,
      leaseMs: 10_000,
      honourIntent: true,
      waitBeatMs,
      fair: false,
    });
    // Every operation of every layout, by an owner that holds nothing there (this layout's holds
    // were lost before the other layout took the lock: only then can one meet it).
    const refusals: [
      op: keyof Layout<LockKeys>['scripts'],
      name: string,
      run: (b: LockBackend, k: LockKeys, r: string) => Promise<unknown>,
    ][] = [
      ['acquireRead', 'a read acquire', (b, k, r) => b.acquire(request(r, k, 'read'))],
      ['acquireWrite', 'a write try', (b, k, r) => b.acquire(request(r, k, 'write'))],
      ['acquireWrite', 'a waiting write acquire', (b, k, r) => b.acquire(request(r, k, 'write', 2_000))],
      ['release', 'a release', (b, k) => b.release(k, 'write', 'me', 'me.0')],
      ['abandon', 'an abandon', (b, k) => b.abandon(k, 'me', ALL_HOLDS)],
      ['inspect', 'inspect', (b, k, r) => b.inspect(r, k)],
    ];

    it('covers every operation of a layout', () => {
      const covered = new Set([...refusals.map(([op]) => op), 'extend']);
      expect([...covered].sort()).to.deep.equal(Object.keys(hashLayout(PREFIX).scripts).sort());
    });

    for (const [layoutName, makeLayout] of Object.entries(layouts)) {
      it(`${layoutName}: every operation refuses it with a LayoutVersionError, and renewal calls its lease lost, writing nothing`, async () => {
        const redis = ctx.client();
        const backend = new ScriptedBackend(driverFor(redis), makeLayout(ctx.kind === 'cluster'));
        const R = `future-${layoutName}`;
        const keys = backend.keysFor(R);
        await futureLock(redis, backend, keys, R);
        const before = await snapshot(redis, keys);
        for (const [, name, run] of refusals) {
          const error = await run(backend, keys, R).then(
            () => expect.fail(`${name} was not refused`),
            (e: unknown) => e,
          );
          expect(error, name).to.be.instanceOf(LayoutVersionError);
          expect(error, name).to.include({ code: 'RWLOCK_LAYOUT_VERSION', lockLayout: FUTURE, libraryLayout: LAYOUT_VERSION });
          expect(await snapshot(redis, keys), `${name} wrote nothing`).to.deep.equal(before);
        }
        expect(await backend.extend([{ keys, owner: 'me', leaseMs: 10_000 }]), 'extend').to.deep.equal([0]);
        expect(await snapshot(redis, keys), 'extend wrote nothing').to.deep.equal(before);
      });
    }

    it('is refused through the API at once, naming both versions and what to do, with nothing left to give back', async () => {
      const redis = ctx.client();
      locks = new LockClient(redis, { recheckMs: 50 });
      const backgroundErrors: Error[] = [];
      locks.on('backgroundError', (e) => backgroundErrors.push(e));
      const R = 'future:api';
      const keys = lockKeys(PREFIX, R);
      await futureLock(redis, new ScriptedBackend(driverFor(redis), hashLayout(PREFIX)), keys, R);
      const before = await snapshot(redis, keys);

      const error = await locks
        .lock(R)
        .acquireWrite({ waitMs: 20_000 })
        .then(
          () => expect.fail('granted'),
          (e: unknown) => e as LayoutVersionError,
        );
      expect(error).to.be.instanceOf(LayoutVersionError);
      expect(error.resource).to.equal(R);
      expect(error.message).to.include(`written by redis-rwlock's storage layout ${FUTURE}`);
      expect(error.message).to.include(`this library runs layout ${LAYOUT_VERSION}`);
      expect(error.message).to.include(`upgrade this process to a version of layout ${FUTURE}`);
      expect(error.message).to.include('docs/upgrades.md');
      expect(await locks.inspect(R).catch((e: unknown) => e)).to.be.instanceOf(LayoutVersionError);
      await locks.close();
      expect(backgroundErrors).to.deep.equal([]);
      expect(await snapshot(redis, keys)).to.deep.equal(before);
    });
  });
});

/**
 * A lock as a process of layout FUTURE would leave it: a holder, a waiting
 * writer (so every key of the layout exists), and the hash's version.
 */
async function futureLock(redis: RedisClient, backend: LockBackend, keys: LockKeys, resource: string): Promise<void> {
  const base = { resource, keys, leaseMs: 30_000, honourIntent: true, fair: false } as const;
  const held = await backend.acquire({ ...base, mode: 'write', owner: 'future-holder', holdId: 'f.1', waitBeatMs: 0 });
  expect(held.granted).to.equal(true);
  const queued = await backend.acquire({ ...base, mode: 'write', owner: 'future-waiter', holdId: 'f.2', waitBeatMs: 20_000 });
  expect(queued.granted).to.equal(false);
  await redis.hset(keys.state, 'v', String(FUTURE));
}

/** Every key of the lock, its value (DUMP) and its expiry (PEXPIRETIME): equal snapshots, nothing written. */
async function snapshot(redis: RedisClient, keys: LockKeys): Promise<[string, Buffer | null, number][]> {
  const legacy = keys as Partial<LegacyLockKeys>;
  const names = [keys.state, keys.leases, keys.queue, legacy.read, legacy.write, legacy.readers].filter((k) => k !== undefined);
  return Promise.all(
    names.map(
      async (k): Promise<[string, Buffer | null, number]> => [k, await redis.dumpBuffer(k), (await redis.call('PEXPIRETIME', k)) as number],
    ),
  );
}

describe('layout version [redlock mode, 3 independent servers]', function () {
  this.timeout(30_000);
  let masters: RedisMastersHandle;
  let admin: Redis[];
  let lockClients: LockClient[] = [];
  let nodeClients: Redis[] = [];
  const open = () => {
    const nodes = masters.clients();
    nodeClients.push(...nodes);
    const locks = new LockClient(nodes, { mode: 'redlock', redlock: { nodeTimeoutMs: 500 } });
    lockClients.push(locks);
    return locks;
  };
  before(async function () {
    this.timeout(60_000);
    masters = await startRedisMasters(3);
    admin = masters.clients();
  });
  after(async () => {
    for (const a of admin ?? []) a.disconnect();
    await masters?.stop();
  });
  beforeEach(() => masters.flush());
  afterEach(async () => {
    await Promise.allSettled(lockClients.map((l) => l.close()));
    for (const c of nodeClients) c.disconnect();
    lockClients = [];
    nodeClients = [];
  });

  it('refuses a lock of another layout on the nodes with its LayoutVersionError, and a majority of its own layout decides', async () => {
    const R = 'future:redlock';
    const keys = lockKeys(PREFIX, R);
    const holder = await open().lock(R).acquireWrite();
    await holder.release();
    // Every node: a lock of the next layout. No majority can decide, and the error says why.
    for (const a of admin) {
      await futureLock(a, new ScriptedBackend(driverFor(a), hashLayout(PREFIX)), keys, R);
    }
    const before = await Promise.all(admin.map((a) => snapshot(a, keys)));
    const locks = open();
    const error = await locks
      .lock(R)
      .tryAcquireWrite()
      .then(
        () => expect.fail('granted'),
        (e: unknown) => e,
      );
    expect(error).to.be.instanceOf(LayoutVersionError);
    expect(error).to.include({ lockLayout: FUTURE, libraryLayout: LAYOUT_VERSION, resource: R });
    expect(await locks.inspect(R).catch((e: unknown) => e)).to.be.instanceOf(LayoutVersionError);
    expect(await Promise.all(admin.map((a) => snapshot(a, keys)))).to.deep.equal(before);

    // One node of the next layout, two free: the majority grants, and that node is left as it was.
    await masters.flush();
    await futureLock(admin[0]!, new ScriptedBackend(driverFor(admin[0]!), hashLayout(PREFIX)), keys, R);
    const one = await snapshot(admin[0]!, keys);
    const lease = await locks.lock(R).acquireWrite();
    expect(lease.held).to.equal(true);
    await lease.release();
    expect(await snapshot(admin[0]!, keys)).to.deep.equal(one);
  });
});
