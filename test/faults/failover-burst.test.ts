// "the same after a failover", with the calls in
// flight while it happens (the landed fault test waits for the client to
// find the new master before its burst). Rounds of 1,000 acquires and
// releases run across a manual failover to a replica without the scripts:
// every node may see a few full-script sends, not one per call.
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { LockClient } from '../../src/index.js';
import { lockKeys } from '../../src/keys/keys.js';
import { forEachTopology, ONE_NODE_REDIS } from '../setup/topologies.js';

async function fullSends(node: Redis): Promise<number> {
  const info = await node.info('commandstats');
  let sends = 0;
  for (const m of info.matchAll(/^cmdstat_(eval|script\|load):calls=(\d+)/gm)) sends += Number(m[2]);
  return sends;
}

forEachTopology('a failover with calls in flight', { clients: ONE_NODE_REDIS }, (ctx) => {
  if (ctx.kind !== 'cluster') return;
  it('rounds of 1,000 acquires and releases across a manual failover: a few full-script sends per node', async function () {
    this.timeout(120_000);
    const cluster = ctx.cluster;
    const locks = new LockClient(await ctx.lockRedis(), { leaseMs: 60_000, redisTimeoutMs: 5_000 });
    const conns: Redis[] = [];
    try {
      await Promise.all(
        Array.from({ length: 300 }, (_, i) =>
          locks
            .lock(`fb:warm:${i}`)
            .acquireWrite()
            .then((l) => l.release()),
        ),
      );
      const victim = await cluster.masterForKey(lockKeys('rwlock', 'fb:0').state);
      for (const replica of await cluster.replicasOf(victim.port)) {
        const conn = new Redis(replica.port, replica.host);
        await conn.script('FLUSH').finally(() => conn.disconnect());
      }
      for (const n of cluster.nodes.filter((x) => x.running)) conns.push(new Redis(n.port, n.host));
      await Promise.all(conns.map((c) => c.config('RESETSTAT')));
      let stop = false;
      const failed: Record<string, number> = {};
      let done = 0;
      const rounds = (async () => {
        for (let round = 0; !stop; round++) {
          const outcomes = await Promise.allSettled(
            Array.from({ length: 1_000 }, (_, i) =>
              locks
                .lock(`fb:${round}:${i}`)
                .acquireWrite()
                .then((l) => l.release()),
            ),
          );
          for (const o of outcomes) {
            if (o.status === 'fulfilled') done++;
            else {
              const m = String((o.reason as Error).message).replace(/"[^"]*"/g, '"…"');
              failed[m] = (failed[m] ?? 0) + 1;
            }
          }
        }
      })();
      await new Promise((resolve) => setTimeout(resolve, 300));
      const result = await cluster.failover(victim.port);
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      stop = true;
      await rounds;
      const sends = await Promise.all(conns.map(fullSends));
      console.log(
        `      [cluster, ${ctx.clientKind}] failover ${victim.port} -> ${result.promoted.port}: ${done} calls done; full sends per node ${conns.map((c, i) => `${c.options.port}:${sends[i]}`).join(', ')}; failed ${JSON.stringify(failed)}`,
      );
      expect(failed, 'calls that failed across a graceful failover').to.deep.equal({});
      for (const n of sends) expect(n, `full-script sends per node (${sends.join(', ')})`).to.be.at.most(6);
    } finally {
      for (const c of conns) c.disconnect();
      await locks.close();
    }
  });
});
