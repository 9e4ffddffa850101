/**
 * (d) Scale in held readers: read acquire+release cycles on one resource that
 * already has N live readers (held by another LockClient with long explicit
 * leases), `inFlight` cycles at a time. Reports cycles/s, p50 latency and the
 * masters' µs per script call; the cost must not grow with N.
 */

import { type Lease, LockClient } from '../../src/index.js';
import type { BenchConfig } from '../config.js';
import { makeAdapter } from '../libs.js';
import { percentile } from '../stats.js';
import { delta, ready, snapshot, type Topology } from '../topology.js';
import { cycleLoop } from './uncontended.js';

export interface ScaleResult {
  readonly liveReaders: number;
  readonly cycles: number;
  readonly cyclesPerSec: number;
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
  readonly serverUsecPerScript: number | null;
  /** Readers actually live on the resource before the measurement (checked with inspect). */
  readonly checkedReaders: number;
}

/** Long enough to outlive any measurement; explicit, so these leases are not renewed. */
const HELD_LEASE_MS = 600_000;

export async function measureScale(topology: Topology, config: BenchConfig, liveReaders: number, tag: string): Promise<ScaleResult> {
  const c = config.scale;
  const resource = `s:${tag}:${liveReaders}`;
  const holderRedis = topology.client();
  const redis = topology.client();
  await Promise.all([ready(holderRedis), ready(redis)]);
  const holders = new LockClient(holderRedis);
  const adapter = makeAdapter('rwlock-read', redis, config.fastRetryMs);
  const held: Lease[] = [];
  try {
    const lock = holders.lock(resource);
    for (let i = 0; i < liveReaders; i += 64) {
      const batch = Math.min(64, liveReaders - i);
      held.push(...(await Promise.all(Array.from({ length: batch }, () => lock.acquireRead({ leaseMs: HELD_LEASE_MS })))));
    }
    const checkedReaders = (await holders.inspect(resource)).readers.length;
    const resources = Array.from({ length: c.inFlight }, () => resource);
    await cycleLoop(adapter, 'rwlock-read', resources, c.warmupMs, c.maxCycles, false);
    const before = await snapshot(topology);
    const run = await cycleLoop(adapter, 'rwlock-read', resources, c.durationMs, c.maxCycles, true);
    const d = delta(before, await snapshot(topology));
    return {
      liveReaders,
      cycles: run.cycles,
      cyclesPerSec: (run.cycles * 1000) / run.elapsedMs,
      p50Ms: percentile(run.latencies, 50),
      p99Ms: percentile(run.latencies, 99),
      serverUsecPerScript: d.scriptCalls > 0 ? d.scriptUsec / d.scriptCalls : null,
      checkedReaders,
    };
  } finally {
    await adapter.close();
    await holders.close();
    redis.disconnect();
    holderRedis.disconnect();
  }
}
