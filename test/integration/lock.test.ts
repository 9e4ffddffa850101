import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { LockRedisClient } from '../../src/clients/index.js';
import {
  AcquireAbortedError,
  AcquireTimeoutError,
  ClientClosedError,
  InvalidArgumentError,
  type Lease,
  LockClient,
  type LockClientOptions,
  LockLostError,
  LockNotHeldError,
  UpgradeConflictError,
} from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import { ALL_CLIENTS, forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { masters, scriptCalls, totalKeys } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';

forEachTopology('read-write lock', { clients: ALL_CLIENTS }, (ctx) => {
  let redis: RedisClient; // the test's own look at Redis
  let client: LockRedisClient; // the LockClients' client, of the suite's library
  let locks: LockClient;
  const open = (options?: LockClientOptions) => new LockClient(client, options);

  beforeEach(async () => {
    redis = ctx.client();
    client = await ctx.lockRedis();
    locks = open();
  });
  afterEach(async () => {
    await locks.close();
  });

  it('shares reads among owners', async () => {
    const lock = locks.lock('shared');
    const a = await lock.acquireRead();
    const b = await lock.acquireRead();
    const c = await lock.tryAcquireRead();
    expect(c).to.not.equal(null);
    const info = await lock.inspect();
    expect(info.mode).to.equal('read');
    expect(info.readers.map((r) => r.owner).sort()).to.deep.equal([a.token, b.token, c!.token].sort());
    await Promise.all([a.release(), b.release(), c!.release()]);
    expect(await totalKeys(redis)).to.equal(0);
  });

  it('lets a write exclude reads and other writes, and a read exclude writes', async () => {
    const lock = locks.lock('exclusive');
    const w = await lock.acquireWrite();
    expect(await lock.tryAcquireRead()).to.equal(null);
    expect(await lock.tryAcquireWrite()).to.equal(null);
    expect((await lock.inspect()).writer?.owner).to.equal(w.token);
    await w.release();
    const r = await lock.acquireRead();
    expect(await lock.tryAcquireWrite()).to.equal(null);
    await r.release();
    const w2 = await lock.tryAcquireWrite();
    expect(w2?.mode).to.equal('write');
    await w2!.release();
  });

  it('is reentrant for the same owner, in both modes', async () => {
    const lock = locks.lock('reentrant');
    const w1 = await lock.acquireWrite({ owner: 'job-1' });
    const w2 = await lock.acquireWrite({ owner: 'job-1', waitMs: 0 });
    expect((await lock.inspect()).writer).to.include({ owner: 'job-1', holds: 2 });
    await w2.release();
    expect(await lock.tryAcquireWrite()).to.equal(null); // still held once
    await w1.release();
    const r1 = await lock.acquireRead({ owner: 'job-2' });
    const r2 = await lock.acquireRead({ owner: 'job-2' });
    const readers = (await lock.inspect()).readers;
    expect(readers.map((x) => [x.owner, x.holds])).to.deep.equal([['job-2', 2]]);
    await r1.release();
    await r2.release();
    expect((await lock.inspect()).mode).to.equal('free');
  });

  it('upgrades the sole reader in place', async () => {
    const lock = locks.lock('upgrade');
    const r = await lock.acquireRead();
    const w = await lock.acquireWrite({ owner: r.token, waitMs: 0 });
    const info = await lock.inspect();
    expect(info.mode).to.equal('write');
    expect(info.writer?.owner).to.equal(r.token);
    expect(info.readers.map((x) => x.owner)).to.deep.equal([r.token]);
    expect(await lock.tryAcquireRead()).to.equal(null);
    await w.release();
    expect((await lock.inspect()).mode).to.equal('read'); // the read hold remains
    await r.release();
  });

  it('fails a second concurrent upgrader at once instead of deadlocking', async () => {
    const lock = locks.lock('two-upgraders');
    const a = await lock.acquireRead();
    const b = await lock.acquireRead();
    const upgradeA = lock.acquireWrite({ owner: a.token, waitMs: 5_000 });
    await eventually('A to wait to upgrade', async () => (await lock.inspect()).waitingWriter?.owner === a.token);
    const started = performance.now();
    const error = await rejection(lock.acquireWrite({ owner: b.token, waitMs: 5_000 }));
    expect(error).to.be.instanceOf(UpgradeConflictError);
    expect(performance.now() - started).to.be.below(1_000); // at once, not after waitMs
    await b.release(); // what the error tells B to do
    const w = await upgradeA;
    expect((await lock.inspect()).writer?.owner).to.equal(a.token);
    await w.release();
    await a.release();
  });

  it('downgrades: a writer takes read, and releasing write leaves read held', async () => {
    const lock = locks.lock('downgrade');
    const w = await lock.acquireWrite();
    const r = await lock.acquireRead({ owner: w.token, waitMs: 0 });
    expect(await lock.tryAcquireRead()).to.equal(null); // still write-locked for others
    await w.release();
    const other = await lock.tryAcquireRead();
    expect(other).to.not.equal(null);
    expect(await lock.tryAcquireWrite()).to.equal(null);
    await Promise.all([r.release(), other!.release()]);
  });

  it('hands out strictly increasing fences, also after the lock key was deleted or expired', async () => {
    const lock = locks.lock('fences');
    const fences: number[] = [];
    for (let i = 0; i < 20; i++) {
      const lease = i % 3 === 0 ? await lock.acquireRead() : await lock.acquireWrite();
      fences.push(lease.fence);
      await lease.release();
      if (i % 5 === 0) expect(await totalKeys(redis)).to.equal(0); // nothing kept between holds
    }
    const short = await lock.acquireWrite({ leaseMs: 50 });
    fences.push(short.fence);
    await sleep(120); // expires on its own
    const after = await lock.acquireWrite();
    fences.push(after.fence);
    await after.release();
    for (let i = 1; i < fences.length; i++) expect(fences[i]).to.be.greaterThan(fences[i - 1]!);
    expect(fences.every(Number.isSafeInteger)).to.equal(true);
  });

  it('frees an abandoned lock after its lease, leaving no keys behind', async () => {
    const abandoned = open();
    // Its lease runs from this call's start here (its holder gives it back at that deadline) and
    // from the server's grant there, which comes later: nobody else gets it sooner than 300 ms after.
    const started = performance.now();
    await abandoned.lock('abandoned').acquireWrite({ leaseMs: 300 });
    abandoned.removeAllListeners();
    // The holder vanishes without releasing (its LockClient is never closed).
    const w = await locks.lock('abandoned').acquireWrite({ waitMs: 5_000 });
    expect(performance.now() - started).to.be.within(290, 3_000);
    await w.release();
    await eventually('no key left once the abandoned hold expired', async () => (await totalKeys(redis)) === 0);
  });

  it('wakes a waiting writer on release, without waiting out the re-check interval or the lease', async () => {
    // With re-checks every 20 s and a 60 s lease, only the release message can let it in within waitMs.
    const slow = open({ recheckMs: 20_000, leaseMs: 60_000 });
    try {
      const lock = slow.lock('wake');
      const r = await lock.acquireRead();
      const waiting = lock.acquireWrite({ waitMs: 5_000 });
      await sleep(100);
      await r.release();
      const w = await waiting;
      await w.release();
    } finally {
      await slow.close();
    }
  });

  it('times out with AcquireTimeoutError and withdraws the waiting writer', async () => {
    const lock = locks.lock('timeout');
    const r = await lock.acquireRead();
    const error = await rejection(lock.acquireWrite({ waitMs: 200 }));
    expect(error).to.be.instanceOf(AcquireTimeoutError);
    expect(error.message).to.match(/within 200 ms/);
    expect((await lock.inspect()).waitingWriter).to.equal(null);
    expect(await lock.tryAcquireRead()).to.not.equal(null); // not kept out by a dead intent
    await r.release();
  });

  it('aborts a wait through its AbortSignal', async () => {
    const lock = locks.lock('abort');
    const w = await lock.acquireWrite();
    const controller = new AbortController();
    const waiting = lock.acquireRead({ waitMs: 10_000, signal: controller.signal });
    setTimeout(() => controller.abort(new Error('shutting down')), 100);
    const error = await rejection(waiting);
    expect(error).to.be.instanceOf(AcquireAbortedError);
    expect((error.cause as Error).message).to.equal('shutting down');
    await w.release();
  });

  it('keeps new readers behind a waiting writer, unless writer preference is off', async () => {
    const lock = locks.lock('preference');
    const r = await lock.acquireRead();
    const writer = lock.acquireWrite({ waitMs: 5_000 });
    await eventually('the writer to wait', async () => (await lock.inspect()).waitingWriter !== null);
    expect(await lock.tryAcquireRead()).to.equal(null);
    const reentrant = await lock.tryAcquireRead({ owner: r.token }); // a holder is never queued
    expect(reentrant).to.not.equal(null);
    const relaxed = open({ writerPreference: false });
    const passer = await relaxed.lock('preference').tryAcquireRead();
    expect(passer).to.not.equal(null);
    await passer!.release();
    await relaxed.close();
    await reentrant!.release();
    await r.release();
    await (await writer).release();
  });

  it('survives SCRIPT FLUSH: the client resends the scripts on NOSCRIPT', async () => {
    const lock = locks.lock('noscript');
    await (await lock.acquireWrite()).release();
    for (const node of await masters(redis)) await node.script('FLUSH');
    const w = await lock.acquireWrite();
    await w.release();
    expect(await totalKeys(redis)).to.equal(0);
  });

  it('costs one script call per uncontended acquire and per release', async () => {
    const lock = locks.lock('one-call');
    await (await lock.acquireWrite()).release(); // warm-up: scripts loaded, slots known
    const before = await scriptCalls(redis);
    const w = await lock.acquireWrite();
    const mid = await scriptCalls(redis);
    await w.release();
    const after = await scriptCalls(redis);
    expect([mid - before, after - mid]).to.deep.equal([1, 1]);
    const r = await lock.acquireRead();
    await r.release();
    expect((await scriptCalls(redis)) - after).to.equal(2);
  });

  it('rejects release of a lost lease with LockNotHeldError, and a second release is a no-op', async () => {
    const lock = locks.lock('lost');
    const lease = await lock.acquireWrite({ leaseMs: 100 });
    await eventually('the lease to run out', () => lease.signal.aborted);
    expect(await rejection(lease.release())).to.be.instanceOf(LockNotHeldError);
    expect(await rejection(lease.extend())).to.be.instanceOf(LockLostError);
    const ok = await lock.acquireWrite();
    await ok.release();
    await ok.release();
    expect(ok.held).to.equal(false);
  });

  it('renews auto-renewed leases for as long as they are held', async () => {
    // Renewed every 500 ms: a loaded machine's late timer does not let a 1.5 s lease run out.
    const short = open({ leaseMs: 1_500 });
    try {
      const lease = await short.lock('renewed').acquireWrite();
      await sleep(2_000); // past its first lease
      expect(lease.signal.aborted).to.equal(false);
      expect((await short.inspect('renewed')).writer?.owner).to.equal(lease.token);
      await lease.release();
    } finally {
      await short.close();
    }
  });

  it('aborts the signal and emits lost when renewal finds the lock gone', async () => {
    const short = open({ leaseMs: 300 });
    try {
      const events: LockLostError[] = [];
      short.on('lost', (error) => events.push(error));
      const lease = await short.lock('taken').acquireWrite();
      const keys = short.lock('taken').keys;
      await redis.del(keys.state);
      await redis.del(keys.leases); // released by force behind the holder's back
      // The next renewal finds it gone: due a third of the lease in, later on a loaded machine.
      await eventually('the renewal to find the lock gone', () => lease.signal.aborted);
      expect(lease.signal.reason).to.be.instanceOf(LockLostError);
      expect(events.map((e) => [e.resource, e.mode, e.owner])).to.deep.equal([['taken', 'write', lease.token]]);
      expect(await rejection(lease.release())).to.be.instanceOf(LockNotHeldError);
    } finally {
      await short.close();
    }
  });

  it('reuses the outer owner for nested withRead/withWrite, and releases on error', async () => {
    const seen: string[] = [];
    await locks.withRead('nested', async (outer) => {
      seen.push(outer.token);
      await locks.withWrite('nested', async (inner) => {
        seen.push(inner.token); // upgraded in place: same owner
        await locks.withRead('nested', (innermost) => void seen.push(innermost.token));
      });
    });
    expect(new Set(seen).size).to.equal(1);
    const error = await rejection(locks.withWrite('nested', () => Promise.reject(new Error('rebuild failed'))));
    expect(error.message).to.equal('rebuild failed');
    expect((await locks.inspect('nested')).mode).to.equal('free');
  });

  it("names withWrite's signature when given redlock's (resource, options, fn) order, and takes nothing", async () => {
    for (const call of ['withRead', 'withWrite'] as const) {
      const error = await rejection(locks[call]('reordered', { waitMs: 100 } as never, (() => 1) as never));
      expect(error).to.be.instanceOf(InvalidArgumentError);
      expect(error.message).to.equal(
        `fn: must be the second argument: ${call}(resource, fn, options), the options last (not redlock's (resource, options, fn))`,
      );
    }
    expect(await totalKeys(redis)).to.equal(0);
  });

  it('releases at the end of an await using scope', async () => {
    {
      await using lease = await locks.lock('scoped').acquireWrite();
      expect(lease.held).to.equal(true);
      expect((await locks.inspect('scoped')).mode).to.equal('write');
    }
    expect((await locks.inspect('scoped')).mode).to.equal('free');
  });

  it('close() releases what it holds, wakes its waiters with ClientClosedError, and refuses further use', async () => {
    const other = open();
    const held = await other.lock('closing').acquireWrite();
    // close() settles after the waiter has rejected: its rejection is handled from the start.
    const waiter = rejection(other.lock('closing').acquireWrite({ waitMs: 10_000 }));
    await sleep(50);
    await other.close();
    expect(await waiter).to.be.instanceOf(ClientClosedError);
    expect(held.held).to.equal(false);
    expect((await locks.inspect('closing')).mode).to.equal('free');
    expect(() => other.lock('closing')).to.throw(ClientClosedError);
    expect(await totalKeys(redis)).to.equal(0);
  });

  it('reports lock state through inspect', async () => {
    const lock = locks.lock('user:{42}:profile');
    expect(lock.keys.state).to.equal('rwlock:user:{42}:profile');
    const r = await lock.acquireRead({ owner: 'reader-1' });
    const waiting = lock.acquireWrite({ owner: 'writer-1', waitMs: 5_000 });
    await eventually('writer-1 to wait', async () => (await lock.inspect()).waitingWriter !== null);
    const info = await lock.inspect();
    expect(info).to.include({ resource: 'user:{42}:profile', mode: 'read', key: 'rwlock:user:{42}:profile' });
    expect(info.readers).to.have.length(1);
    expect(info.readers[0]).to.include({ owner: 'reader-1', holds: 1 });
    expect(info.readers[0]!.ttlMs).to.be.within(1, 30_000);
    expect(info.waitingWriter?.owner).to.equal('writer-1');
    expect(info.fence).to.equal(r.fence);
    await r.release();
    const w: Lease = await waiting;
    expect((await lock.inspect()).writer).to.include({ owner: 'writer-1', holds: 1 });
    await w.release();
  });
});
