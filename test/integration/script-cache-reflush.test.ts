// a lost script cache costs one load per script
// and node "whatever is in flight". Two cases the landed tests do not make:
// (1) a burst from a LockClient made that instant (GLIDE's Cluster driver keys
// its NodeScripts by a slot map it is still loading: every master shares one
// entry until CLUSTER SLOTS answers); (2) a second SCRIPT FLUSH while the
// first one's loads and their waiters are in flight (NodeScripts sends a
// waiter that meets NOSCRIPT again as a full EVAL, with no second wait).
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { type Lease, LockClient } from '../../src/index.js';
import { forEachTopology, ONE_NODE_REDIS } from '../setup/topologies.js';
import { masters } from '../support/redis-stats.js';

const CALLS = 5_000;
const BOUND_MS = 3_000;
/** Full-script sends a node may see per flush and script: one load, and a spare for a race. */
const SENDS_PER_SCRIPT = 2;

async function fullSends(node: Redis): Promise<number> {
  const info = await node.info('commandstats');
  let sends = 0;
  for (const m of info.matchAll(/^cmdstat_(eval|script\|load):calls=(\d+)/gm)) sends += Number(m[2]);
  return sends;
}

async function failures(calls: Promise<unknown>[]): Promise<Record<string, number>> {
  const failed: Record<string, number> = {};
  for (const outcome of await Promise.allSettled(calls)) {
    if (outcome.status === 'rejected') {
      const message = String((outcome.reason as Error).message).replace(/"[^"]*"/g, '"…"');
      failed[message] = (failed[message] ?? 0) + 1;
    }
  }
  return failed;
}

forEachTopology('a lost script cache, flushed again mid-load', { clients: ONE_NODE_REDIS }, (ctx) => {
  let nodes: Redis[];
  beforeEach(async () => {
    nodes = await masters(ctx.client());
  });
  const forgetScripts = () => Promise.all(nodes.map((node) => node.script('FLUSH')));
  const resetStats = () => Promise.all(nodes.map((node) => node.config('RESETSTAT')));
  const sendsPerNode = () => Promise.all(nodes.map(fullSends));

  it(`a LockClient made that instant, ${CALLS} acquires at once on servers without the scripts: one load per node`, async function () {
    this.timeout(60_000);
    const redis = await ctx.lockRedis();
    await forgetScripts();
    await resetStats();
    const locks = new LockClient(redis, { leaseMs: 60_000, redisTimeoutMs: BOUND_MS });
    try {
      const acquires = Array.from({ length: CALLS }, (_, i) => locks.lock(`fresh:${i}`).acquireWrite());
      const failed = await failures(acquires);
      const sends = await sendsPerNode();
      console.log(
        `      [${ctx.kind}, ${ctx.clientKind}] fresh client burst: full sends per master ${sends.join(', ')}; failed ${JSON.stringify(failed)}`,
      );
      const leases = (await Promise.allSettled(acquires)).flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
      for (let i = 0; i < leases.length; i += 500) await Promise.all(leases.slice(i, i + 500).map((l) => l.release()));
      expect(failed, 'acquires that failed').to.deep.equal({});
      for (const n of sends) expect(n, `full-script sends per master (${sends.join(', ')})`).to.be.at.most(SENDS_PER_SCRIPT);
    } finally {
      await locks.close();
    }
  });

  it(`SCRIPT FLUSH, ${CALLS} releases, SCRIPT FLUSH again while they run: each in its bound, a load per node per flush`, async function () {
    this.timeout(60_000);
    const locks = new LockClient(await ctx.lockRedis(), { leaseMs: 60_000, redisTimeoutMs: BOUND_MS });
    try {
      const leases: Lease[] = [];
      for (let i = 0; i < CALLS + 500; i += 500) {
        leases.push(...(await Promise.all(Array.from({ length: 500 }, (_, j) => locks.lock(`twice:${i + j}`).acquireWrite()))));
      }
      await Promise.all(leases.splice(0, 500).map((lease) => lease.release()));
      await forgetScripts();
      await resetStats();
      const releases = leases.map((lease) => lease.release());
      // The second flush on its own connections, as soon as the first load reached a server.
      const second = (async () => {
        for (let i = 0; i < 500; i++) {
          if ((await sendsPerNode()).some((n) => n > 0)) break;
          await new Promise((resolve) => setImmediate(resolve));
        }
        await forgetScripts();
      })();
      const failed = await failures(releases);
      await second;
      const sends = await sendsPerNode();
      console.log(
        `      [${ctx.kind}, ${ctx.clientKind}] flushed twice: full sends per master ${sends.join(', ')}; failed ${JSON.stringify(failed)}`,
      );
      expect(failed, 'releases that failed').to.deep.equal({});
      for (const n of sends) expect(n, `full-script sends per master (${sends.join(', ')})`).to.be.at.most(2 * SENDS_PER_SCRIPT);
    } finally {
      await locks.close();
    }
  });
});
