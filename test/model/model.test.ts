// The model checker (test/model/checker.ts) on the configurations CI runs (`npm run test:model`),
// and the counterexamples it found in the scripts, replayed step by step.
import { expect } from 'chai';
import { replay } from './checker.js';
import { CI } from './configs.js';
import { FOUND } from './found.js';
import { checkConfigs, model } from './suite.js';
import { virtualClockScripts } from './virtual-clock.js';

describe('model checker: every interleaving of small configurations, through the real scripts', function () {
  this.timeout(600_000);
  checkConfigs(CI);

  describe('counterexamples found, replayed', () => {
    const scripts = virtualClockScripts();
    for (const found of FOUND) {
      it(found.what, async () => {
        const { trace, broken } = await replay(found.config, model.redis[0]!, scripts, found.path);
        expect(trace).to.have.length(found.path.length);
        expect(broken, trace.join('\n')).to.deep.equal([]);
      });
    }
  });
});
