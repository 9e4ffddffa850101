/**
 * (a) Uncontended acquire+release cycles on distinct resources, at 1, 16 and
 * 64 cycles in flight from one process and one connection per library:
 * cycles/s, p50/p99 cycle latency, and the commands each cycle costs (script
 * calls counted by the masters, commands counted as the client writes them,
 * MOVED/ASK redirects).
 */
import type { BenchConfig } from '../config.js';
import { makeAdapter, modeOf, UNCONTENDED_LIBS, type LibName, type LockAdapter } from '../libs.js';
import { percentile } from '../stats.js';
import { delta, ready, SentCounter, serverCpuSeconds, snapshot, type Topology } from '../topology.js';

export interface CycleResult {
  readonly lib: LibName;
  readonly inFlight: number;
  readonly cycles: number;
  readonly cyclesPerSec: number;
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
  /** EVAL/EVALSHA calls the masters served per cycle. */
  readonly scriptsPerCycle: number;
  /** Commands the client wrote per cycle (every round trip, redirect retries included). */
  readonly sentPerCycle: number;
  /** MOVED/ASK/TRYAGAIN replies during the measurement. */
  readonly redirects: number;
  /** µs the masters spent per script call. */
  readonly serverUsecPerScript: number | null;
  /** CPU µs this (client) process used per cycle, user + sys. */
  readonly clientCpuUsPerCycle: number;
  /** CPU µs every Redis process (replicas included) used per cycle, user + sys. */
  readonly serverCpuUsPerCycle: number;
}

export interface CycleLoopResult {
  cycles: number;
  elapsedMs: number;
  latencies: number[];
}

/**
 * Runs `inFlight` loops of acquire+release, each on its own resource, until
 * `durationMs` has passed or `maxCycles` cycles were done, whichever is first.
 */
export async function cycleLoop(
  adapter: LockAdapter,
  lib: LibName,
  resources: readonly string[],
  durationMs: number,
  maxCycles: number,
  record: boolean,
): Promise<CycleLoopResult> {
  const latencies: number[] = [];
  let cycles = 0;
  const start = performance.now();
  const end = start + durationMs;
  await Promise.all(
    resources.map(async (resource) => {
      while (cycles < maxCycles && performance.now() < end) {
        cycles++;
        const t = performance.now();
        const held = await adapter.acquire(resource, { mode: modeOf(lib) });
        await held.release();
        if (record) latencies.push(performance.now() - t);
      }
    }),
  );
  return { cycles, elapsedMs: performance.now() - start, latencies };
}

export async function measureCycles(
  topology: Topology,
  config: BenchConfig,
  lib: LibName,
  inFlight: number,
  tag: string,
): Promise<CycleResult> {
  const c = config.uncontended;
  const redis = topology.client();
  const sent = new SentCounter();
  sent.attach(redis);
  await ready(redis);
  const adapter = makeAdapter(lib, redis, config.fastRetryMs);
  try {
    const resources = Array.from({ length: inFlight }, (_, i) => `u:${tag}:${lib}:${inFlight}:${i}`);
    await cycleLoop(adapter, lib, resources, c.warmupMs, c.maxCycles, false);
    const before = await snapshot(topology);
    const serverCpuBefore = await serverCpuSeconds(topology);
    sent.reset();
    const cpuBefore = process.cpuUsage();
    const run = await cycleLoop(adapter, lib, resources, c.durationMs, c.maxCycles, true);
    const cpu = process.cpuUsage(cpuBefore);
    const serverCpu = (await serverCpuSeconds(topology)) - serverCpuBefore;
    const sentCount = sent.count;
    const d = delta(before, await snapshot(topology));
    return {
      lib,
      inFlight,
      cycles: run.cycles,
      cyclesPerSec: (run.cycles * 1000) / run.elapsedMs,
      p50Ms: percentile(run.latencies, 50),
      p99Ms: percentile(run.latencies, 99),
      scriptsPerCycle: d.scriptCalls / run.cycles,
      sentPerCycle: sentCount / run.cycles,
      redirects: d.redirects,
      serverUsecPerScript: d.scriptCalls > 0 ? d.scriptUsec / d.scriptCalls : null,
      clientCpuUsPerCycle: (cpu.user + cpu.system) / run.cycles,
      serverCpuUsPerCycle: (serverCpu * 1e6) / run.cycles,
    };
  } finally {
    await adapter.close();
    redis.disconnect();
  }
}

/** One run: every library at every concurrency, libraries interleaved so drift hits all alike. */
export async function uncontendedRun(topology: Topology, config: BenchConfig, tag: string, libs: readonly LibName[]): Promise<CycleResult[]> {
  const out: CycleResult[] = [];
  for (const inFlight of config.uncontended.inFlight) {
    for (const lib of libs.filter((l) => UNCONTENDED_LIBS.includes(l))) {
      out.push(await measureCycles(topology, config, lib, inFlight, tag));
    }
  }
  return out;
}
