// Known problem, kept as a pending test for the scripts' owner (lua/): while a
// slot is MIGRATING, Redis runs a script on the source node only if every key
// it declares exists there, and then refuses, mid-script, any command on a key
// of that slot that does not exist (ERR "Script attempted to access a non
// local key"). A script that deletes one of its keys and touches it again
// (release: ZREM of the last lease deletes the leases key, then ZCOUNT on it)
// therefore fails half-way, after its earlier writes took effect. Safety holds
// (a grant that errors is treated as an unknown outcome, a release that errors
// as not done), but the caller gets an error for an operation that happened,
// and the rest of the script (wake-ups, key expiry) never runs.
//
// Set RUN_KNOWN_PROBLEMS=1 to run it.
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { LockClient } from '../../src/index.js';
import { lockKeys } from '../../src/keys.js';
import { forEachTopology } from '../setup/topologies.js';

forEachTopology('scripts while their slot migrates', (ctx) => {
  if (ctx.kind !== 'cluster') return;
  const run = process.env['RUN_KNOWN_PROBLEMS'] ? it : it.skip;

  run('a release on the MIGRATING source runs whole or not at all', async function () {
    this.timeout(30_000);
    const keys = lockKeys('rwlock', 'atomic');
    const source = await ctx.cluster.masterForSlot(keys.slot);
    const target = (await ctx.cluster.masters()).find((m) => m.port !== source.port)!;
    const src = new Redis(source.port, source.host);
    const dst = new Redis(target.port, target.host);
    const locks = new LockClient(ctx.client(), { leaseMs: 60_000 });
    const waiter = new LockClient(ctx.client());
    try {
      const held = await locks.lock('atomic').acquireWrite();
      // A writer waits, so all three keys of the lock exist on the source.
      const waiting = waiter.lock('atomic').acquireWrite({ waitMs: 10_000 }).catch((e: unknown) => e);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const sourceId = String(await src.call('CLUSTER', 'MYID'));
      const targetId = String(await dst.call('CLUSTER', 'MYID'));
      await dst.call('CLUSTER', 'SETSLOT', keys.slot, 'IMPORTING', sourceId);
      await src.call('CLUSTER', 'SETSLOT', keys.slot, 'MIGRATING', targetId);
      const outcome = await held.release().then(() => 'released', (e: Error) => e.message);
      await src.call('CLUSTER', 'SETSLOT', keys.slot, 'STABLE');
      await dst.call('CLUSTER', 'SETSLOT', keys.slot, 'STABLE');
      expect(outcome).to.equal('released');
      await ((await waiting) as { release(): Promise<void> }).release();
    } finally {
      await src.call('CLUSTER', 'SETSLOT', keys.slot, 'STABLE').catch(() => undefined);
      await dst.call('CLUSTER', 'SETSLOT', keys.slot, 'STABLE').catch(() => undefined);
      src.disconnect();
      dst.disconnect();
      await locks.close();
      await waiter.close();
    }
  });
});
