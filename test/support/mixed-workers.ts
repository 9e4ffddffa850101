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
function runMixedWorker(ctx: TopologyContext, kind: string, env: Record<string, string>, signal: AbortSignal): Promise<MixedResult> {
  const target = { RWLOCK_TARGET: JSON.stringify(targetOf(ctx)), RWLOCK_KIND: kind, ...env };
  return runWorkerProcess(WORKER, target, { name: `${kind} worker`, signal });
}

/**
 * Runs one mixed-worker process per entry of `kinds` at once, each doing 300
 * operations on `resources` (`env` adds to that); their results. When one
 * fails, the others are killed, and it rejects with that first failure once
 * every process has ended: none writes on into the next test.
 */
export async function runMixedWorkers(
  ctx: TopologyContext,
  kinds: readonly string[],
  resources: readonly string[],
  env: Record<string, string> = {},
): Promise<MixedResult[]> {
  const all = { RWLOCK_OPS: '300', RWLOCK_RESOURCES: resources.join(','), ...env };
  const stop = new AbortController();
  let first: unknown;
  const runs = kinds.map((kind) =>
    runMixedWorker(ctx, kind, all, stop.signal).catch((error: unknown) => {
      if (!stop.signal.aborted) {
        first = error;
        stop.abort();
      }
      throw error;
    }),
  );
  const settled = await Promise.allSettled(runs);
  if (stop.signal.aborted) throw first;
  return settled.map((s) => (s as PromiseFulfilledResult<MixedResult>).value);
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
