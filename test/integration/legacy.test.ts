import { expect } from 'chai';
import type { LockRedisClient } from '../../src/clients/index.js';
import { CrossSlotError, InvalidArgumentError, LockClient, type RWLockError } from '../../src/index.js';
import { forEachTopology, ONE_NODE_REDIS } from '../setup/topologies.js';
import { interopSuite, legacyKeysFor } from '../support/interop-suite.js';
import { allKeys, expectNoLostUpdates, runMixedWorkers } from '../support/mixed-workers.js';
import { OldLocker, taggedLegacyKeys } from '../support/old-scripts.js';
import { totalKeys } from '../support/redis-stats.js';

// biome-ignore lint/suspicious/noExplicitAny: hostile values on purpose
type AnyOptions = any;

forEachTopology('legacy mode', { clients: ONE_NODE_REDIS }, (ctx) => {
  describe('next to old processes', () => interopSuite(ctx, 'legacy'));

  describe('layout', () => {
    it(
      ctx.kind === 'standalone'
        ? 'uses <resource>:read and <resource>:write by default, and keeps its own state beside them, not in the hash layout'
        : 'keeps its own state beside tagged legacy keys, in their slot, not in the hash layout',
      async () => {
        const redis = ctx.client();
        const locks = new LockClient(await ctx.lockRedis(), {
          mode: 'legacy',
          ...(ctx.kind === 'cluster' ? { legacyKeys: taggedLegacyKeys } : {}),
        });
        const lock = locks.lock('cache:user:42');
        const expected = legacyKeysFor(ctx)('cache:user:42');
        if (ctx.kind === 'standalone') expect(expected).to.deep.equal({ read: 'cache:user:42:read', write: 'cache:user:42:write' });
        const w = await lock.acquireWrite();
        expect(await redis.get(expected.write)).to.equal(w.token);
        expect(lock.keys.state).to.equal(`rwlock#legacy:${expected.read}`);
        expect(await allKeys(redis)).to.deep.equal(
          [expected.write, `rwlock#legacy-leases:${expected.read}`, `rwlock#legacy:${expected.read}`].sort(),
        );
        await w.release();
        expect(await allKeys(redis)).to.deep.equal([]);
        await locks.close();
      },
    );

    it("inspect shows each key of the two-key layout with its holder's token and its own TTL", async () => {
      const locks = new LockClient(await ctx.lockRedis(), {
        mode: 'legacy',
        ...(ctx.kind === 'cluster' ? { legacyKeys: taggedLegacyKeys } : {}),
      });
      const lock = locks.lock('inspect:ttl');
      const w = await lock.acquireWrite({ leaseMs: 60_000 });
      const writing = (await locks.inspect('inspect:ttl')).legacy!;
      expect(writing.write.value).to.equal(w.token);
      expect(writing.write.ttlMs).to.be.within(1, 60_000);
      expect(writing.read).to.include({ value: null, ttlMs: null });
      await w.release();
      const r = await lock.acquireRead({ leaseMs: 30_000 });
      const reading = (await locks.inspect('inspect:ttl')).legacy!;
      expect(reading.read.value).to.equal(r.token);
      expect(reading.read.ttlMs).to.be.within(1, 30_000);
      expect(reading.write).to.include({ value: null, ttlMs: null });
      await r.release();
      await locks.close();
    });

    it('takes any key names from legacyKeys, and refuses a lock whose names cannot be used', async () => {
      const redis = ctx.client();
      const locks = new LockClient(await ctx.lockRedis(), {
        mode: 'legacy',
        legacyKeys: (r) => ({ read: `lock:read:{${r}}`, write: `lock:write:{${r}}` }),
      });
      const old = new OldLocker(redis, 'lock:read:{a}', 'lock:write:{a}');
      expect(await old.tryRead()).to.equal(true);
      expect(await locks.lock('a').tryAcquireWrite()).to.equal(null);
      await old.releaseRead();
      const w = await locks.lock('a').tryAcquireWrite();
      expect(w).to.not.equal(null);
      expect(await old.tryRead()).to.equal(false);
      await locks.close();
    });
  });

  describe('with bridge-mode processes (rolling from legacy to bridge)', () => {
    it("neither mode frees the read key under the other's readers, and writers of each wait for both", async () => {
      const redis = ctx.client();
      const legacyKeys = taggedLegacyKeys;
      const client = await ctx.lockRedis();
      const legacy = new LockClient(client, { mode: 'legacy', legacyKeys });
      const bridge = new LockClient(client, { mode: 'bridge', legacyKeys });
      const old = new OldLocker(redis, legacyKeys('doc').read, legacyKeys('doc').write);
      const a = await legacy.lock('doc').acquireRead();
      const b = await bridge.lock('doc').acquireRead();
      await a.release();
      expect(await old.tryWrite()).to.equal(false);
      expect(await legacy.lock('doc').tryAcquireWrite()).to.equal(null);
      await b.release();
      const w = await legacy.lock('doc').tryAcquireWrite();
      expect(w).to.not.equal(null);
      expect(await bridge.lock('doc').tryAcquireRead()).to.equal(null);
      expect(await bridge.lock('doc').tryAcquireWrite()).to.equal(null);
      await w!.release();
      const bw = await bridge.lock('doc').tryAcquireWrite();
      expect(bw).to.not.equal(null);
      expect(await legacy.lock('doc').tryAcquireRead()).to.equal(null);
      await bw!.release();
      await legacy.close();
      await bridge.close();
      expect(await allKeys(redis)).to.deep.equal([]);
    });
  });

  describe('bad input', () => {
    const cases: [string, (redis: LockRedisClient) => unknown, abstract new (...args: never[]) => RWLockError][] = [
      ['an unknown mode', (redis) => new LockClient(redis, { mode: 'two-key' as AnyOptions }), InvalidArgumentError],
      ['a mode that is not a string', (redis) => new LockClient(redis, { mode: 1 as AnyOptions }), InvalidArgumentError],
      [
        'legacyKeys that is not a function',
        (redis) => new LockClient(redis, { mode: 'legacy', legacyKeys: { read: 'r', write: 'w' } as AnyOptions }),
        InvalidArgumentError,
      ],
      [
        'legacyKeys in hash mode',
        (redis) => new LockClient(redis, { legacyKeys: (r: string) => ({ read: `${r}:r`, write: `${r}:w` }) }),
        InvalidArgumentError,
      ],
      [
        'legacyKeys returning non-strings',
        (redis) => new LockClient(redis, { mode: 'legacy', legacyKeys: () => ({ read: 1, write: 2 }) as AnyOptions }).lock('x'),
        InvalidArgumentError,
      ],
      [
        'legacyKeys returning nothing',
        (redis) => new LockClient(redis, { mode: 'legacy', legacyKeys: (() => undefined) as AnyOptions }).lock('x'),
        InvalidArgumentError,
      ],
      [
        'legacyKeys returning an empty name',
        (redis) => new LockClient(redis, { mode: 'legacy', legacyKeys: () => ({ read: '', write: 'w' }) }).lock('x'),
        InvalidArgumentError,
      ],
      [
        'legacyKeys returning the same key twice',
        (redis) => new LockClient(redis, { mode: 'legacy', legacyKeys: () => ({ read: '{x}k', write: '{x}k' }) }).lock('x'),
        InvalidArgumentError,
      ],
      [
        'legacyKeys returning a name with a newline',
        (redis) => new LockClient(redis, { mode: 'legacy', legacyKeys: () => ({ read: '{x}r\n', write: '{x}w' }) }).lock('x'),
        InvalidArgumentError,
      ],
      [
        "legacyKeys returning one of the library's own names",
        (redis) => new LockClient(redis, { mode: 'bridge', legacyKeys: () => ({ read: '{x}:r', write: 'rwlock:{x}' }) }).lock('x'),
        InvalidArgumentError,
      ],
      [
        'legacyKeys that throws',
        (redis) =>
          new LockClient(redis, {
            mode: 'legacy',
            legacyKeys: () => {
              throw new Error('boom');
            },
          }).lock('x'),
        InvalidArgumentError,
      ],
    ];
    if (ctx.kind === 'cluster') {
      cases.push(['legacy keys in two slots on a Cluster', (redis) => new LockClient(redis, { mode: 'legacy' }).lock('x'), CrossSlotError]);
    }
    for (const [what, call, type] of cases) {
      it(`refuses ${what} with ${type.name} and leaves Redis untouched`, async () => {
        const redis = ctx.client();
        await redis.set('{x}:read', 'untouched');
        const before = await totalKeys(redis);
        let error: unknown;
        const client = await ctx.lockRedis();
        try {
          await call(client);
        } catch (e) {
          error = e;
        }
        expect(error, 'should have thrown').to.be.instanceOf(type);
        expect((error as Error).message.length).to.be.greaterThan(20);
        expect(await totalKeys(redis)).to.equal(before);
        expect(await redis.get('{x}:read')).to.equal('untouched');
      });
    }

    if (ctx.kind === 'cluster') {
      it('says why and what to do when the legacy keys are in two slots', async () => {
        const redis = await ctx.lockRedis();
        const error = (() => {
          try {
            new LockClient(redis, { mode: 'legacy' }).lock('cache:user:42');
          } catch (e) {
            return e as Error;
          }
          return undefined;
        })();
        expect(error).to.be.instanceOf(CrossSlotError);
        expect(error!.message).to.match(/cache:user:42:read" is in slot \d+/);
        expect(error!.message).to.include('one slot');
        expect(error!.message).to.include('{cache:user:42}:read');
      });
    }
  });

  // Lost updates among processes of every kind: the scripts' interop, run with ioredis lock clients (the
  // multiprocess suite runs worker processes on node-redis).
  if (ctx.clientKind === 'ioredis') {
    describe('several processes', () => {
      const RESOURCES = ['alpha', 'beta'];
      it('old processes and legacy-mode processes lose no update of a non-atomic counter', async function () {
        this.timeout(180_000);
        const results = await runMixedWorkers(ctx, ['old', 'old', 'legacy', 'legacy'], RESOURCES);
        const redis = ctx.client();
        const writes = await expectNoLostUpdates(redis, results, RESOURCES);
        expect(writes).to.be.greaterThan(100);
        expect(
          results.filter((r) => r.kind === 'old').reduce((s, r) => s + Object.values(r.writes).reduce((a, b) => a + b, 0), 0),
        ).to.be.greaterThan(20);
        expect(await allKeys(redis, '*rwlock*')).to.deep.equal([]);
        expect(await allKeys(redis, '*:read')).to.deep.equal([]);
        expect(await allKeys(redis, '*:write')).to.deep.equal([]);
      });

      it('with old processes that only write, no library reader ever sees a half-built value either', async function () {
        this.timeout(180_000);
        const results = await runMixedWorkers(ctx, ['old', 'legacy', 'legacy'], RESOURCES, { RWLOCK_OLD_READS: '0' });
        await expectNoLostUpdates(ctx.client(), results, RESOURCES);
        expect(results.reduce((s, r) => s + r.reads, 0)).to.be.greaterThan(100);
        expect(
          results.reduce((s, r) => s + r.halfBuilt, 0),
          'reads that saw a half-built value',
        ).to.equal(0);
      });
    });
  }
});
