/** A mocha suite that model-checks configurations, one test each (test/model/model.test.ts, test/faults/model.test.ts). */
import { expect } from 'chai';
import { check } from './checker.js';
import { describeResult, type ModelServer, startModelServer } from './server.js';
import { virtualClockScripts } from './virtual-clock.js';
import type { Config } from './world.js';

/** The model server of the running suite (started before its tests), for tests that replay paths on it. */
export let model: ModelServer;

export function checkConfigs(configs: readonly Config[]): void {
  const scripts = virtualClockScripts();
  before(async () => {
    model = await startModelServer();
  });
  after(async () => {
    await model?.close();
  });
  for (const config of configs) {
    it(config.name, async () => {
      const r = await check(config, { redis: model.redis, scripts });
      console.log(`      ${describeResult(r)}`);
      expect(r.bounded, 'the state bound was reached').to.equal(false);
      expect(r.violation && `${r.violation.kind}: ${r.violation.message}\n  ${r.violation.trace.join('\n  ')}`).to.equal(undefined);
    });
  }
}
