import { expect } from 'chai';
import { holderArg, runScript } from '../../src/backends/scripts.js';
import { driverFor, type LockRedisClient } from '../../src/clients/index.js';
import { CrossSlotError, type LegacyLockKeys, LockClient, LockLostError, UpgradeConflictError } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import { forEachTopology, ONE_NODE_REDIS } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { interopSuite } from '../support/interop-suite.js';
import { allKeys, expectNoLostUpdates, runMixedWorkers } from '../support/mixed-workers.js';
import { OldLocker, taggedLegacyKeys } from '../support/old-scripts.js';
import { totalKeys } from '../support/redis-stats.js';
import { releaseLater } from '../support/release-later.js';

forEachTopology('bridge mode', { clients: ONE_NODE_REDIS }, (ctx) => {
  describe('next to old processes', () => interopSuite(ctx, 'bridge'));

  describe('next to hash-mode processes', () => {
    const R = 'page:9';
    let redis: RedisClient; // the test's own look at Redis
    let lockRedis: LockRedisClient; // the LockClients' client, of the suite's library
    let bridge: LockClient;
    let hash: LockClient;
    beforeEach(async () => {
      redis = ctx.client();
      lockRedis = await ctx.lockRedis();
      bridge = new LockClient(lockRedis, { mode: 'bridge', legacyKeys: taggedLegacyKeys, recheckMs: 50 });
      hash = new LockClient(lockRedis, { recheckMs: 50 });
    });
    afterEach(async () => {
      await bridge.close();
      await hash.close();
    });

    it('holds the hash-mode lock itself: each refuses what the other holds', async () => {
      const bw = await bridge.lock(R).acquireWrite();
      expect(bridge.lock(R).keys.state).to.equal(hash.lock(R).keys.state);
      expect(await hash.lock(R).tryAcquireRead()).to.equal(null);
      expect(await hash.lock(R).tryAcquireWrite()).to.equal(null);
      expect((await hash.inspect(R)).writer?.owner).to.equal(bw.token);
      await bw.release();
      const hr = await hash.lock(R).acquireRead();
      expect(await bridge.lock(R).tryAcquireWrite()).to.equal(null);
      const br = await bridge.lock(R).tryAcquireRead();
      expect(br).to.not.equal(null);
      await hr.release();
      await br!.release();
      const hw = await hash.lock(R).acquireWrite();
      expect(await bridge.lock(R).tryAcquireRead()).to.equal(null);
      await hw.release();
      expect(await allKeys(redis)).to.deep.equal([]);
    });

    it('queues its readers behind a waiting hash-mode writer (writer preference holds across modes)', async () => {
      const br = await bridge.lock(R).acquireRead();
      const waiting = hash.lock(R).acquireWrite({ waitMs: 5_000 });
      await eventually('the hash-mode writer to wait', async () => (await hash.inspect(R)).waitingWriter !== null);
      expect(await bridge.lock(R).tryAcquireRead()).to.equal(null);
      await br.release();
      const hw = await waiting;
      await hw.release();
    });

    it('fails a second concurrent upgrader at once, whichever mode it runs in', async () => {
      const br = await bridge.lock(R).acquireRead();
      const hr = await hash.lock(R).acquireRead();
      const upgrading = bridge.lock(R).acquireWrite({ owner: br.token, waitMs: 5_000 });
      await eventually('the bridge reader to wait to upgrade', async () => (await hash.inspect(R)).waitingWriter?.owner === br.token);
      const error = await hash
        .lock(R)
        .acquireWrite({ owner: hr.token, waitMs: 1_000 })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error).to.be.instanceOf(UpgradeConflictError);
      await hr.release();
      const w = await upgrading;
      await w.release();
      await br.release();
    });

    it('hands out strictly growing fences across bridge and hash-mode grants', async () => {
      const fences: number[] = [];
      for (let i = 0; i < 6; i++) {
        const client = i % 2 ? hash : bridge;
        const l = await (i % 3 ? client.lock(R).acquireWrite() : client.lock(R).acquireRead());
        fences.push(l.fence);
        await l.release();
      }
      for (let i = 1; i < fences.length; i++) expect(fences[i]).to.be.greaterThan(fences[i - 1]!);
    });

    it('wakes a waiting hash-mode writer at once when a bridge reader releases, and a bridge writer when a hash reader does', async () => {
      const slowHash = new LockClient(lockRedis, { recheckMs: 5_000 });
      const slowBridge = new LockClient(lockRedis, { mode: 'bridge', legacyKeys: taggedLegacyKeys, recheckMs: 5_000 });
      try {
        for (const [holder, waiter] of [
          [bridge, slowHash],
          [hash, slowBridge],
        ] as const) {
          const r = await holder.lock(R).acquireRead();
          const released = releaseLater(150, () => r.release());
          const w = await waiter.lock(R).acquireWrite({ waitMs: 10_000 });
          // Woken by the release, long before its 5 s re-check.
          expect(performance.now() - released.sentAt()).to.be.within(0, 2_000);
          await w.release();
        }
      } finally {
        await slowHash.close();
        await slowBridge.close();
      }
    });

    it('renews a write hold its acquire finds again (a resend) for the lease from then, the write key with it', async () => {
      const keys = bridge.lock(R).keys as LegacyLockKeys;
      const all = [keys.state, keys.leases, keys.queue, keys.read, keys.write, keys.readers] as const;
      const tryWrite = () => runScript(driverFor(redis), 'legacyAcquireWrite', all, [60_000, holderArg('write', 'b.1', 'b'), 0, '0']);
      const fence = await tryWrite();
      expect(fence).to.be.a('number');
      // As if most of the lease had passed: a second left of it, and of the write key.
      const [seconds, micros] = await redis.time();
      const soon = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) + 1_000;
      await redis.zadd(keys.leases, 'XX', soon, 'b');
      await redis.pexpireat(keys.write, soon);
      expect(await tryWrite(), 'the same grant, for exactly its lease').to.equal(fence);
      expect(Number(await redis.zscore(keys.leases, 'b')), 'its deadline').to.be.above(soon + 50_000);
      expect(await redis.get(keys.write)).to.equal('b');
      expect(await redis.pttl(keys.write), 'the write key lives as long').to.be.above(50_000);
      expect(await runScript(driverFor(redis), 'legacyRelease', all, [holderArg('write', 'b.1', 'b'), keys.peerChannel])).to.equal(0);
      expect(await allKeys(redis)).to.deep.equal([]);
    });

    it("never overwrites an old process's write key with its own, when its owner acquires again after the key was taken by force", async () => {
      const keys = bridge.lock(R).keys as LegacyLockKeys;
      const bw = await bridge.lock(R).acquireWrite({ owner: 'job-1' });
      expect(await redis.get(keys.write)).to.equal(bw.token);
      // An operator's tool of the old scheme deletes the write key, and an old process takes it.
      await redis.del(keys.write);
      expect(await new OldLocker(redis, keys.read, keys.write).tryWrite()).to.equal(true);
      const theirs = await redis.get(keys.write);
      expect(theirs).to.not.equal(bw.token);
      // The same owner again (reentrant): granted by the hash state, and the old process's key stays its own.
      const again = await bridge.lock(R).acquireWrite({ owner: 'job-1' });
      expect(await redis.get(keys.write), "the old process's write key").to.equal(theirs);
      // Its renewal then finds another writer on the old keys: the lease is lost, the key still theirs.
      expect(await bw.extend().catch((error: unknown) => error)).to.be.instanceOf(LockLostError);
      expect(await redis.get(keys.write)).to.equal(theirs);
      await again.release().catch(() => undefined);
      await bw.release().catch(() => undefined);
      expect(await redis.get(keys.write), 'left to its holder by the releases too').to.equal(theirs);
      await redis.del(keys.write);
    });

    it('is what keeps old and hash-mode processes apart: a hash-mode process alone does not see old processes', async () => {
      // Documents why hash mode comes only once migrate-check finds no old process.
      const keys = taggedLegacyKeys(R);
      const old = new OldLocker(redis, keys.read, keys.write);
      expect(await old.tryWrite()).to.equal(true);
      const hr = await hash.lock(R).tryAcquireRead();
      expect(hr).to.not.equal(null); // no bridge process in between: nothing stops it
      await hr!.release();
      expect(await bridge.lock(R).tryAcquireRead()).to.equal(null);
    });
  });

  if (ctx.kind === 'cluster') {
    describe('on a Cluster', () => {
      const refuse = (redis: LockRedisClient, resource: string, legacyKeys?: (r: string) => { read: string; write: string }) => {
        try {
          new LockClient(redis, { mode: 'bridge', ...(legacyKeys ? { legacyKeys } : {}) }).lock(resource);
        } catch (error) {
          return error as Error;
        }
        return undefined;
      };

      it("refuses legacy keys outside the lock's slot at lock(), saying why and what to do, with Redis untouched", async () => {
        const redis = ctx.client();
        const client = await ctx.lockRedis();
        const before = await totalKeys(redis);
        const error = refuse(client, 'cache:user:42');
        expect(error).to.be.instanceOf(CrossSlotError);
        expect(error!.message).to.include('one slot');
        expect(error!.message).to.include('"{cache:user:42}"');
        // Both legacy keys in one slot is not enough: it must be the lock's.
        const other = refuse(client, 'cache:user:42', (r) => ({ read: `{x}${r}:read`, write: `{x}${r}:write` }));
        expect(other).to.be.instanceOf(CrossSlotError);
        expect(other!.message).to.include('rwlock:{cache:user:42}');
        expect(await totalKeys(redis)).to.equal(before);
      });

      it('works for a resource with its own hash tag when the legacy keys carry that tag', async () => {
        const redis = ctx.client();
        const locks = new LockClient(await ctx.lockRedis(), {
          mode: 'bridge',
          legacyKeys: (r) => ({ read: `${r}:read`, write: `${r}:write` }),
        });
        const w = await locks.lock('user:{42}:profile').acquireWrite();
        expect(await redis.get('user:{42}:profile:write')).to.equal(w.token);
        await w.release();
        await locks.close();
      });
    });
  }

  // Lost updates among processes of every kind: the scripts' interop, run with ioredis lock clients (the
  // multiprocess suite runs worker processes on node-redis).
  if (ctx.clientKind === 'ioredis') {
    describe('several processes', () => {
      const RESOURCES = ['alpha', 'beta'];
      it('old, legacy-mode and bridge-mode processes together lose no update of a non-atomic counter', async function () {
        this.timeout(180_000);
        const results = await runMixedWorkers(ctx, ['old', 'old', 'legacy', 'bridge', 'bridge'], RESOURCES);
        const redis = ctx.client();
        expect(await expectNoLostUpdates(redis, results, RESOURCES)).to.be.greaterThan(100);
        expect(await allKeys(redis, '*rwlock*')).to.deep.equal([]);
        expect(await allKeys(redis, '*:read')).to.deep.equal([]);
        expect(await allKeys(redis, '*:write')).to.deep.equal([]);
      });

      it('bridge-mode and hash-mode processes together lose no update, and no reader sees a half-built value', async function () {
        this.timeout(180_000);
        const results = await runMixedWorkers(ctx, ['bridge', 'bridge', 'hash', 'hash'], RESOURCES);
        const redis = ctx.client();
        expect(await expectNoLostUpdates(redis, results, RESOURCES)).to.be.greaterThan(100);
        expect(
          results.reduce((s, r) => s + r.halfBuilt, 0),
          'reads that saw a half-built value',
        ).to.equal(0);
        expect(await allKeys(redis, '*rwlock*')).to.deep.equal([]);
      });
    });
  }
});
