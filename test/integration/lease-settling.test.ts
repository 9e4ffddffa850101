/**
 * A lease's `held` and `signal` say what the library knows: a
 * release in flight is not turned into a loss by a renewal that ran after
 * it on the server, and a lease whose release `close()` could not confirm
 * is lost by its local deadline like any other, never held forever.
 */
import { tracingChannel } from 'node:diagnostics_channel';
import { expect } from 'chai';
import type { LockRedisClient } from '../../src/clients/index.js';
import { type Lease, LockClient, LockLostError, TRACING_CHANNELS } from '../../src/index.js';
import { type ClusterFaultProxy, type FaultProxy, proxyCluster, startFaultProxy } from '../../src/testing/index.js';
import { ALL_CLIENTS, disconnect, forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { connectLockClient, targetThrough } from '../support/targets.js';

const LEASES = 200;

forEachTopology('leases that settle', { clients: ALL_CLIENTS }, (ctx) => {
  let proxy: FaultProxy | ClusterFaultProxy | undefined;
  let proxied: LockRedisClient | undefined;
  afterEach(async () => {
    proxy?.resume();
    if (proxied) disconnect(proxied);
    await proxy?.close();
    proxy = proxied = undefined;
  });

  it('a lease released while a renewal round starts is released, never reported lost', async function () {
    this.timeout(20_000);
    const locks = new LockClient(await ctx.lockRedis(), { leaseMs: 3_000 }); // renews every second
    const lost: Lease[] = [];
    locks.on('lost', (_error, leases) => lost.push(...leases));
    const leases = await Promise.all(Array.from({ length: LEASES }, (_, i) => locks.lock(`settle:${i}`).acquireWrite()));
    const signals = leases.map((l) => l.signal);
    // As the next round starts, every lease is released: each release goes out before the round's
    // calls, which then find the locks gone while the releases' answers are still on their way.
    const renew = tracingChannel(TRACING_CHANNELS.renew);
    let releasing: Promise<unknown> | undefined;
    const handlers = {
      start: () => void (releasing ??= Promise.all(leases.map((l) => l.release()))),
      end: () => undefined,
      asyncStart: () => undefined,
      asyncEnd: () => undefined,
      error: () => undefined,
    };
    renew.subscribe(handlers);
    try {
      await eventually('a renewal round', () => releasing !== undefined, 5_000);
      await releasing;
      await eventually('the round to end', () => locks.stats().heldLeases === 0);
    } finally {
      renew.unsubscribe(handlers);
      await locks.close();
    }
    expect(lost.length, 'released leases reported lost').to.equal(0);
    expect(signals.filter((s) => s.aborted).length, 'signals aborted').to.equal(0);
    expect(leases.every((l) => !l.held)).to.equal(true);
  });

  it('a lease whose release close() could not confirm is lost by its local deadline, not held forever', async function () {
    this.timeout(20_000);
    proxy = ctx.kind === 'standalone' ? await startFaultProxy({ target: { port: ctx.server.port } }) : await proxyCluster(ctx.cluster);
    proxied = await connectLockClient(targetThrough(proxy, ctx.clientKind));
    const locks = new LockClient(proxied, { leaseMs: 600, redisTimeoutMs: 200 });
    const others = new LockClient(await ctx.lockRedis());
    try {
      const lease = await locks.lock('partitioned').acquireWrite();
      let aborted = false;
      lease.signal.addEventListener('abort', () => (aborted = true));
      proxy.stall(); // a partition: the release goes out and nothing comes back
      await locks.close();
      // Redis' deadline passed: another client holds the lock, so this lease's local deadline has passed too.
      const next = await others.lock('partitioned').acquireWrite({ waitMs: 5_000 });
      await eventually('the signal to abort by the deadline timer', () => aborted, 2_000);
      expect(lease.held, 'held while another client holds the lock').to.equal(false);
      expect(lease.signal.reason).to.be.instanceOf(LockLostError);
      await next.release();
    } finally {
      await others.close();
    }
  });
});
