/**
 * A server that lost its scripts costs one load of each script per node:
 * the calls in flight that meet NOSCRIPT wait for that load
 * instead of each sending the whole script, and a client's first calls to a
 * node send each script once. Counted on the servers (`INFO commandstats`:
 * EVAL and SCRIPT LOAD carry a whole script), with every call in its bound.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { type Lease, LockClient } from '../../src/index.js';
import { forEachTopology, ONE_NODE_REDIS } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { masters } from '../support/redis-stats.js';

const CALLS = 10_000;
/** The burst of the harder cases below. */
const REFLUSH_CALLS = 5_000;
/** Leases released before the scripts are flushed. */
const WARM = 500;
/**
 * The calls' bound (redisTimeoutMs): 10,000 calls at once take node-redis
 * about 1 s of client time with nothing lost (measured on 2 busy cores), and
 * a lost cache sends each call twice.
 */
const BOUND_MS = 3_000;
/** Full-script sends (EVAL, SCRIPT LOAD) a node may see per script in a burst: one load, and a spare for a race. */
const SENDS_PER_SCRIPT = 2;

/** Releases what `acquires` granted, 500 at a time. */
async function releaseGranted(acquires: Promise<Lease>[]): Promise<void> {
  const leases = (await Promise.allSettled(acquires)).flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
  for (let i = 0; i < leases.length; i += 500) await Promise.all(leases.slice(i, i + 500).map((l) => l.release()));
}

/** EVAL and SCRIPT LOAD calls on `node` since its last CONFIG RESETSTAT. */
async function fullSends(node: Redis): Promise<number> {
  const info = await node.info('commandstats');
  let sends = 0;
  for (const m of info.matchAll(/^cmdstat_(eval|script\|load):calls=(\d+)/gm)) sends += Number(m[2]);
  return sends;
}

/** The calls of `calls` that failed, by message (a call past its bound fails with RedisUnavailableError). */
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

forEachTopology('a lost script cache', { clients: ONE_NODE_REDIS }, (ctx) => {
  let nodes: Redis[];
  beforeEach(async () => {
    nodes = await masters(ctx.client());
  });

  const forgetScripts = () => Promise.all(nodes.map((node) => node.script('FLUSH')));
  const resetStats = () => Promise.all(nodes.map((node) => node.config('RESETSTAT')));
  const sendsPerNode = () => Promise.all(nodes.map(fullSends));

  it(`SCRIPT FLUSH on every master, then ${CALLS} releases at once: each in its bound, one load per node`, async function () {
    this.timeout(60_000);
    const locks = new LockClient(await ctx.lockRedis(), { leaseMs: 60_000, redisTimeoutMs: BOUND_MS });
    try {
      const leases: Lease[] = [];
      for (let i = 0; i < CALLS + WARM; i += 500) {
        leases.push(...(await Promise.all(Array.from({ length: 500 }, (_, j) => locks.lock(`cache:${i + j}`).acquireWrite()))));
      }
      // Some releases first: the servers have run every script the burst sends, then lose them.
      await Promise.all(leases.splice(0, WARM).map((lease) => lease.release()));
      await forgetScripts();
      await resetStats();
      const failed = await failures(leases.map((lease) => lease.release()));
      const sends = await sendsPerNode();
      expect(failed, 'releases that failed').to.deep.equal({});
      for (const n of sends) expect(n, `full-script sends per master (${sends.join(', ')})`).to.be.at.most(SENDS_PER_SCRIPT);
    } finally {
      await locks.close();
    }
  });

  it(`a fresh client on servers without the scripts, ${CALLS} acquires at once: each in its bound, one load per node`, async function () {
    this.timeout(60_000);
    await forgetScripts();
    const locks = new LockClient(await ctx.lockRedis(), { leaseMs: 60_000, redisTimeoutMs: BOUND_MS });
    try {
      // One master sees the script first: on a Cluster the others have not seen it when the burst comes.
      await (await locks.lock('cache:first').acquireWrite()).release();
      await resetStats();
      const acquires = Array.from({ length: CALLS }, (_, i) => locks.lock(`cache:${i}`).acquireWrite());
      const failed = await failures(acquires);
      const sends = await sendsPerNode();
      await releaseGranted(acquires);
      expect(failed, 'acquires that failed').to.deep.equal({});
      for (const n of sends) expect(n, `full-script sends per master (${sends.join(', ')})`).to.be.at.most(SENDS_PER_SCRIPT);
    } finally {
      await locks.close();
    }
  });

  // The same, harder: a burst from a LockClient made that instant (GLIDE's Cluster driver keys its
  // scripts by a slot map it is still loading), and a second SCRIPT FLUSH while the first one's load
  // and its waiters are in flight.

  it(`a LockClient made that instant, ${REFLUSH_CALLS} acquires at once on servers without the scripts: one load per node`, async function () {
    this.timeout(60_000);
    const redis = await ctx.lockRedis();
    await forgetScripts();
    await resetStats();
    const locks = new LockClient(redis, { leaseMs: 60_000, redisTimeoutMs: BOUND_MS });
    try {
      const acquires = Array.from({ length: REFLUSH_CALLS }, (_, i) => locks.lock(`fresh:${i}`).acquireWrite());
      const failed = await failures(acquires);
      const sends = await sendsPerNode();
      console.log(
        `      [${ctx.kind}, ${ctx.clientKind}] fresh client burst: full sends per master ${sends.join(', ')}; failed ${JSON.stringify(failed)}`,
      );
      await releaseGranted(acquires);
      expect(failed, 'acquires that failed').to.deep.equal({});
      for (const n of sends) expect(n, `full-script sends per master (${sends.join(', ')})`).to.be.at.most(SENDS_PER_SCRIPT);
    } finally {
      await locks.close();
    }
  });

  it(`SCRIPT FLUSH, ${REFLUSH_CALLS} releases, SCRIPT FLUSH again while they run: each in its bound, a load per node per flush`, async function () {
    this.timeout(60_000);
    const locks = new LockClient(await ctx.lockRedis(), { leaseMs: 60_000, redisTimeoutMs: BOUND_MS });
    try {
      const leases: Lease[] = [];
      for (let i = 0; i < REFLUSH_CALLS + 500; i += 500) {
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

  // Redis 7.4+, Valkey 8 and later keep 500 scripts loaded by EVAL and evict the least recently used:
  // another application's 1,000 scripts evict the library's. Redis 7.0 keeps them all.
  it("another client's 1,000 distinct EVALs: renewal, release and new grants go on, each evicted script sent again once", async function () {
    this.timeout(60_000);
    const locks = new LockClient(await ctx.lockRedis(), { leaseMs: 1_500 });
    const lost: string[] = [];
    locks.on('lost', (error: Error) => lost.push(error.message));
    try {
      const held = [await locks.lock('evicted:w').acquireWrite(), await locks.lock('evicted:r').acquireRead()];
      await (await locks.lock('evicted:warm').acquireWrite()).release();
      await locks.lock('evicted:warm').inspect();
      const renewals = locks.stats().renewals;
      await eventually('a renewal', () => locks.stats().renewals > renewals); // every script the test calls, loaded
      await resetStats();
      for (const node of nodes) for (let i = 0; i < 1_000; i++) await node.eval(`return ${i}`, 0);
      const evicted = await Promise.all(
        nodes.map(async (node) => Number(/^evicted_scripts:(\d+)/m.exec(await node.info('stats'))?.[1] ?? 0)),
      );
      const cached = await Promise.all(
        nodes.map(async (node) => Number(/^number_of_cached_scripts:(\d+)/m.exec(await node.info('memory'))?.[1])),
      );
      // The other client's scripts are sent by EVAL: each node counts its 1,000, and the library's own from here on.
      const before = await sendsPerNode();
      const renewed = locks.stats().renewals;
      await eventually('renewal after the evictions', () => locks.stats().renewals > renewed + 1, 10_000);
      await (await locks.lock('evicted:new').acquireWrite()).release();
      for (const lease of held) await lease.release();
      const sends = (await sendsPerNode()).map((n, i) => n - before[i]!);
      console.log(
        `      [${ctx.kind}, ${ctx.clientKind}] after 1,000 EVALs per master: scripts cached ${cached.join(', ')}, evicted ${evicted.join(', ')}; ` +
          `the library's full sends per master ${sends.join(', ')}`,
      );
      expect(lost, 'leases lost').to.deep.equal([]);
      expect(held.filter((lease) => lease.held)).to.deep.equal([]);
      // A server that evicts keeps 500, so the library's (used before the 1,000) went: each script it runs
      // after (renewal, a write acquire, release) is sent once more, with a spare for a race.
      for (const [i, n] of evicted.entries()) {
        if (n > 0) expect(cached[i], 'scripts kept by a server that evicts').to.equal(500);
        else expect(cached[i], 'scripts kept by a server that does not').to.be.above(1_000);
      }
      for (const n of sends) expect(n, `the library's full-script sends per master (${sends.join(', ')})`).to.be.at.most(4);
    } finally {
      await locks.close();
    }
  });
});
