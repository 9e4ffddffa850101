/**
 * (g) A neighbour's latency: what renewal costs the other clients of a
 * shared Redis. A worker thread (its own event loop, so the library's client
 * work does not delay it) runs a plain `GET` loop, one at a time, on its own
 * connection to the master that renews the most, while `leases` auto-renewed
 * leases are held (on a Cluster the loop's master renews a third of them);
 * and the same loop with no lock held, in the same run, before them. Redis
 * runs one command at a time, so every µs a renewal call runs is a µs the
 * `GET` behind it waits; the percentiles count the GETs a steady client would
 * have sent during a stall (coordinated omission). Also reports the longest command SLOWLOG lists (at
 * 1 ms) on any master during the loop, and how many scripts it lists.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Redis } from 'ioredis';
import { LockClient } from '../../src/index.js';
import type { BenchConfig } from '../config.js';
import { baselineLockClient } from '../libs.js';
import { watchMachineStalls } from '../machine-stalls.js';
import { sleep } from '../stats.js';
import { delta, ready, setSlowlogThreshold, slowlog, snapshot, type Topology } from '../topology.js';

export interface NeighbourResult {
  /** `none`: no lock held; `rwlock`: this checkout renewing; `rwlock-base`: the --baseline checkout renewing. */
  readonly holder: 'none' | 'rwlock' | 'rwlock-base';
  readonly leases: number;
  readonly leaseMs: number;
  readonly gets: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Renewal periods the loop spanned (lease/3 each). */
  readonly periods: number;
  /** Script calls the masters ran during the loop, and how many of them SLOWLOG listed at 1 ms; the longest command it listed. */
  readonly scriptCalls: number;
  readonly slowScripts: number;
  readonly longestCommandUsec: number | null;
  readonly longestCommand: string | null;
  /** Leases lost while held: must be 0. */
  readonly lost: number;
  /** Moments over 4 ms the machine ran nothing of this process meanwhile (a stall lists whatever command runs then). */
  readonly machineStalls: number;
}

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { Redis } = require(workerData.ioredis);
const redis = new Redis({ host: workerData.host, port: workerData.port });
let stop = false;
parentPort.once('message', () => (stop = true));
(async () => {
  await redis.set(workerData.key, 'v');
  const ms = [];
  const until = performance.now() + workerData.durationMs;
  while (!stop && performance.now() < until) {
    const t = performance.now();
    await redis.get(workerData.key);
    ms.push(performance.now() - t);
  }
  redis.disconnect();
  // One GET at a time sends none while the server is blocked: a 40 ms stall is one sample among
  // thousands. Count it as a client sending a GET every median interval would see it: the GETs
  // it would have sent meanwhile waited too (40 ms, 40 ms less one interval, and so on).
  const sorted = [...ms].sort((a, b) => a - b);
  const interval = sorted[Math.floor(sorted.length / 2)];
  const seen = [];
  for (const m of ms) for (let late = m; late > 0; late -= interval) seen.push(late);
  seen.sort((a, b) => a - b);
  const at = (p) => seen[Math.min(seen.length - 1, Math.ceil((p / 100) * seen.length) - 1)];
  parentPort.postMessage({ gets: ms.length, p50: at(50), p99: at(99), max: sorted[sorted.length - 1] });
})();
`;

/**
 * The `GET` loop on `master` for `durationMs`, in a worker thread: the count,
 * p50 and p99 as a client sending one every median interval sees them, and
 * the longest, in ms.
 */
async function getLoop(master: Redis, key: string, durationMs: number): Promise<{ gets: number; p50: number; p99: number; max: number }> {
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: {
      ioredis: createRequire(import.meta.url).resolve('ioredis'),
      host: master.options.host,
      port: master.options.port,
      key,
      durationMs,
    },
  });
  try {
    return await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
  } finally {
    await worker.terminate();
  }
}

/** A key that lives on `master` (on a Cluster the loop's connection is to that node alone). */
async function keyOn(topology: Topology, master: Redis): Promise<string> {
  for (let i = 0; ; i++) {
    const key = `neighbour:${i}`;
    if ((await topology.masterFor(key)) === master) return key;
  }
}

async function measureOne(
  topology: Topology,
  config: BenchConfig,
  tag: string,
  holder: NeighbourResult['holder'],
): Promise<NeighbourResult> {
  const c = config.neighbour;
  const [master] = await topology.masters();
  const key = await keyOn(topology, master!);
  let locks: LockClient | undefined;
  let lost = 0;
  const redis = topology.client();
  try {
    if (holder !== 'none') {
      const Client = holder === 'rwlock' ? LockClient : baselineLockClient();
      if (!Client) throw new Error('rwlock-base needs --baseline <checkout>');
      await ready(redis);
      locks = new Client(redis, { leaseMs: c.leaseMs });
      locks.on('lost', (_error, leases) => (lost += leases.length));
      for (let i = 0; i < c.leases; i += c.acquireInFlight) {
        const batch = Array.from({ length: Math.min(c.acquireInFlight, c.leases - i) }, (_, k) =>
          locks!.lock(`n:${tag}:${holder}:${i + k}`).acquireWrite(),
        );
        await Promise.all(batch);
      }
      // The first round after the grants moves each sole holder out of the hash: start after it.
      await sleep(c.leaseMs / 3);
    }
    await setSlowlogThreshold(topology, 1_000);
    const stalls = watchMachineStalls();
    const before = await snapshot(topology);
    const from = performance.now();
    const loop = await getLoop(master!, key, c.durationMs);
    const machine = await stalls.stop(from, performance.now());
    const scripts = delta(before, await snapshot(topology)).scriptCalls;
    const slow = await slowlog(topology, 1_000_000);
    await setSlowlogThreshold(topology, 10_000);
    return {
      holder,
      leases: holder === 'none' ? 0 : c.leases,
      leaseMs: c.leaseMs,
      gets: loop.gets,
      p50Ms: loop.p50,
      p99Ms: loop.p99,
      maxMs: loop.max,
      periods: c.durationMs / (c.leaseMs / 3),
      scriptCalls: scripts,
      slowScripts: slow.filter((s) => /^eval(sha)? /i.test(s.command)).length,
      longestCommandUsec: slow[0]?.usec ?? null,
      longestCommand: slow[0]?.command ?? null,
      lost,
      machineStalls: machine.count,
    };
  } finally {
    await locks?.close();
    redis.disconnect();
  }
}

/** The loop with no lock held, then with this checkout renewing (and the baseline's, with --baseline), side by side. */
export async function measureNeighbour(topology: Topology, config: BenchConfig, tag: string): Promise<NeighbourResult[]> {
  const holders: NeighbourResult['holder'][] = ['none', 'rwlock', ...(baselineLockClient() ? (['rwlock-base'] as const) : [])];
  const out: NeighbourResult[] = [];
  for (const holder of holders) {
    out.push(await measureOne(topology, config, tag, holder));
    await topology.flush();
  }
  return out;
}
