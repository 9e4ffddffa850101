import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { forEachTopology, NODE_REDIS_IN_CI_AND_GLIDE } from '../setup/topologies.js';
import { targetOf } from '../support/targets.js';
import { runWorkerProcess } from '../support/worker-process.js';

const WORKER = fileURLToPath(new URL('../workers/counter-worker.ts', import.meta.url));
const PROCESSES = 4;
const OPS_PER_PROCESS = 1_250;
const RESOURCES = ['alpha', 'beta', 'gamma'];

interface WorkerResult {
  writes: Record<string, number>;
  reads: number;
  halfBuilt: number;
}

function runWorker(target: object): Promise<WorkerResult> {
  return runWorkerProcess(WORKER, {
    RWLOCK_TARGET: JSON.stringify(target),
    RWLOCK_OPS: String(OPS_PER_PROCESS),
    RWLOCK_RESOURCES: RESOURCES.join(','),
  });
}

forEachTopology('several processes', { clients: NODE_REDIS_IN_CI_AND_GLIDE }, (ctx) => {
  it(`lose no update of a non-atomic counter over ${PROCESSES * OPS_PER_PROCESS} mixed operations in ${PROCESSES} processes`, async function () {
    this.timeout(180_000);
    const results = await Promise.all(Array.from({ length: PROCESSES }, () => runWorker(targetOf(ctx))));
    const redis = ctx.client();
    let operations = 0;
    for (const resource of RESOURCES) {
      const writes = results.reduce((sum, r) => sum + r.writes[resource]!, 0);
      operations += writes;
      expect(Number(await redis.get(`data:{${resource}}:counter`)), `counter of ${resource}`).to.equal(writes);
      expect(writes).to.be.greaterThan(100);
    }
    operations += results.reduce((sum, r) => sum + r.reads, 0);
    expect(operations).to.equal(PROCESSES * OPS_PER_PROCESS);
    expect(
      results.reduce((sum, r) => sum + r.halfBuilt, 0),
      'reads that saw a half-built value',
    ).to.equal(0);
    // Every lock was released: only the data keys remain.
    const keys =
      ctx.kind === 'cluster'
        ? (
            await Promise.all(
              ctx
                .client()
                .nodes('master')
                .map((n) => n.keys('rwlock*')),
            )
          ).flat()
        : await redis.keys('rwlock*');
    expect(keys).to.deep.equal([]);
  });
});
