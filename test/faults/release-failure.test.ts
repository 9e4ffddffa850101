// A release that fails (its outcome unknown) must not leave the lock held:
// found by the resharding fault test, where releases failed with "Too many
// Cluster redirections" and the lock then stayed held, renewed, until its
// process closed, so that other processes timed out waiting for it.
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { LockClient, RedisUnavailableError } from '../../src/index.js';
import { forEachTopology } from '../setup/topologies.js';

const once = (redis: Redis, event: string) => new Promise<void>((resolve) => redis.once(event, () => resolve()));

forEachTopology('a release that fails', (ctx) => {
  if (ctx.kind !== 'standalone') return; // the client-side logic is the same on a Cluster

  it('stops renewing the lease, so the lock frees itself within one lease, and a retried release still works', async function () {
    this.timeout(20_000);
    // No offline queue: a command sent while the connection is down fails at once, unsent.
    const redis = ctx.client({ enableOfflineQueue: false });
    redis.on('error', () => undefined);
    const locks = new LockClient(redis, { leaseMs: 1_000 });
    const others = new LockClient(ctx.client());
    if (redis.status !== 'ready') await once(redis, 'ready');
    try {
      const lease = await locks.lock('stuck').acquireWrite();
      const id = Number(await redis.client('ID'));
      const closed = once(redis, 'close');
      await ctx.client().client('KILL', 'ID', id);
      await closed;
      const error = await lease.release().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(RedisUnavailableError);
      expect(lease.held, 'the outcome is unknown: still counted as held').to.equal(true);
      await once(redis, 'ready');
      // Nobody releases it again: the lock must free itself within one lease (plus renewal slack).
      const started = Date.now();
      const next = await others.lock('stuck').acquireWrite({ waitMs: 5_000 });
      const waited = Date.now() - started;
      expect(waited, 'wait for the lock whose release failed').to.be.below(1_000 + 500);
      expect(lease.signal.aborted, 'the lease is reported lost once it ran out').to.equal(true);
      await next.release();

      // A failed release retried while the lease is still live does release it.
      const second = await locks.lock('retried').acquireWrite();
      const id2 = Number(await redis.client('ID'));
      const closed2 = once(redis, 'close');
      await ctx.client().client('KILL', 'ID', id2);
      await closed2;
      expect(
        await second.release().then(
          () => undefined,
          (e: unknown) => e,
        ),
      ).to.be.instanceOf(RedisUnavailableError);
      await once(redis, 'ready');
      await second.release();
      expect(second.held).to.equal(false);
      expect((await others.inspect('retried')).mode).to.equal('free');
    } finally {
      await locks.close();
      await others.close();
    }
  });
});
