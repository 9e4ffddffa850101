// The history workload without faults, on every topology: the checker must
// find no violation in a few thousand mixed operations of several processes.
import { expect } from 'chai';
import { forEachTopology } from '../setup/topologies.js';
import { WORKLOAD_DEFAULTS, Workload } from '../support/history-run.js';
import { targetOf } from '../support/targets.js';
import { checkAndReport, counters } from './support.js';

const PROCESSES = 4;

forEachTopology('history of a multi-process workload', (ctx) => {
  let workload: Workload | undefined;
  afterEach(() => workload?.killAll());

  it(`shows no violation in ${PROCESSES} processes of mixed reads and writes`, async function () {
    this.timeout(90_000);
    workload = new Workload(targetOf(ctx), { ops: 600, durationMs: 15_000 });
    await workload.launch(PROCESSES);
    const history = await workload.finish(60_000);
    const result = checkAndReport('none (baseline)', ctx, history, {
      counters: await counters(ctx.client(), WORKLOAD_DEFAULTS.resources),
    });
    expect(result.violations).to.deep.equal([]);
    expect(result.failoverWindow).to.deep.equal([]);
    expect(result.grants).to.equal(PROCESSES * 600);
    expect(result.committedWrites).to.equal(result.writes);
    expect(result.leasesLost).to.equal(0);
  });
});
