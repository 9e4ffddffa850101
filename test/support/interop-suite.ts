/**
 * The behaviour legacy and bridge mode share: a library process and an old
 * process (the old scripts, sent with EVAL) refuse each other exactly as two
 * old processes would, and the library improves on the old scheme where it
 * can without breaking old peers. Declared inside a `forEachTopology` body.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { LockRedisClient } from '../../src/clients/index.js';
import {
  defaultLegacyKeys,
  InvalidArgumentError,
  type LegacyKeyPair,
  LockClient,
  LockLostError,
  LockNotHeldError,
} from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import type { TopologyContext } from '../setup/topologies.js';
import { eventually } from './eventually.js';
import { OldLocker, taggedLegacyKeys } from './old-scripts.js';
import { totalKeys } from './redis-stats.js';
import { releaseLater } from './release-later.js';

/** Default key names on one server; tagged ones on a Cluster, where both keys must share a slot. */
export function legacyKeysFor(ctx: TopologyContext): (resource: string) => LegacyKeyPair {
  return ctx.kind === 'cluster' ? taggedLegacyKeys : defaultLegacyKeys;
}

export function interopSuite(ctx: TopologyContext, mode: 'legacy' | 'bridge'): void {
  const R = 'report:7';
  let redis: RedisClient; // the test's own look at Redis
  let lockRedis: LockRedisClient; // the LockClients' client, of the suite's library
  let locks: LockClient;
  let old: OldLocker;
  let keys: LegacyKeyPair;

  const client = (options: object = {}) =>
    new LockClient(lockRedis, { mode, recheckMs: 50, ...(ctx.kind === 'cluster' ? { legacyKeys: taggedLegacyKeys } : {}), ...options });

  beforeEach(async () => {
    redis = ctx.client();
    lockRedis = await ctx.lockRedis();
    locks = client();
    keys = legacyKeysFor(ctx)(R);
    old = new OldLocker(redis, keys.read, keys.write, 30);
  });
  afterEach(async () => {
    await locks.close();
  });

  const lock = () => locks.lock(R);

  it('refuses owner "1", the value old processes write, with InvalidArgumentError and leaves Redis untouched', async () => {
    expect(await old.tryWrite()).to.equal(true);
    const before = await totalKeys(redis);
    for (const attempt of [() => lock().tryAcquireWrite({ owner: '1' }), () => lock().acquireRead({ owner: '1', waitMs: 0 })]) {
      const error = await attempt().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(InvalidArgumentError);
      expect((error as Error).message).to.include('old processes');
    }
    expect(await totalKeys(redis)).to.equal(before);
    expect(await redis.get(keys.write)).to.equal('1'); // the old writer still holds, alone
    expect((await lock().inspect()).writer).to.equal(null);
    await old.releaseWrite();
    expect(await old.tryRead()).to.equal(true);
    const w = await lock().tryAcquireWrite({ owner: 'one' });
    expect(w).to.equal(null); // an old reader holds: refused
    expect(await redis.get(keys.read)).to.equal('1');
  });

  it("an old writer's key refuses library readers and writers; the library gets in once it is released", async () => {
    expect(await old.tryWrite()).to.equal(true);
    expect(await lock().tryAcquireRead()).to.equal(null);
    expect(await lock().tryAcquireWrite()).to.equal(null);
    await old.releaseWrite();
    const w = await lock().tryAcquireWrite();
    expect(w).to.not.equal(null);
    await w!.release();
  });

  it('a library writer refuses old readers and writers, and holds the write key with its token instead of 1', async () => {
    const w = await lock().acquireWrite();
    expect(await redis.get(keys.write)).to.equal(w.token);
    expect(await redis.pttl(keys.write)).to.be.within(29_000, 30_000);
    expect(await old.tryRead()).to.equal(false);
    expect(await old.tryWrite()).to.equal(false);
    await w.release();
    expect(await redis.exists(keys.write)).to.equal(0);
    expect(await old.tryWrite()).to.equal(true);
  });

  it('a library reader refuses old writers and shares the lock with old readers', async () => {
    const r = await lock().acquireRead();
    expect(await redis.get(keys.read)).to.equal(r.token);
    expect(await old.tryWrite()).to.equal(false);
    expect(await old.tryRead()).to.equal(true);
    expect(await old.tryWrite()).to.equal(false);
    await r.release();
  });

  it('old readers refuse library writers until the last one releases; library readers share with them', async () => {
    expect(await old.tryRead()).to.equal(true);
    expect(await lock().tryAcquireWrite()).to.equal(null);
    const r = await lock().tryAcquireRead();
    expect(r).to.not.equal(null);
    await r!.release();
    expect(await lock().tryAcquireWrite()).to.equal(null);
    await old.releaseRead();
    const w = await lock().tryAcquireWrite();
    expect(w).to.not.equal(null);
    await w!.release();
  });

  it('keeps the read key while any library reader holds it and deletes it with the last one', async () => {
    const a = await lock().acquireRead();
    const b = await lock().acquireRead();
    await a.release();
    expect(await redis.exists(keys.read)).to.equal(1);
    expect(await old.tryWrite()).to.equal(false);
    await b.release();
    expect(await redis.exists(keys.read)).to.equal(0);
    expect(await old.tryWrite()).to.equal(true);
  });

  it("does not free an old reader's hold when the last library reader leaves: the read key goes back to 1 until the old reader's TTL", async () => {
    const r = await lock().acquireRead();
    old = new OldLocker(redis, keys.read, keys.write, 20);
    expect(await old.tryRead()).to.equal(true);
    await r.release();
    expect(await redis.get(keys.read)).to.equal('1');
    expect(await redis.pttl(keys.read)).to.be.within(19_000, 20_000);
    expect(await old.tryWrite()).to.equal(false);
    expect(await lock().tryAcquireWrite()).to.equal(null);
    await old.releaseRead();
    const w = await lock().tryAcquireWrite();
    expect(w).to.not.equal(null);
    await w!.release();
  });

  it('notices every old reader, also one that comes after the library took the read key over', async () => {
    const r = await lock().acquireRead({ leaseMs: 5_000 });
    expect(await new OldLocker(redis, keys.read, keys.write, 10).tryRead()).to.equal(true);
    const r2 = await lock().acquireRead({ leaseMs: 5_000 }); // converts the key back to a library token
    expect(await redis.get(keys.read)).to.not.equal('1');
    expect(await new OldLocker(redis, keys.read, keys.write, 20).tryRead()).to.equal(true);
    await r.release();
    await r2.release();
    expect(await redis.get(keys.read)).to.equal('1');
    expect(await redis.pttl(keys.read)).to.be.within(19_000, 20_000);
    const info = await lock().inspect();
    expect(info.mode).to.equal('read');
    expect(info.legacy!.oldReadersTtlMs).to.be.within(19_000, 20_000);
  });

  it("releases only its own write key: a lapsed writer's release leaves the old writer that took over alone", async () => {
    const w = await lock().acquireWrite({ leaseMs: 60 });
    await sleep(120);
    expect(await old.tryWrite()).to.equal(true);
    const error = await w.release().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(LockNotHeldError);
    expect(await redis.get(keys.write)).to.equal('1');
    expect(await old.tryRead()).to.equal(false);
  });

  it("restores the read key that an old reader's release deleted under a library reader, at the next extend", async () => {
    const r = await lock().acquireRead();
    expect(await old.tryRead()).to.equal(true);
    await old.releaseRead(); // the old scheme's flaw: DEL frees the read key for every reader
    expect(await redis.exists(keys.read)).to.equal(0);
    await r.extend();
    expect(await redis.get(keys.read)).to.equal(r.token);
    expect(await old.tryWrite()).to.equal(false);
    await r.release();
  });

  it('reports a library reader lost when an old writer got in after an old reader freed the read key', async () => {
    const r = await lock().acquireRead();
    expect(await old.tryRead()).to.equal(true);
    await old.releaseRead();
    expect(await old.tryWrite()).to.equal(true); // the hazard the old scheme has; the library can only detect it
    const error = await r.extend().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(LockLostError);
    expect(r.signal.aborted).to.equal(true);
    expect(await redis.get(keys.write)).to.equal('1');
  });

  it('reports a library writer lost when its write key was deleted under it', async () => {
    const w = await lock().acquireWrite();
    await old.releaseWrite(); // an old process's unconditional DEL
    const error = await w.extend().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(LockLostError);
    expect(
      await lock()
        .inspect()
        .then((i) => i.mode),
    ).to.equal('free');
  });

  it('a waiting library writer gets in soon after an old reader releases (re-checks; old processes publish nothing)', async () => {
    expect(await old.tryRead()).to.equal(true);
    const released = releaseLater(150, () => old.releaseRead());
    const w = await lock().acquireWrite({ waitMs: 5_000 });
    expect(performance.now() - released.sentAt()).to.be.within(0, 1_000);
    expect(await redis.get(keys.write)).to.equal(w.token);
    await w.release();
  });

  it('a waiting library writer is woken by a library release at once, not at its re-check', async () => {
    const slow = client({ recheckMs: 5_000 });
    try {
      const r = await lock().acquireRead();
      const released = releaseLater(150, () => r.release());
      const w = await slow.lock(R).acquireWrite({ waitMs: 10_000 });
      expect(performance.now() - released.sentAt()).to.be.within(0, 2_000);
      await w.release();
    } finally {
      await slow.close();
    }
  });

  it('extends the legacy keys with the lease', async () => {
    const w = await lock().acquireWrite({ leaseMs: 1_000 });
    const r = await lock().acquireRead({ leaseMs: 1_000, owner: w.token }); // downgrade path: both keys held
    expect(await redis.pttl(keys.write)).to.be.below(1_001);
    await w.extend(20_000);
    expect(await redis.pttl(keys.write)).to.be.within(19_000, 20_000);
    expect(await redis.pttl(keys.read)).to.be.within(19_000, 20_000);
    await r.release();
    await w.release();
    expect(await redis.exists(keys.read, keys.write)).to.equal(0);
  });

  it('an abandoned library lock disappears by itself: every key it made expires', async () => {
    const before = await totalKeys(redis);
    await lock().acquireRead({ leaseMs: 150 });
    await locks.lock('other:1').acquireWrite({ leaseMs: 150 });
    expect(await totalKeys(redis)).to.be.greaterThan(before);
    // DBSIZE counts a key past its expiry until the server's expiry cycle reclaims it.
    await eventually('every key the abandoned holds made expired', async () => (await totalKeys(redis)) === before, 5_000);
  });

  it('reentrant write, upgrade of the sole library reader and downgrade keep old processes out throughout', async () => {
    const r = await lock().acquireRead();
    const w = await lock().acquireWrite({ owner: r.token }); // upgrade
    const w2 = await lock().acquireWrite({ owner: r.token }); // reentrant
    expect(await old.tryRead()).to.equal(false);
    expect(await old.tryWrite()).to.equal(false);
    await w2.release();
    await w.release(); // downgraded: the read hold is left
    expect(await redis.exists(keys.write)).to.equal(0);
    expect(await old.tryWrite()).to.equal(false);
    expect(await old.tryRead()).to.equal(true);
    await r.release();
    expect(await redis.get(keys.read)).to.equal('1'); // the old reader's
  });

  it('an upgrade waits for an old reader to leave', async () => {
    const r = await lock().acquireRead();
    expect(await old.tryRead()).to.equal(true);
    expect(await lock().tryAcquireWrite({ owner: r.token })).to.equal(null);
    const released = releaseLater(150, () => old.releaseRead());
    const w = await lock().acquireWrite({ owner: r.token, waitMs: 5_000 });
    released.sentAt(); // throws if the upgrade was granted before the old reader left
    expect(await redis.get(keys.write)).to.equal(r.token);
    await w.release();
    await r.release();
  });

  it('hands out strictly growing fences to library grants', async () => {
    const fences: number[] = [];
    for (let i = 0; i < 5; i++) {
      const l = await (i % 2 ? lock().acquireRead() : lock().acquireWrite());
      fences.push(l.fence);
      await l.release();
    }
    for (let i = 1; i < fences.length; i++) expect(fences[i]).to.be.greaterThan(fences[i - 1]!);
  });

  it('inspect shows old holders in mode and legacy', async () => {
    expect(await old.tryWrite()).to.equal(true);
    let info = await lock().inspect();
    expect(info.mode).to.equal('write');
    expect(info.writer).to.equal(null);
    expect(info.legacy).to.deep.include({ oldWriter: true, oldReadersTtlMs: 0 });
    expect(info.legacy!.write).to.deep.include({ key: keys.write, value: '1' });
    await old.releaseWrite();
    expect(await old.tryRead()).to.equal(true);
    const r = await lock().acquireRead();
    info = await lock().inspect();
    expect(info.mode).to.equal('read');
    expect(info.readers.map((h) => h.owner)).to.deep.equal([r.token]);
    expect(info.legacy!.readers.map((h) => h.owner)).to.deep.equal([r.token]);
    expect(info.legacy!.oldReadersTtlMs).to.be.within(29_000, 30_000);
    await r.release();
  });
}
