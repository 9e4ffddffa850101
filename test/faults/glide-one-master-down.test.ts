// GLIDE's resends are ordered by one queue per
// client (`Resends` in glide.ts), not per node: while the calls of one dead
// master wait to be resent, every call of the client, to the healthy
// masters too, waits behind them in rounds. Measured: the latency of calls
// on the healthy masters while one master is killed (before its failover).
import { expect } from 'chai';
import { LockClient } from '../../src/index.js';
import { lockKeys } from '../../src/keys/keys.js';
import { forEachTopology } from '../setup/topologies.js';

forEachTopology('one master down', { clients: ['ioredis', 'glide'] }, (ctx) => {
  if (ctx.kind !== 'cluster') return;
  it("calls on the healthy masters keep their latency while one master's calls fail", async function () {
    this.timeout(120_000);
    const cluster = ctx.cluster;
    const locks = new LockClient(await ctx.lockRedis(), { leaseMs: 60_000, redisTimeoutMs: 5_000 });
    locks.on('lost', () => undefined);
    let stop = false;
    try {
      const victim = await cluster.masterForKey(lockKeys('rwlock', 'down:0').state);
      // Resources by master: some on the victim, some elsewhere.
      const onVictim: string[] = [];
      const healthy: string[] = [];
      for (let i = 0; onVictim.length < 50 || healthy.length < 50; i++) {
        const r = `down:${i}`;
        const m = await cluster.masterForKey(lockKeys('rwlock', r).state);
        if (m.port === victim.port) onVictim.length < 50 && onVictim.push(r);
        else healthy.length < 50 && healthy.push(r);
      }
      await Promise.all(
        [...onVictim, ...healthy].map((r) =>
          locks
            .lock(r)
            .acquireWrite()
            .then((l) => l.release()),
        ),
      );
      stop = false;
      const latencies: number[] = [];
      let healthyFailed = 0;
      const victimLoop = (async () => {
        while (!stop) {
          await Promise.allSettled(
            onVictim.map((r) =>
              locks
                .lock(r)
                .acquireWrite()
                .then((l) => l.release()),
            ),
          );
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      })();
      let measuring = false;
      const healthyLoop = (async () => {
        while (!stop) {
          await Promise.all(
            healthy.map(async (r) => {
              const t = performance.now();
              try {
                await (await locks.lock(r).acquireWrite()).release();
                if (measuring) latencies.push(performance.now() - t);
              } catch {
                if (measuring) healthyFailed++;
              }
            }),
          );
        }
      })();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await cluster.killNode(victim.port);
      measuring = true;
      await new Promise((resolve) => setTimeout(resolve, 4_000)); // before the replica takes over (node timeout)
      stop = true;
      await Promise.all([victimLoop, healthyLoop]);
      const slowest = latencies.reduce((a, b) => Math.max(a, b), 0); // not Math.max(...): 100,000s of calls overflow the stack
      const p = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))] ?? NaN;
      console.log(
        `      [cluster, ${ctx.clientKind}] healthy masters while one is down: ${latencies.length} calls, p50 ${Math.round(p(latencies, 0.5))} ms, p99 ${Math.round(p(latencies, 0.99))} ms, max ${Math.round(slowest)} ms, failed ${healthyFailed}`,
      );
      expect(healthyFailed, 'healthy-master calls that failed').to.equal(0);
      expect(p(latencies, 0.5), 'median acquire+release on a healthy master (ms)').to.be.below(100);
      // ioredis: 36 ms at most. A call on a healthy master should not wait for a dead one's calls.
      expect(slowest, 'slowest acquire+release on a healthy master (ms)').to.be.below(1_000);
    } finally {
      stop = true;
      await locks.close();
      await cluster.restartNode(ctx.cluster.nodes.find((n) => !n.running)?.port ?? 0).catch(() => undefined);
    }
  });
});
