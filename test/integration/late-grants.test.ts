/**
 * A grant whose reply lands after its lease ran out is no lease: Redis may
 * have given the lock to another owner meanwhile. A fault proxy between the
 * library's client and Redis holds the grant's reply back until Redis has
 * let that grant expire; the acquire must then try again, never resolve with
 * a lease that is already over (issue found by the fault suite: a writer's
 * repeated grant of a hold a release had handed it came back behind a 1.1 s
 * stall, and overlapped the readers Redis let in after it expired).
 */
import { expect } from 'chai';
import type { LockRedisClient } from '../../src/clients/index.js';
import { LockClient } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import { type ClusterFaultProxy, type FaultProxy, proxyCluster, startFaultProxy } from '../../src/testing/index.js';
import { ALL_CLIENTS, disconnect, forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { totalKeys } from '../support/redis-stats.js';
import { connectLockClient, targetThrough } from '../support/targets.js';

/** A fixed lease (not renewed), short enough to run out while its grant is held back. */
const LEASE_MS = 300;

forEachTopology('grants whose reply lands after their lease ran out', { clients: ALL_CLIENTS }, (ctx) => {
  let proxy: FaultProxy | ClusterFaultProxy;
  let through: LockRedisClient; // the library's client: through the proxy
  let direct: RedisClient; // another process's view: straight to Redis
  const closing: LockClient[] = [];

  beforeEach(async () => {
    direct = ctx.client();
    proxy = ctx.kind === 'standalone' ? await startFaultProxy({ target: { port: ctx.server.port } }) : await proxyCluster(ctx.cluster);
    through = await connectLockClient(targetThrough(proxy, ctx.clientKind));
  });
  afterEach(async () => {
    for (const locks of closing.splice(0)) await locks.close();
    disconnect(through);
    await proxy.close();
  });

  /** A LockClient through the proxy whose next grant on `resource` (a bare fence) is held back until Redis let it expire. */
  const heldBackUntilExpired = async (resource: string) => {
    const locks = new LockClient(through);
    const others = new LockClient(direct);
    closing.push(locks, others);
    const lock = locks.lock(resource);
    await (await lock.acquireWrite()).release(); // connected, script loaded
    const held = proxy.stallAtReply({ argument: lock.keys.state, reply: ':' });
    const expired = async () => {
      await held;
      await eventually('Redis to let the held-back grant expire', async () => (await totalKeys(direct)) === 0);
    };
    return { lock, others, expired };
  };

  if (ctx.clientKind === 'ioredis')
    it('the proxy holds a reply back from stallAtReply: the server ran the command, its reply lands at resume()', async () => {
      const redis = through as RedisClient;
      const held = proxy.stallAtReply({ command: 'incr' });
      let answered = false;
      const late = redis.incr('n').then((n) => {
        answered = true;
        return n;
      });
      await held;
      expect(await direct.get('n'), 'run by the server').to.equal('1');
      expect(answered, 'answered during the stall').to.equal(false);
      proxy.resume();
      expect(await late).to.equal(1);
    });

  for (const mode of ['read', 'write'] as const) {
    it(`a ${mode} acquire tries again and resolves with the lease Redis holds now`, async () => {
      const { lock, others, expired } = await heldBackUntilExpired(`late-${mode}`);
      const acquiring = mode === 'read' ? lock.acquireRead({ leaseMs: LEASE_MS }) : lock.acquireWrite({ leaseMs: LEASE_MS });
      await expired();
      proxy.resume();
      const lease = await acquiring;
      expect(lease.signal.aborted, 'the lease is over as it is returned').to.equal(false);
      const info = await others.inspect(lock.resource);
      const holders = mode === 'write' ? [info.writer] : info.readers;
      expect(holders.map((h) => h?.owner)).to.deep.equal([lease.token]);
      expect(info.fence).to.equal(lease.fence);
      await lease.release();
      expect(await totalKeys(direct)).to.equal(0);
    });
  }

  it('a try finds the lock taken by another owner meanwhile: null, and nothing of its own left', async () => {
    const { lock, others, expired } = await heldBackUntilExpired('late-try');
    const trying = lock.tryAcquireWrite({ leaseMs: LEASE_MS });
    await expired();
    const other = await others.lock(lock.resource).acquireWrite();
    proxy.resume();
    expect(await trying).to.equal(null);
    const info = await others.inspect(lock.resource);
    expect(info.writer?.owner).to.equal(other.token);
    expect(info.readers).to.deep.equal([]);
    await other.release();
    expect(await totalKeys(direct)).to.equal(0);
  });
});
