/** Helpers of the multi-process migration tests: run test/workers/mixed-worker.ts processes and check their counters. */
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { RedisClient } from '../../src/redis.js';
import type { TopologyContext } from '../setup/topologies.js';
import { masters } from './redis-stats.js';
import { targetOf } from './targets.js';
import { runWorkerProcess } from './worker-process.js';

const WORKER = fileURLToPath(new URL('../workers/mixed-worker.ts', import.meta.url));

export interface MixedResult {
  kind: string;
  writes: Record<string, number>;
  reads: number;
  halfBuilt: number;
}

/** Runs one mixed-worker process of `kind` (`old` or a library mode) to completion. */
function runMixedWorker(ctx: TopologyContext, kind: string, env: Record<string, string> = {}): Promise<MixedResult> {
  return runWorkerProcess(WORKER, { RWLOCK_TARGET: JSON.stringify(targetOf(ctx)), RWLOCK_KIND: kind, ...env }, { name: `${kind} worker` });
}

/**
 * Runs one mixed-worker process per entry of `kinds` at once, each doing 300
 * operations on `resources` (`env` adds to that); their results.
 */
export function runMixedWorkers(
  ctx: TopologyContext,
  kinds: readonly string[],
  resources: readonly string[],
  env: Record<string, string> = {},
): Promise<MixedResult[]> {
  const all = { RWLOCK_OPS: '300', RWLOCK_RESOURCES: resources.join(','), ...env };
  return Promise.all(kinds.map((kind) => runMixedWorker(ctx, kind, all)));
}

/** Every key on every master (for "nothing was left behind" checks). */
export async function allKeys(redis: RedisClient, pattern = '*'): Promise<string[]> {
  return (await Promise.all((await masters(redis)).map((node) => node.keys(pattern)))).flat().sort();
}

/** Sums the workers' writes per resource and checks the counters: zero lost updates. */
export async function expectNoLostUpdates(redis: RedisClient, results: MixedResult[], resources: string[]): Promise<number> {
  let total = 0;
  for (const resource of resources) {
    const writes = results.reduce((sum, r) => sum + r.writes[resource]!, 0);
    total += writes;
    expect(Number(await redis.get(`data:{${resource}}:counter`)), `counter of ${resource}`).to.equal(writes);
  }
  return total;
}
