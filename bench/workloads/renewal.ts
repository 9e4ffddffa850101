/**
 * (e) Renewal: `leases` auto-renewed leases held by one process, each on its
 * own resource, for `periods` renewal periods (lease/3). Reports the script
 * calls and commands the masters served per period (per master, and the
 * commands the scripts ran inside them), the commands the client wrote, and
 * the longest SLOWLOG entry (how long one batched renewal blocks a server).
 *
 * Beside it, redis-semaphore `Mutex`es with the same lock timeout and refresh
 * interval, each refreshed on its own; and explicit `lease.extend()` calls,
 * counted to check one script call per extend.
 */
import type { Redis } from 'ioredis';
import { Mutex } from 'redis-semaphore';
import { type Lease, LockClient } from '../../src/index.js';
import type { BenchConfig } from '../config.js';
import { median, sleep } from '../stats.js';
import { delta, ready, SentCounter, setSlowlogThreshold, slowlog, snapshot, type Topology } from '../topology.js';

export interface RenewalResult {
  readonly lib: 'rwlock' | 'semaphore';
  readonly leases: number;
  readonly periodMs: number;
  readonly periods: number;
  /** Script calls per renewal period, all masters together. */
  readonly scriptCallsPerPeriod: number;
  /** Script calls per renewal period on the busiest master. */
  readonly scriptCallsPerPeriodPerMasterMax: number;
  /** Commands the client wrote per period. */
  readonly sentPerPeriod: number;
  /** Commands the masters ran per period, those run inside scripts included (INFO commandstats). */
  readonly serverCommandsPerPeriod: number;
  /** The longest single command (µs) during the window, by SLOWLOG. */
  readonly longestCommandUsec: number | null;
  readonly longestCommand: string | null;
  /** Leases lost during the window: must be 0. */
  readonly lost: number;
}

export interface ExtendResult {
  readonly extends: number;
  readonly scriptsPerExtend: number;
  readonly sentPerExtend: number;
  readonly redirects: number;
}

async function holdMany<T>(count: number, inFlight: number, take: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < count; i += inFlight) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(inFlight, count - i) }, (_, k) => take(i + k)))));
  }
  return out;
}

async function observe(
  topology: Topology,
  sent: SentCounter,
  periodMs: number,
  periods: number,
): Promise<Omit<RenewalResult, 'lib' | 'leases' | 'lost'>> {
  // Start the window half a period after a renewal round, so it holds exactly `periods` rounds.
  sent.reset();
  const giveUpAt = performance.now() + 2 * periodMs;
  while (sent.count === 0 && performance.now() < giveUpAt) await sleep(2);
  await sleep(periodMs / 2);
  await setSlowlogThreshold(topology, 1_000);
  // One snapshot per period: each figure is the median over the periods.
  const perPeriod: { scripts: number; scriptsMax: number; sent: number; server: number }[] = [];
  let before = await snapshot(topology);
  sent.reset();
  let next = performance.now() + periodMs;
  for (let p = 0; p < periods; p++) {
    await sleep(Math.max(0, next - performance.now()));
    next += periodMs;
    const sentCount = sent.count;
    sent.reset();
    const after = await snapshot(topology);
    const d = delta(before, after);
    before = after;
    let server = 0;
    for (const [name, calls] of d.commands) if (!/^(info|config|slowlog)/.test(name)) server += calls;
    perPeriod.push({ scripts: d.scriptCalls, scriptsMax: Math.max(...d.scriptCallsPerMaster), sent: sentCount, server });
  }
  const slow = await slowlog(topology, 1);
  await setSlowlogThreshold(topology, 10_000);
  return {
    periodMs,
    periods,
    scriptCallsPerPeriod: median(perPeriod.map((p) => p.scripts))!,
    scriptCallsPerPeriodPerMasterMax: median(perPeriod.map((p) => p.scriptsMax))!,
    sentPerPeriod: median(perPeriod.map((p) => p.sent))!,
    serverCommandsPerPeriod: median(perPeriod.map((p) => p.server))!,
    longestCommandUsec: slow[0]?.usec ?? null,
    longestCommand: slow[0]?.command ?? null,
  };
}

export async function measureRwlockRenewal(topology: Topology, config: BenchConfig, tag: string): Promise<RenewalResult> {
  const c = config.renewal;
  const redis = topology.client();
  const sent = new SentCounter();
  sent.attach(redis);
  await ready(redis);
  const locks = new LockClient(redis, { leaseMs: c.leaseMs });
  let lost = 0;
  locks.on('lost', (_error, leases) => (lost += leases.length));
  try {
    await holdMany(c.leases, c.acquireInFlight, (i) => locks.lock(`e:${tag}:${i}`).acquireWrite());
    const observed = await observe(topology, sent, Math.floor(c.leaseMs / 3), c.periods);
    return { lib: 'rwlock', leases: c.leases, ...observed, lost };
  } finally {
    await locks.close();
    redis.disconnect();
  }
}

export async function measureSemaphoreRenewal(topology: Topology, config: BenchConfig, tag: string): Promise<RenewalResult> {
  const c = config.renewal;
  const redis = topology.client();
  const sent = new SentCounter();
  sent.attach(redis);
  await ready(redis);
  const periodMs = Math.floor(c.leaseMs / 3);
  let lost = 0;
  const mutexes = await holdMany(c.leases, c.acquireInFlight, async (i) => {
    const m = new Mutex(redis as Redis, `semaphore:e:${tag}:${i}`, {
      lockTimeout: c.leaseMs,
      refreshInterval: periodMs,
      onLockLost: () => void lost++,
    });
    await m.acquire();
    return m;
  });
  try {
    const observed = await observe(topology, sent, periodMs, c.periods);
    return { lib: 'semaphore', leases: c.leases, ...observed, lost };
  } finally {
    await holdMany(mutexes.length, c.acquireInFlight, (i) => mutexes[i]!.release());
    redis.disconnect();
  }
}

export async function measureExtend(topology: Topology, config: BenchConfig, tag: string): Promise<ExtendResult> {
  const redis = topology.client();
  const sent = new SentCounter();
  sent.attach(redis);
  await ready(redis);
  const locks = new LockClient(redis);
  try {
    const leases: Lease[] = [
      await locks.lock(`x:${tag}:w`).acquireWrite({ leaseMs: 60_000 }),
      await locks.lock(`x:${tag}:r`).acquireRead({ leaseMs: 60_000 }),
    ];
    for (const lease of leases) await lease.extend(); // warm-up
    const before = await snapshot(topology);
    sent.reset();
    const n = config.renewal.extends;
    for (let i = 0; i < n; i++) await leases[i % leases.length]!.extend();
    const d = delta(before, await snapshot(topology));
    return { extends: n, scriptsPerExtend: d.scriptCalls / n, sentPerExtend: sent.count / n, redirects: d.redirects };
  } finally {
    await locks.close();
    redis.disconnect();
  }
}
