/**
 * A lock whose slot is mid-migration with its keys on both sides: the source
 * refuses every script on it with TRYAGAIN until the migration ends. How long a
 * call keeps trying is pinned here: the library's MIGRATION_RETRY_MS (3 s) of
 * tries, each of which ioredis itself retries (16 redirections, 100 ms apart
 * on TRYAGAIN: up to 1.6 s), so 3 to about 4.6 s in all (README, "Live
 * resharding"); then RedisUnavailableError.
 */
import { expect } from 'chai';
import { MIGRATION_RETRY_MS } from '../../src/backends/scripts.js';
import { type Lease, LockClient, RedisUnavailableError } from '../../src/index.js';
import { forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { rejection } from '../support/rejection.js';
import { beginMigration, endMigration, migrateKeys } from '../support/reshard.js';

/** ioredis' own TRYAGAIN retries inside one call, at most: maxRedirections (16) x retryDelayOnTryAgain (100 ms). */
const IOREDIS_TRYAGAIN_MS = 16 * 100;

forEachTopology('a lock whose slot is mid-migration', (ctx) => {
  if (ctx.kind !== 'cluster') return;

  it(`keeps trying ${MIGRATION_RETRY_MS / 1000} to about ${(MIGRATION_RETRY_MS + IOREDIS_TRYAGAIN_MS) / 1000} s, then rejects with RedisUnavailableError; works once the migration ends`, async function () {
    this.timeout(60_000);
    const cluster = ctx.cluster;
    const holder = new LockClient(ctx.client());
    const waiter = new LockClient(ctx.client());
    const third = new LockClient(ctx.client());
    const lock = holder.lock('mid-migration');
    const source = await cluster.masterForSlot(lock.keys.slot);
    const target = (await cluster.masters()).find((m) => m.port !== source.port)!;
    const masters = await cluster.masters();
    let migrating = false;
    try {
      const lease = await lock.acquireWrite();
      // A writer that queues spills the lock into all three of its keys (hash, leases, queue).
      const queued = waiter
        .lock('mid-migration')
        .acquireWrite({ waitMs: 60_000 })
        .catch((error: unknown) => error);
      await eventually('the writer to queue', async () => (await holder.inspect('mid-migration')).queue.length === 1);
      await beginMigration(lock.keys.slot, source, target, masters);
      migrating = true;
      // One key moved, two left: the source refuses every script on the lock with TRYAGAIN.
      await migrateKeys(source, target, [lock.keys.queue]);

      const started = performance.now();
      const error = await rejection(third.lock('mid-migration').acquireWrite({ waitMs: 20_000 }));
      const ms = performance.now() - started;
      expect(error).to.be.instanceOf(RedisUnavailableError);
      // The refusal that ended it: TRYAGAIN, or ioredis out of redirections (under load its last try can meet
      // the importing target's MOVED while it follows the slot).
      expect(error.message, error.message).to.match(/TRYAGAIN|Too many Cluster redirections/);
      // Not ioredis' own retries alone (about 1.1 s measured here, at most 1.6 s): the library's 3 s
      // of tries, the last of which ioredis retries too (measured: 3.95 and 4.25 s).
      expect(ms)
        .to.be.at.least(MIGRATION_RETRY_MS)
        .and.below(MIGRATION_RETRY_MS + 2 * IOREDIS_TRYAGAIN_MS + 1_500);

      await migrateKeys(source, target, [lock.keys.state, lock.keys.leases]);
      await endMigration(lock.keys.slot, source, target, masters);
      migrating = false;
      await lease.release();
      const got = await queued;
      if (got instanceof Error)
        expect(got).to.be.instanceOf(RedisUnavailableError); // it may have run out of tries too
      else await (got as Lease).release();
      const next = await third.lock('mid-migration').acquireWrite({ waitMs: 5_000 });
      await next.release();
    } finally {
      if (migrating) {
        await migrateKeys(source, target, [lock.keys.state, lock.keys.leases, lock.keys.queue]).catch(() => undefined);
        await endMigration(lock.keys.slot, source, target, masters);
      }
      await third.close();
      await waiter.close();
      await holder.close();
    }
  });
});
