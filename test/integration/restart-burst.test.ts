// a server restart (its scripts lost) with calls
// in flight: rounds of 1,000 acquires and releases run across it. The
// restarted server may see a few full-script sends, not one per call, and
// no call outlives its bound.
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { LockClient } from '../../src/index.js';
import { forEachTopology, ONE_NODE_REDIS } from '../setup/topologies.js';

const BOUND_MS = 3_000;

forEachTopology('a restart with calls in flight', { clients: ONE_NODE_REDIS }, (ctx) => {
  if (ctx.kind !== 'standalone') return;
  it('rounds of 1,000 acquires and releases across a restart: a few full-script sends, every call in its bound', async function () {
    this.timeout(120_000);
    const locks = new LockClient(await ctx.lockRedis(), { leaseMs: 60_000, redisTimeoutMs: BOUND_MS });
    locks.on('lost', () => undefined);
    try {
      await Promise.all(
        Array.from({ length: 300 }, (_, i) =>
          locks
            .lock(`rb:warm:${i}`)
            .acquireWrite()
            .then((l) => l.release()),
        ),
      );
      let stop = false;
      let slowest = 0;
      let done = 0;
      let failed = 0;
      const rounds = (async () => {
        for (let round = 0; !stop; round++) {
          await Promise.allSettled(
            Array.from({ length: 1_000 }, (_, i) => {
              const started = performance.now();
              return locks
                .lock(`rb:${round}:${i}`)
                .acquireWrite()
                .then(
                  (l) => l.release(),
                  () => {
                    failed++;
                  },
                )
                .then(
                  () => done++,
                  () => failed++,
                )
                .finally(() => {
                  slowest = Math.max(slowest, performance.now() - started);
                });
            }),
          );
          if (failed > 0) await new Promise((resolve) => setTimeout(resolve, 50));
        }
      })();
      await new Promise((resolve) => setTimeout(resolve, 300));
      await ctx.server.restart();
      const conn = new Redis(ctx.server.port, ctx.server.host);
      await conn.config('RESETSTAT');
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      stop = true;
      await rounds;
      const info = await conn.info('commandstats');
      conn.disconnect();
      let sends = 0;
      for (const m of info.matchAll(/^cmdstat_(eval|script\|load):calls=(\d+)/gm)) sends += Number(m[2]);
      console.log(
        `      [standalone, ${ctx.clientKind}] restart: ${done} done, ${failed} failed, slowest ${Math.round(slowest)} ms (2 calls each); full sends after it ${sends}`,
      );
      expect(sends, 'full-script sends after the restart').to.be.at.most(6);
      expect(slowest, 'an acquire and its release').to.be.below(2 * BOUND_MS + 1_500);
    } finally {
      await locks.close();
    }
  });
});
