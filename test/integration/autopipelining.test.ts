/**
 * An application's ioredis client with `enableAutoPipelining: true`, a common
 * production setting. ioredis queues every call of a command method made
 * with it for a pipeline, one pipeline in flight per connection (or slot
 * group, on a Cluster), so the library sends its scripts past that queue (and
 * batches its own writes). On a Cluster, ioredis groups a queued command by
 * the slot of its first key, which for a command defined without its key
 * count was the count itself: a LockClient's first calls, before the
 * connections of their slots were up, failed with "All keys in the pipeline
 * should belong to the same slots allocation group".
 */
import { expect } from 'chai';
import type { Cluster, Redis } from 'ioredis';
import sinon from 'sinon';
import { holderArg } from '../../src/backends/scripts.js';
import { IoredisDriver } from '../../src/clients/ioredis.js';
import { LockClient } from '../../src/index.js';
import { forEachTopology } from '../setup/topologies.js';

forEachTopology('an autopipelining ioredis client', (ctx) => {
  const autopipelined = (): Redis | Cluster =>
    ctx.kind === 'cluster' ? ctx.client({ enableAutoPipelining: true }) : ctx.client({ enableAutoPipelining: true });

  it("grants a new LockClient's first calls, made at once on locks of every master, read and write", async () => {
    const failures: string[] = [];
    let granted = 0;
    for (const mode of ['read', 'write'] as const) {
      for (let round = 0; round < 3; round++) {
        // A new client each round: its first calls go out before the connections of their slots are up.
        const locks = new LockClient(autopipelined());
        const outcomes = await Promise.allSettled(
          Array.from({ length: 32 }, async (_, i) => {
            const lock = locks.lock(`ap:${mode}:${round}:${i}`);
            const lease = await (mode === 'read' ? lock.acquireRead() : lock.acquireWrite());
            await lease.release();
          }),
        );
        await locks.close();
        for (const outcome of outcomes) {
          if (outcome.status === 'fulfilled') granted++;
          else failures.push((outcome.reason as Error).message);
        }
      }
    }
    expect(failures.slice(0, 3), `${failures.length} of 192 cycles failed`).to.deep.equal([]);
    expect(granted).to.equal(192);
    const admin = ctx.kind === 'cluster' ? ctx.cluster.nodes.map((n) => n.client()) : [ctx.server.client()];
    const keys = (await Promise.all(admin.map((node) => node.keys('*')))).flat();
    for (const node of admin) node.disconnect();
    expect(keys, 'nothing left in Redis').to.deep.equal([]);
  });

  // On a Cluster the scripts go to the node connections of their slots, which have no queue of their own.
  if (ctx.kind === 'standalone')
    it("sends its scripts past ioredis' autopipeline queue, so they never wait for the pipeline before them", async () => {
      const redis = autopipelined() as Redis;
      const locks = new LockClient(redis);
      try {
        await (await locks.lock('ap:warm').acquireWrite()).release(); // the server check, and ioredis' Command found
        const pending = Array.from({ length: 16 }, (_, i) => locks.lock(`ap:q:${i}`).acquireWrite());
        // Synchronously after the calls: a queued command would wait here for the next tick's pipeline.
        const queued = redis.autoPipelineQueueSize;
        const leases = await Promise.all(pending);
        await Promise.all(leases.map((lease) => lease.release()));
        expect(queued, 'script calls queued for an autopipeline').to.equal(0);
        expect(leases).to.have.length(16);
      } finally {
        await locks.close();
      }
    });

  // The test above once failed in CI: the driver found ioredis' Command through a dynamic import,
  // which a loaded machine (tsx's loader thread) resolved only after the warm-up cycle.
  if (ctx.kind === 'standalone')
    it("sends a new client's very first script call past the autopipeline queue too", async () => {
      const redis = autopipelined() as Redis;
      try {
        const driver = new IoredisDriver(redis);
        const args = [3, 'ap:first', 'rwlock#leases:ap:first', 'rwlock#queue:ap:first', 30_000, holderArg('write', 'x.0', 'me'), 0, '0'];
        // Watched, not replaced: the methods queue for an autopipeline; sendCommand does not.
        const methods = [sinon.spy(redis, 'eval'), sinon.spy(redis, 'evalsha')];
        // In the tick the driver was made in, before its lookup of ioredis' Command resolved.
        const granted = driver.script('acquireWrite', args);
        expect(await granted).to.be.a('number');
        const calls = methods.map((m) => m.callCount);
        expect(calls, 'calls of eval, evalsha').to.deep.equal([0, 0]);
      } finally {
        redis.disconnect();
      }
    });
});
