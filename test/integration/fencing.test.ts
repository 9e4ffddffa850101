/**
 * Fencing in practice: examples/fencing.ts run on both topologies (a holder
 * paused past its lease has its late write refused), and fencedSet itself.
 */
import { expect } from 'chai';
import calculateSlot from 'cluster-key-slot';
import { runFencingExample } from '../../examples/fencing.js';
import type { LockRedisClient } from '../../src/clients/index.js';
import { fencedGet, fencedSet, fenceKeyOf, InvalidArgumentError, LockClient, StaleFenceError } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import { ALL_CLIENTS, forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { rejection } from '../support/rejection.js';

forEachTopology('fencing', { clients: ALL_CLIENTS }, (ctx) => {
  let redis: RedisClient; // the test's own look at Redis
  let client: LockRedisClient; // the LockClients' and fenced writes', of the suite's library
  beforeEach(async () => {
    redis = ctx.client();
    client = await ctx.lockRedis();
  });

  // The example and a client's keyPrefix are ioredis'.
  if (ctx.clientKind === 'ioredis')
    it("examples/fencing.ts: a holder paused past its lease has its late write refused, and the newer holder's data stays", async () => {
      const lines: string[] = [];
      const outcome = await runFencingExample(redis, (line) => lines.push(line));
      expect(outcome.fenceB).to.be.greaterThan(outcome.fenceA);
      expect(outcome.lossSignalled, 'the paused holder was told its lease was lost').to.equal(true);
      expect(outcome.staleWriteRefused, lines.join('\n')).to.equal(true);
      expect(outcome.finalValue).to.equal('report by B');
      expect(await redis.get('report:{42}#fence')).to.equal(String(outcome.fenceB));
    });

  it('accepts an equal or higher fence, refuses a lower one, atomically with the write', async () => {
    await fencedSet(client, 'cfg', 'v1', 100);
    await fencedSet(client, 'cfg', 'v2', 100); // the same holder writes again
    await fencedSet(client, 'cfg', 'v3', { fence: 250 });
    const error = await rejection(fencedSet(client, 'cfg', 'late', 200));
    expect(error).to.be.instanceOf(StaleFenceError);
    expect(error).to.include({ key: 'cfg', fence: 200, lastFence: 250 });
    expect(await redis.get('cfg')).to.equal('v3');
    expect(await redis.get(fenceKeyOf('cfg'))).to.equal('250');
  });

  it('writes a Buffer value byte for byte, bytes that are not UTF-8 among them', async () => {
    const bytes = Buffer.from([0xff, 0x00, 0x80, 0x41, 0xc3]);
    await fencedSet(client, 'blob', 'text first', 99); // a new ioredis driver's first call takes another path
    await fencedSet(client, 'blob', bytes, 100);
    expect((await redis.getBuffer('blob'))?.equals(bytes), 'the bytes read back').to.equal(true);
  });

  it('takes fences from real leases, across lock expiry and deletion', async () => {
    const locks = new LockClient(client);
    const first = await locks.lock('doc:{7}').acquireWrite({ leaseMs: 50 });
    await new Promise((resolve) => setTimeout(resolve, 120)); // expired, then taken again after the hash is gone
    const second = await locks.lock('doc:{7}').acquireWrite();
    await fencedSet(client, 'doc:{7}', 'new', second);
    expect(await rejection(fencedSet(client, 'doc:{7}', 'old', first))).to.be.instanceOf(StaleFenceError);
    await second.release();
    await locks.close();
  });

  it("gives a reentrant hold its holding's fence, so the outer lease may still write after a nested one; an upgrade takes a larger one", async () => {
    const locks = new LockClient(client);
    await locks.withWrite('doc:{8}', async (outer) => {
      await locks.withWrite('doc:{8}', async (inner) => {
        expect(inner.fence).to.equal(outer.fence);
        await fencedSet(client, 'doc:{8}', 'inner', inner);
      });
      await fencedSet(client, 'doc:{8}', 'outer', outer); // a live holder is never refused its own writes
    });
    expect(await redis.get('doc:{8}')).to.equal('outer');
    const read = await locks.lock('doc:{8}').acquireRead({ owner: 'up' });
    const again = await locks.lock('doc:{8}').acquireRead({ owner: 'up' });
    expect(again.fence).to.equal(read.fence);
    const write = await locks.lock('doc:{8}').acquireWrite({ owner: 'up' });
    expect(write.fence).to.be.greaterThan(read.fence);
    for (const lease of [write, again, read]) await lease.release();
    await locks.close();
  });

  it("fencedGet raises the key's fence to the reader's: an expired writer's late write is refused while readers read", async () => {
    const locks = new LockClient(client);
    const lock = locks.lock('doc:{9}');
    const writer = await lock.acquireWrite({ leaseMs: 50 });
    await fencedSet(client, 'doc:{9}', 'v1', writer);
    await eventually('the writer to lose its lease', () => !writer.held);
    const [r1, r2] = [await lock.acquireRead(), await lock.acquireRead()];
    expect(r2.fence).to.be.greaterThan(r1.fence);
    expect(await fencedGet(client, 'doc:{9}', r2)).to.equal('v1');
    expect(await fencedGet(client, 'doc:{9}', r1)).to.equal('v1'); // a lower reader fence is not refused
    expect(await rejection(fencedSet(client, 'doc:{9}', 'late', writer))).to.be.instanceOf(StaleFenceError);
    expect(await redis.get('doc:{9}')).to.equal('v1');
    expect(await fencedGet(client, 'nothing:{9}', r1)).to.equal(null);
    for (const lease of [r1, r2]) await lease.release();
    const next = await lock.acquireWrite();
    await fencedSet(client, 'doc:{9}', 'v2', next); // the next writer's fence is above every reader's
    await next.release();
    await locks.close();
  });

  it('refuses a read lease with InvalidArgumentError, writing nothing: a reader cannot write through fencedSet', async () => {
    const locks = new LockClient(client);
    const error = await rejection(locks.withRead('doc:{10}', (lease) => fencedSet(client, 'doc:{10}', 'v', lease)));
    expect(error).to.be.instanceOf(InvalidArgumentError);
    expect((error as Error).message).to.match(/read lease.*acquire the write lock/);
    expect(await redis.exists('doc:{10}', fenceKeyOf('doc:{10}'))).to.equal(0);
    await locks.withWrite('doc:{10}', (lease) => fencedSet(client, 'doc:{10}', 'v', lease));
    expect(await redis.get('doc:{10}')).to.equal('v');
    await locks.close();
  });

  if (ctx.clientKind === 'ioredis')
    it("on a client with a keyPrefix writes under the prefix; a LockClient is refused, and its prefix option gives the prefix's names", async () => {
      const prefixed = ctx.client({ keyPrefix: 'app:' });
      const error = (() => {
        try {
          new LockClient(prefixed);
        } catch (e) {
          return e;
        }
      })();
      expect(error).to.be.instanceOf(InvalidArgumentError);
      expect((error as Error).message).to.include('{ prefix: "app:rwlock" }');
      const locks = new LockClient(redis, { prefix: 'app:rwlock' });
      const lease = await locks.lock('doc:{7}').acquireWrite();
      // The names a prefixed client would have used: its prefix before the default ones.
      const plain = new LockClient(redis);
      expect(locks.lock('doc:{7}').keys.state).to.equal(`app:${plain.lock('doc:{7}').keys.state}`);
      await plain.close();
      expect(await redis.exists(locks.lock('doc:{7}').keys.state)).to.equal(1);
      await fencedSet(prefixed, 'doc:{7}', 'v1', lease);
      expect(await redis.get('app:doc:{7}')).to.equal('v1');
      expect(await fencedGet(prefixed, 'doc:{7}', lease)).to.equal('v1');
      await lease.release();
      await locks.close();
    });

  it("keeps the fence in the key's slot, sets an expiry on the value only, and refuses bad input", async () => {
    for (const key of ['plain', 'user:{42}:profile', 'a{b', '{x}{}']) {
      expect(calculateSlot(fenceKeyOf(key)), key).to.equal(calculateSlot(key));
    }
    // No hash tag, and a "}" that would end a wrapping tag early: no name in the key's slot can be derived.
    for (const key of ['a}b', '{}odd']) expect(() => fenceKeyOf(key), key).to.throw(InvalidArgumentError, /hash tag/);
    await fencedSet(client, 'a}b', 'v', 1, { fenceKey: '{a}b}#fence-not-same-slot' }).then(
      () => expect.fail('a fence key in another slot was accepted'),
      (error: unknown) => expect(error).to.be.instanceOf(InvalidArgumentError),
    );
    await fencedSet(client, 'short', 'v', 5, { ttlMs: 60_000 });
    expect(await redis.pttl('short')).to.be.within(1, 60_000);
    expect(await redis.pttl(fenceKeyOf('short'))).to.equal(-1);
    expect(await rejection(fencedSet(client, 'k', 'v', -1))).to.be.instanceOf(InvalidArgumentError);
    expect(await rejection(fencedSet(client, 'k', 'v', 1.5))).to.be.instanceOf(InvalidArgumentError);
    expect(await rejection(fencedSet(client, '', 'v', 1))).to.be.instanceOf(InvalidArgumentError);
    expect(await rejection(fencedSet(client, 'k', 'v', 1, { fenceKey: 'k' }))).to.be.instanceOf(InvalidArgumentError);
  });
});
