/**
 * A lease's `held` and `signal` say what the library knows (issue 36): a
 * release in flight is not turned into a loss by a renewal that ran after
 * it on the server.
 */
import { tracingChannel } from 'node:diagnostics_channel';
import { expect } from 'chai';
import { type Lease, LockClient, TRACING_CHANNELS } from '../../src/index.js';
import { ALL_CLIENTS, forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';

const LEASES = 200;

forEachTopology('leases that settle', { clients: ALL_CLIENTS }, (ctx) => {
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
});
