// The model checker (test/model/checker.ts) on the configurations CI runs (`npm run test:model`),
// and the counterexamples it found in the scripts, replayed step by step.
import { expect } from 'chai';
import { check, replay } from './checker.js';
import { CI } from './configs.js';
import { FOUND } from './found.js';
import { describeResult, type ModelServer, startModelServer } from './server.js';
import { virtualClockScripts } from './virtual-clock.js';

describe('model checker: every interleaving of small configurations, through the real scripts', function () {
  this.timeout(600_000);
  let model: ModelServer;
  const scripts = virtualClockScripts();
  before(async () => {
    model = await startModelServer();
  });
  after(async () => {
    await model?.close();
  });

  for (const config of CI) {
    it(config.name, async () => {
      const r = await check(config, { redis: model.redis, scripts });
      console.log(`      ${describeResult(r)}`);
      expect(r.bounded, 'the state bound was reached').to.equal(false);
      expect(r.violation && `${r.violation.kind}: ${r.violation.message}\n  ${r.violation.trace.join('\n  ')}`).to.equal(undefined);
    });
  }

  describe('counterexamples found, replayed', () => {
    for (const found of FOUND) {
      it(found.what, async () => {
        const { trace, broken } = await replay(found.config, model.redis[0]!, scripts, found.path);
        expect(trace).to.have.length(found.path.length);
        expect(broken, trace.join('\n')).to.deep.equal([]);
      });
    }
  });
});
