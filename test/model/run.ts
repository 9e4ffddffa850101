/**
 * Runs model-checker configurations from the command line and prints each
 * one's size and time, or its counterexample:
 *   node --import tsx test/model/run.ts [--grep <text>] [--larger]
 * (MODEL_CONNECTIONS: connections side by side; MODEL_MAX_STATES: the bound.)
 */
import { parseArgs } from 'node:util';
import { check } from './checker.js';
import { CI, LARGER } from './configs.js';
import { describeResult, startModelServer } from './server.js';
import { virtualClockScripts } from './virtual-clock.js';

const { values } = parseArgs({ options: { grep: { type: 'string' }, larger: { type: 'boolean' } } });
const configs = [...CI, ...(values.larger ? LARGER : [])].filter((c) => values.grep === undefined || c.name.includes(values.grep));
const model = await startModelServer();
try {
  for (const config of configs) {
    const r = await check(config, {
      redis: model.redis,
      scripts: virtualClockScripts(),
      maxStates: Number(process.env.MODEL_MAX_STATES ?? 200_000),
    });
    console.log(`${describeResult(r)}${r.bounded ? ' (bounded)' : ''}`);
    if (r.deepest) console.log(`  deepest:\n    ${r.deepest.join('\n    ')}`);
    if (r.violation) console.log(`  ${r.violation.kind}: ${r.violation.message}\n    ${r.violation.trace.join('\n    ')}`);
  }
} finally {
  await model.close();
}
