/**
 * iovalkey, the Valkey project's fork of ioredis, as the Redis client: a
 * LockClient on its `Redis` and its `Cluster` (typed: `new LockClient(valkey)`
 * compiles), on both topologies. The core of the library: acquire, wait and
 * be woken by its sharded pub/sub, extend, inspect, release, fenced writes,
 * force-release, and nothing left behind.
 */
import { expect } from 'chai';
import { Redis as Valkey, Cluster as ValkeyCluster } from 'iovalkey';
import { fencedGet, fencedSet, LockClient } from '../../src/index.js';
import { forEachTopology, type TopologyContext } from '../setup/topologies.js';
import { handOffWrite } from '../support/handoff.js';
import { totalKeys } from '../support/redis-stats.js';

/** An iovalkey client of the topology. */
function valkeyClient(ctx: TopologyContext): Valkey | ValkeyCluster {
  return ctx.kind === 'standalone'
    ? new Valkey({ host: ctx.server.host, port: ctx.server.port })
    : new ValkeyCluster(
        ctx.cluster.startupNodes.map((n) => ({ host: n.host, port: n.port })),
        { scaleReads: 'master' },
      );
}

forEachTopology('iovalkey as the client', (ctx) => {
  const opened: { client: Valkey | ValkeyCluster; locks: LockClient }[] = [];
  const open = (options?: ConstructorParameters<typeof LockClient>[1]) => {
    const client = valkeyClient(ctx);
    const locks = new LockClient(client, options);
    opened.push({ client, locks });
    return { client, locks };
  };
  afterEach(async () => {
    for (const { client, locks } of opened.splice(0)) {
      await locks.close();
      client.disconnect();
    }
  });

  it('acquires, waits and is woken, extends, inspects and releases', async () => {
    const { locks } = open({ leaseMs: 2_000 });
    const { locks: other } = open({ recheckMs: 20_000 }); // a grant before 20 s is the wake-up
    await (await handOffWrite(locks, other, 'job:{1}')).release();
    const readers = await Promise.all([locks.lock('job:{1}').acquireRead(), other.lock('job:{1}').acquireRead()]);
    expect((await locks.inspect('job:{1}')).readers).to.have.length(2);
    await Promise.all(readers.map((r) => r.release()));
    expect(locks.stats().subscriberErrors + other.stats().subscriberErrors).to.equal(0);
    expect(await totalKeys(ctx.client())).to.equal(0);
  });

  it('writes and reads with fences, and force-releases', async () => {
    const { client, locks } = open();
    await locks.withWrite('data:{7}', (lease) => fencedSet(client, 'data:{7}', 'v1', lease));
    expect(await locks.withRead('data:{7}', (lease) => fencedGet(client, 'data:{7}', lease))).to.equal('v1');
    await locks.lock('job:{2}').acquireWrite();
    expect((await locks.forceRelease('job:{2}')).deleted.length).to.be.greaterThan(0);
    expect((await locks.inspect('job:{2}')).mode).to.equal('free');
  });
});
