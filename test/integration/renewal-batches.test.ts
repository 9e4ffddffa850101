/**
 * What renewal costs, pinned exactly: leases whose keys live on one node are
 * extended in script calls of EXTEND_BATCH (2,500) leases each, the figure
 * README and safety.md quote. One script call per node per period holds only
 * up to that many leases.
 */
import { expect } from 'chai';
import { EXTEND_BATCH } from '../../src/backends/extend-groups.js';
import { hashLayout } from '../../src/backends/layouts.js';
import { ScriptedBackend } from '../../src/backends/scripted.js';
import { driverFor } from '../../src/clients/index.js';
import { lockKeys } from '../../src/keys/keys.js';
import { forEachTopology } from '../setup/topologies.js';
import { scriptCalls } from '../support/redis-stats.js';

forEachTopology('renewal batches', (ctx) => {
  it(`extends the leases of one node in calls of ${EXTEND_BATCH}: 2 × ${EXTEND_BATCH} + 1 leases take exactly 3 calls`, async () => {
    expect(EXTEND_BATCH, 'the batch size the docs quote').to.equal(2_500);
    const redis = ctx.client();
    const backend = new ScriptedBackend(driverFor(redis), hashLayout('rwlock'));
    // One hash tag: every lock in one slot, so on a Cluster too they live on one master.
    const requests = Array.from({ length: 2 * EXTEND_BATCH + 1 }, (_, i) => ({
      keys: lockKeys('rwlock', `{batch}:${i}`),
      owner: `o${i}`,
      leaseMs: 10_000,
    }));
    await backend.extend(requests.slice(0, 1)); // the script loaded on that node
    const before = await scriptCalls(redis);
    const left = await backend.extend(requests);
    expect((await scriptCalls(redis)) - before).to.equal(3);
    expect(left).to.have.length(requests.length);
    expect(
      left.every((ms) => ms === 0),
      'nothing was held, so nothing was extended',
    ).to.equal(true);
  });
});
