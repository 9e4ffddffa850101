/**
 * (b) Contended handoff: `waiters` loops, each on its own connection (and its
 * own LockClient / Redlock / Mutex), compete for one write lock; each holder
 * keeps it `holdMs`, the same for every library (`holdFor`, not a timer).
 *
 * - baton: a holder queues again only after another waiter was granted the
 *   lock, so every grant is a real handoff. Reports handoffs/s and the delay
 *   from the release's reply (at the releaser) to the next grant (at the next
 *   holder), p50/p99; both moments are taken in this one process, on one clock.
 * - race: a holder queues again at once. Reports grants/s, the share of
 *   grants that went to the previous holder, and the longest wait of any
 *   waiter (waits still unfinished when the measurement ends count too), in
 *   time and in grants to other waiters during it.
 *
 * Every grant is also checked for exclusion: a grant while another loop
 * holds the lock is counted as a violation.
 */
import { setMaxListeners } from 'node:events';
import type { RedisClient } from '../../src/redis.js';
import type { BenchConfig } from '../config.js';
import { type Held, type LibName, type LockAdapter, makeAdapter, REDLOCK_LIBS } from '../libs.js';
import { type MachineStalls, watchMachineStalls } from '../machine-stalls.js';
import { holdFor, max, percentile, sleep } from '../stats.js';
import { ready, SentCounter, type Topology } from '../topology.js';

export type ContendedVariant = 'baton' | 'race';

export interface ContendedResult {
  readonly lib: LibName;
  readonly variant: ContendedVariant;
  /** Grants inside the measured window. */
  readonly grants: number;
  readonly grantsPerSec: number;
  /** Grants to a different waiter than the previous one, per second. */
  readonly handoffsPerSec: number;
  /** From a release's reply to the next grant to another waiter. */
  readonly handoffP50Ms: number | null;
  readonly handoffP99Ms: number | null;
  /** Share of grants that went to the loop that held the lock just before. */
  readonly previousHolderShare: number | null;
  readonly waitP50Ms: number | null;
  readonly waitP99Ms: number | null;
  /** The longest any waiter waited (or was still waiting at the end). */
  readonly longestWaitMs: number | null;
  /**
   * The most grants to other waiters during one wait (unfinished waits count):
   * with n waiters taking strict turns, n - 1. More means a waiter was passed
   * over; a long wait with no more than n - 1 came from slow turns, not order.
   */
  readonly mostGrantsDuringAWait: number | null;
  /** Moments over 4 ms in the window when the machine ran nothing of ours (see machine-stalls.ts), and the longest. */
  readonly machineStalls: number;
  readonly longestMachineStallMs: number | null;
  /** Acquires that gave up (the library's own wait limit) and were retried. */
  readonly gaveUp: number;
  /** Commands written to Redis per grant (polling shows here). */
  readonly commandsPerGrant: number | null;
  /** Grants made while another loop held the lock: must be 0. */
  readonly violations: number;
  /** How long the waiters took to leave after the window closed. */
  readonly drainMs: number;
  /** Median time a holder actually kept the lock (a 1 ms timer fires after 1 ms or more). */
  readonly holdActualMs: number | null;
  /** Median release round trip. */
  readonly releaseMs: number | null;
  /**
   * Grants/s if every handoff took no time at all: 1 s / (hold + release).
   * No library can hand the lock over faster than this.
   */
  readonly ceilingPerSec: number | null;
}

interface Grant {
  readonly who: number;
  readonly at: number;
  readonly waitedMs: number;
}

export async function measureContended(
  topology: Topology,
  config: BenchConfig,
  lib: LibName,
  variant: ContendedVariant,
  tag: string,
): Promise<ContendedResult> {
  const c = config.contended;
  const resource = `c:${tag}:${lib}:${variant}`;
  const sent = new SentCounter();
  // Each waiter's connection, or in redlock mode its connection to each server.
  const connections: (RedisClient | RedisClient[])[] = [];
  for (let i = 0; i < c.waiters; i++) {
    const redlock = REDLOCK_LIBS.includes(lib);
    const nodes = redlock ? topology.redlockNodes() : undefined;
    if (redlock && !nodes) throw new Error(`${lib} needs independent servers (standalone topology)`);
    connections.push(nodes ?? topology.client());
  }
  const clients = connections.flat();
  for (const redis of clients) sent.attach(redis);
  await Promise.all(clients.map(ready));
  const adapters: LockAdapter[] = connections.map((redis) => makeAdapter(lib, redis, config.fastRetryMs));

  const grants: Grant[] = [];
  const releaseReplyAt: number[] = [];
  const wantingSince = new Array<number | null>(c.waiters).fill(null);
  let holder: number | null = null;
  let violations = 0;
  let gaveUp = 0;
  let stopped = false;
  const abort = new AbortController();
  setMaxListeners(0, abort.signal); // every waiter listens to it
  const holds: number[] = [];
  const releases: number[] = [];
  let grantWaiters: (() => void)[] = [];
  const onGrantOrStop = () => {
    const w = grantWaiters;
    grantWaiters = [];
    for (const resolve of w) resolve();
  };

  const start = performance.now();
  const windowStart = start + c.warmupMs;
  const windowEnd = windowStart + c.durationMs;
  let sentAtStart = 0;
  let sentAtEnd = 0;
  const startTimer = setTimeout(() => (sentAtStart = sent.count), c.warmupMs);
  let unfinishedAtEnd: number[] = [];
  let unfinishedSince: number[] = [];
  const stopTimer = setTimeout(() => {
    sentAtEnd = sent.count;
    const now = performance.now();
    unfinishedSince = wantingSince.filter((t): t is number => t !== null);
    unfinishedAtEnd = unfinishedSince.map((t) => now - t);
    stopped = true;
    abort.abort();
    onGrantOrStop();
  }, windowEnd - start);

  const loop = async (me: number, adapter: LockAdapter) => {
    while (!stopped && grants.length < c.maxGrants) {
      const wantAt = performance.now();
      wantingSince[me] = wantAt;
      let held: Held | undefined;
      while (!held) {
        try {
          held = await adapter.acquire(resource, { mode: 'write', signal: abort.signal });
        } catch (error) {
          if (stopped) break;
          gaveUp++;
          if (gaveUp > 10_000) throw error;
        }
      }
      wantingSince[me] = null;
      if (!held) return;
      const at = performance.now();
      if (holder !== null) violations++;
      holder = me;
      const g = grants.push({ who: me, at, waitedMs: at - wantAt }) - 1;
      onGrantOrStop();
      if (!stopped) await holdFor(c.holdMs);
      holder = null;
      const releaseAt = performance.now();
      await held.release();
      releaseReplyAt[g] = performance.now();
      if (at >= windowStart && at <= windowEnd) {
        holds.push(releaseAt - at);
        releases.push(releaseReplyAt[g]! - releaseAt);
      }
      if (variant === 'baton') {
        while (!stopped && grants.length <= g + 1) {
          await new Promise<void>((resolve) => grantWaiters.push(resolve));
        }
      }
    }
  };

  const stalls = watchMachineStalls();
  let machine: MachineStalls | undefined;
  const loops = adapters.map((adapter, i) => loop(i, adapter));
  let drainMs = 0;
  try {
    const all = Promise.allSettled(loops);
    await sleep(windowEnd - start);
    const drainStart = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      all.then(() => true),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(false), c.drainMs))),
    ]);
    clearTimeout(timer);
    drainMs = performance.now() - drainStart;
    if (!drained) console.warn(`  ${lib} ${variant}: waiters did not leave within ${c.drainMs} ms; disconnecting them`);
  } finally {
    clearTimeout(startTimer);
    clearTimeout(stopTimer);
    stopped = true;
    abort.abort();
    onGrantOrStop();
    await Promise.race([Promise.allSettled(adapters.map((a) => a.close())), sleep(2_000)]);
    for (const redis of clients) redis.disconnect();
    machine = await stalls.stop(windowStart, windowEnd);
  }

  const inWindow: number[] = [];
  grants.forEach((g, i) => {
    if (g.at >= windowStart && g.at <= windowEnd) inWindow.push(i);
  });
  const handoffs: number[] = [];
  let handoffCount = 0;
  let sameHolder = 0;
  const waits: number[] = [];
  for (const i of inWindow) {
    const g = grants[i]!;
    waits.push(g.waitedMs);
    if (i === 0) continue;
    const prev = grants[i - 1]!;
    if (prev.who === g.who) {
      sameHolder++;
      continue;
    }
    handoffCount++;
    const released = releaseReplyAt[i - 1];
    if (released !== undefined) handoffs.push(Math.max(0, g.at - released));
  }
  // Grants are pushed in time order: those during a wait lie between its start and its own grant.
  const grantsSince = (t: number, before: number) => {
    let lo = 0;
    let hi = before;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (grants[mid]!.at > t) hi = mid;
      else lo = mid + 1;
    }
    return before - lo;
  };
  const grantsDuringWaits = [
    ...inWindow.map((i) => grantsSince(grants[i]!.at - grants[i]!.waitedMs, i)),
    ...unfinishedSince.map((t) => grantsSince(t, grants.length)),
  ];
  const seconds = c.durationMs / 1000;
  const allWaits = [...waits, ...unfinishedAtEnd];
  return {
    lib,
    variant,
    grants: inWindow.length,
    grantsPerSec: inWindow.length / seconds,
    handoffsPerSec: handoffCount / seconds,
    handoffP50Ms: percentile(handoffs, 50),
    handoffP99Ms: percentile(handoffs, 99),
    previousHolderShare: inWindow.length > 0 ? sameHolder / inWindow.length : null,
    waitP50Ms: percentile(waits, 50),
    waitP99Ms: percentile(waits, 99),
    longestWaitMs: max(allWaits),
    mostGrantsDuringAWait: max(grantsDuringWaits),
    machineStalls: machine.count,
    longestMachineStallMs: machine.longestMs,
    gaveUp,
    // Counted at ioredis' sendCommand: a library on node-redis sends nothing there.
    commandsPerGrant: inWindow.length > 0 && lib !== 'rwlock-node-redis' ? (sentAtEnd - sentAtStart) / inWindow.length : null,
    violations,
    drainMs,
    holdActualMs: percentile(holds, 50),
    releaseMs: percentile(releases, 50),
    ceilingPerSec: holds.length > 0 ? 1000 / (percentile(holds, 50)! + percentile(releases, 50)!) : null,
  };
}
