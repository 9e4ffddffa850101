/**
 * `locks.forceRelease(resource)`: the operator's tool. It deletes every key
 * of the lock whoever holds it, wakes the waiters (not their next poll), the
 * holder finds its lease lost at its next renewal, repeating it is harmless,
 * and bad input changes nothing. On both topologies, in hash and legacy mode.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { once } from 'node:events';
import { expect } from 'chai';
import { InvalidArgumentError, LockLostError, TRACING_CHANNELS } from '../../src/index.js';
import { ALL_CLIENTS, forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { suiteLockClients } from '../support/lock-clients.js';
import { allKeys } from '../support/mixed-workers.js';
import { OldLocker, taggedLegacyKeys } from '../support/old-scripts.js';
import { masters, totalKeys } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';

forEachTopology('forceRelease', { clients: ALL_CLIENTS }, (ctx) => {
  const clients = suiteLockClients(ctx);

  it('deletes the held lock, wakes its waiter at once, and the holder loses its lease at its next renewal', async () => {
    const holder = clients.open({ leaseMs: 6_000 });
    // A grant within 2 s is the wake-up: not a poll (20 s), nor the holder's lease running out (6 s).
    const waiting = clients.open({ recheckMs: 20_000 });
    const lease = await holder.lock('job:{1}').acquireWrite();
    // The waiter asleep: its second try (sent once it subscribed) refused too. The force-release
    // goes on the waiter's connection after that try, so that try cannot be what lets it in.
    let tries: { attempts: number } | undefined;
    const starts = `tracing:${TRACING_CHANNELS.acquire}:start`;
    const onStart = (context: unknown) => void (tries ??= context as { attempts: number });
    subscribe(starts, onStart);
    const waiter = waiting.lock('job:{1}').acquireWrite({ waitMs: 15_000 });
    unsubscribe(starts, onStart);
    await eventually('the waiter subscribed and tried again', () => (tries?.attempts ?? 0) >= 2);
    const lost = once(holder, 'lost');

    const released = performance.now();
    const result = await waiting.forceRelease('job:{1}');
    expect(result.resource).to.equal('job:{1}');
    expect([...result.deleted].sort()).to.include.members([waiting.lock('job:{1}').keys.state]);

    const next = await waiter;
    expect(next.held).to.equal(true);
    expect(performance.now() - released, 'ms from the force-release to the grant').to.be.below(2_000);
    const [error] = (await lost) as [LockLostError];
    expect(error).to.be.instanceOf(LockLostError);
    expect(lease.held).to.equal(false);
    expect(lease.signal.aborted).to.equal(true);
    await next.release();
    expect(await totalKeys(clients.redis)).to.equal(0);
  });

  it('deletes readers too; done twice, the second deletes nothing and changes nothing', async () => {
    const readers = clients.open();
    const operator = clients.open();
    await readers.lock('doc:{2}').acquireRead({ owner: 'a' });
    await readers.lock('doc:{2}').acquireRead({ owner: 'b' });
    expect((await operator.forceRelease('doc:{2}')).deleted.length).to.be.greaterThan(0);
    expect(await totalKeys(clients.redis)).to.equal(0);
    expect(await operator.forceRelease('doc:{2}')).to.deep.equal({ resource: 'doc:{2}', deleted: [] });
    expect(await totalKeys(clients.redis)).to.equal(0);
  });

  it("frees a crowded lock's keys off the server's main thread: its time does not grow with the readers", async () => {
    const readers = clients.open();
    const operator = clients.open();
    // Over 64 entries, Redis frees a key on its background thread when it is UNLINKed (DEL frees it
    // in place: 4 ms for 10,000 readers).
    for (let i = 0; i < 200; i += 50) {
      await Promise.all(Array.from({ length: 50 }, () => readers.lock('crowd:{1}').acquireRead({ leaseMs: 30_000 })));
    }
    const redis = ctx.client();
    const lazyFreed = async () => {
      let total = 0;
      for (const node of await masters(redis)) total += Number(/^lazyfreed_objects:(\d+)/m.exec(await node.info('memory'))?.[1]);
      return total;
    };
    const before = await lazyFreed();
    const result = await operator.forceRelease('crowd:{1}');
    expect(result.deleted).to.include(operator.lock('crowd:{1}').keys.state);
    // The background thread counts a key once it has freed it: wait for that, not for a moment.
    await eventually('a key freed in the background', async () => (await lazyFreed()) - before >= 1, 5_000);
    expect(await totalKeys(redis)).to.equal(0);
  });

  it('refuses bad input with InvalidArgumentError and touches nothing', async () => {
    const locks = clients.open();
    const lease = await locks.lock('kept:{3}').acquireWrite();
    const before = await allKeys(clients.redis);
    for (const bad of ['', 42 as unknown as string, 'x'.repeat(100_000)]) {
      expect(await rejection(locks.forceRelease(bad))).to.be.instanceOf(InvalidArgumentError);
    }
    expect(await allKeys(clients.redis)).to.deep.equal(before);
    expect(lease.held).to.equal(true);
  });

  it("in legacy mode, also deletes the legacy keys, an old process's included", async () => {
    const locks = clients.open({ mode: 'legacy', legacyKeys: taggedLegacyKeys });
    const keys = taggedLegacyKeys('report');
    const old = new OldLocker(clients.redis, keys.read, keys.write);
    expect(await old.tryWrite()).to.equal(true);
    const result = await locks.forceRelease('report');
    expect(result.deleted).to.include(keys.write);
    expect(await totalKeys(clients.redis)).to.equal(0);
    expect(await locks.lock('report').tryAcquireWrite()).to.not.equal(null);
  });
});
