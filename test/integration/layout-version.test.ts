/**
 * Rolling upgrades: a lock's state carries its layout version (the hash's
 * `v`, lua/includes/layout-version.lua). Today's library refuses a lock of
 * another version, in every layout and operation, before it writes
 * anything: the build from before the version existed (layout 1, its
 * scripts from commit 168a3c6, run as an old process would) as well as a
 * later one.
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
import { OldBuildProcess } from '../support/earlier-layouts.js';
import { taggedLegacyKeys } from '../support/old-scripts.js';

const PREFIX = 'rwlock';
const FUTURE = LAYOUT_VERSION + 1;

forEachTopology('layout version', (ctx) => {
  let locks: LockClient;
  afterEach(async () => {
    await locks?.close();
  });

  describe('next to the build before the layout version', () => {
    it('refuses its lock as layout 1 in every operation, writing nothing; a release of the old build frees it', async () => {
      const redis = ctx.client();
      locks = new LockClient(redis, { recheckMs: 50 });
      const R = 'shared:1';
      const keys = lockKeys(PREFIX, R);
      const old = new OldBuildProcess(redis, 'old-process', 'layout-before-version');

      // The old build's fresh grant writes no version: layout 1 wrote it.
      expect(await old.acquireWrite(keys, 'old.1')).to.be.a('number');
      expect(await redis.hget(keys.state, 'v')).to.equal(null);
      await expectRefusedAsLayoutOne(redis, locks, R, keys);
      expect(await old.release(keys, 'write', 'old.1')).to.equal(0);
      expect(await redis.exists(keys.state, keys.leases, keys.queue)).to.equal(0);
      // Free again, the lock is the next grant's: today's.
      const write = await locks.lock(R).acquireWrite();
      expect(await redis.hget(keys.state, 'v')).to.equal(String(LAYOUT_VERSION));
      await write.release();
    });
  });

  describe('a lock that layout 1 left with waiters only', () => {
    it('is told by its heartbeat fields, without a fence or a version, and refused, writing nothing', async () => {
      const redis = ctx.client();
      locks = new LockClient(redis, { recheckMs: 50 });
      const R = 'waiters:1';
      const keys = lockKeys(PREFIX, R);
      // A writer waiting behind an old process's two-key hold: layout 1 wrote its heartbeat (q:, qx), no grant yet (no f).
      const [seconds] = await redis.time();
      const beat = (Number(seconds) + 600) * 1000;
      await redis
        .multi()
        .hset(keys.state, 'q:old-waiter', beat, 'qx', beat)
        .zadd(keys.queue, Number(seconds) * 1_000_000, 'old-waiter')
        .pexpireat(keys.state, beat)
        .pexpireat(keys.queue, beat)
        .exec();
      await expectRefusedAsLayoutOne(redis, locks, R, keys);
    });
  });

  describe('next to a build of layout 1', () => {
    it('each refuses the lock the other holds, in every operation, writing nothing', async () => {
      const redis = ctx.client();
      locks = new LockClient(redis, { recheckMs: 50 });
      const old = new OldBuildProcess(redis, 'layout-1-process', 'layout-1');

      // Layout 1 meets a lock of this layout: refused by its acquire and release, lost to its renewal.
      const R = 'layout-1:a';
      const keys = lockKeys(PREFIX, R);
      const held = await locks.lock(R).acquireWrite({ leaseMs: 30_000 });
      const before = await snapshot(redis, keys);
      for (const [name, call] of [
        ['its read acquire', () => old.acquireRead(keys, 'l1.1')],
        ['its write try', () => old.acquireWrite(keys, 'l1.2')],
        ['its waiting write acquire', () => old.acquireWrite(keys, 'l1.3', 2_000)],
        ['its release', () => old.release(keys, 'write', 'l1.0')],
      ] as const) {
        const error = await (call() as Promise<unknown>).then(
          () => expect.fail(`${name} was not refused`),
          (e: unknown) => e as Error,
        );
        expect(error.message, name).to.match(new RegExp(`^RWLOCK_LAYOUT ${LAYOUT_VERSION} 1\\b`));
        expect(await snapshot(redis, keys), `${name} wrote nothing`).to.deep.equal(before);
      }
      expect(await old.extend(keys), 'its renewal').to.equal(0);
      expect(await snapshot(redis, keys), 'its renewal wrote nothing').to.deep.equal(before);
      await held.release();

      // This layout meets a lock of layout 1.
      const S = 'layout-1:b';
      const oldKeys = lockKeys(PREFIX, S);
      expect(await old.acquireWrite(oldKeys, 'l1.4')).to.be.a('number');
      expect(await redis.hget(oldKeys.state, 'v')).to.equal('1');
      await expectRefusedAsLayoutOne(redis, locks, S, oldKeys);
      expect(await old.release(oldKeys, 'write', 'l1.4')).to.equal(0);
      expect(await redis.exists(oldKeys.state, oldKeys.leases, oldKeys.queue)).to.equal(0);
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
        expect(await backend.extend([{ keys, owner: 'me', leaseMs: 10_000, holdIds: [] }]), 'extend').to.deep.equal([0]);
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

/** Today's read and write tries and inspect refuse a lock of layout 1 with a LayoutVersionError, writing nothing. */
async function expectRefusedAsLayoutOne(redis: RedisClient, locks: LockClient, resource: string, keys: LockKeys): Promise<void> {
  const before = await snapshot(redis, keys);
  for (const [name, attempt] of [
    ['a read try', () => locks.lock(resource).tryAcquireRead()],
    ['a write try', () => locks.lock(resource).tryAcquireWrite()],
    ['inspect', () => locks.inspect(resource)],
  ] as const) {
    const error = await (attempt() as Promise<unknown>).then(
      () => expect.fail(`${name} was not refused`),
      (e: unknown) => e,
    );
    expect(error, name).to.be.instanceOf(LayoutVersionError);
    expect(error, name).to.include({ lockLayout: 1, libraryLayout: LAYOUT_VERSION });
    expect(await snapshot(redis, keys), `${name} wrote nothing`).to.deep.equal(before);
  }
}

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
