import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { forEachTopology } from '../setup/topologies.js';
import { targetOf } from '../support/targets.js';
import { runWorkerProcess } from '../support/worker-process.js';

const WORKER = fileURLToPath(new URL('../workers/promise-tracking-worker.ts', import.meta.url));

interface Tracking {
  before: boolean;
  reentrant: boolean;
  after: boolean;
}

forEachTopology('withRead/withWrite and the rest of the process', (ctx) => {
  // In a process of its own: another suite's AsyncLocalStorage (OpenTelemetry's) would track promises anyway.
  it('leaves no promise tracking running once the calls have returned (Node 20 and 22 ran async_hooks on every promise for good)', async () => {
    const tracking = await runWorkerProcess<Tracking>(WORKER, { RWLOCK_TARGET: JSON.stringify(targetOf(ctx)) }, { killAfterMs: 20_000 });
    expect(tracking.before, 'the probe: a fresh process tracks no promise').to.equal(false);
    expect(tracking.reentrant, 'a nested call inside the function is still its owner').to.equal(true);
    expect(tracking.after, 'promises tracked after the calls returned').to.equal(false);
  });
});
