/**
 * (a) Uncontended acquire+release cycles on distinct resources, at 1, 16 and
 * 64 cycles in flight from one process and one connection per library (the
 * `-ap` ones autopipelining), with a new resource name on every cycle and
 * with each loop's name reused: cycles/s, p50/p99 cycle latency, and the
 * commands each cycle costs (script calls counted by the masters, commands
 * counted as the client writes them, MOVED/ASK redirects, the masters' µs).
 */
import type { BenchConfig, NamePattern } from '../config.js';
import { AUTOPIPELINED_LIBS, type LibName, type LockAdapter, makeAdapter, modeOf, UNCONTENDED_LIBS } from '../libs.js';
import { percentile } from '../stats.js';
import { delta, ready, SentCounter, serverCpuSeconds, snapshot, type Topology } from '../topology.js';

export interface CycleResult {
  readonly lib: LibName;
  readonly pattern: NamePattern;
  readonly inFlight: number;
  readonly cycles: number;
  readonly cyclesPerSec: number;
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
  /** EVAL/EVALSHA calls the masters served per cycle. */
  readonly scriptsPerCycle: number;
  /** Commands the client wrote per cycle (every round trip, redirect retries included). */
  readonly sentPerCycle: number;
  /**
   * Socket writes per cycle on the client's connections: round trips, each
   * answered by the server (two at one call in flight; batched writes carry
   * several commands). Null where the bench cannot see the sockets (node-redis).
   */
  readonly writesPerCycle: number | null;
  /** Socket reads (`data` events) per cycle on the client's connections; null as above. */
  readonly readsPerCycle: number | null;
  /**
   * Every command the masters ran per cycle, those a script runs included
   * (INFO commandstats counts them under their own names), by name; the
   * bench's own INFO left out.
   */
  readonly serverCommandsPerCycle: Readonly<Record<string, number>>;
  /** MOVED/ASK/TRYAGAIN replies during the measurement. */
  readonly redirects: number;
  /** µs the masters spent per script call. */
  readonly serverUsecPerScript: number | null;
  /**
   * µs the masters spent per cycle in the commands this library's client sent
   * (INFO commandstats of `serverCommands`; the commands a script runs are in
   * its own µs, and not counted again under their names). Null when the client
   * sent nothing the bench could see (rwlock-node-redis). INFO (a new
   * connection's ready check) is left out: the bench's admin connections
   * send it too.
   */
  readonly serverUsecPerCycle: number | null;
  /** The top-level commands summed into `serverUsecPerCycle`, as Redis names them. */
  readonly serverCommands: readonly string[];
  /** CPU µs this (client) process used per cycle, user + sys. */
  readonly clientCpuUsPerCycle: number;
  /** CPU µs every Redis process (replicas included) used per cycle, user + sys. */
  readonly serverCpuUsPerCycle: number;
  /**
   * Cycles/s of each timed slice, in the order taken: slice k of every
   * library of a run was taken in the same round of the round-robin, so
   * two libraries are compared by the median of their per-slice ratios
   * (`pairedRatio` in results.ts).
   */
  readonly sliceRates: readonly number[];
}

export interface CycleLoopResult {
  cycles: number;
  elapsedMs: number;
  latencies: number[];
}

/** A name never used before in this process, for the `new` pattern. */
let nameSeq = 0;

/**
 * Runs `inFlight` loops of acquire+release, each on its own resource (with
 * `pattern` `new`, a new name under it on every cycle), until `durationMs`
 * has passed or `maxCycles` cycles were done, whichever is first.
 */
export async function cycleLoop(
  adapter: LockAdapter,
  lib: LibName,
  resources: readonly string[],
  durationMs: number,
  maxCycles: number,
  record: boolean,
  pattern: NamePattern = 'reused',
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
        const name = pattern === 'new' ? `${resource}:${nameSeq++}` : resource;
        const held = await adapter.acquire(name, { mode: modeOf(lib) });
        await held.release();
        if (record) latencies.push(performance.now() - t);
      }
    }),
  );
  return { cycles, elapsedMs: performance.now() - start, latencies };
}

/** One library's side of a run at one concurrency: its connection, adapter and running totals. */
interface Contestant {
  readonly lib: LibName;
  readonly pattern: NamePattern;
  readonly redis: ReturnType<Topology['client']>;
  readonly sent: SentCounter;
  readonly adapter: LockAdapter;
  readonly resources: string[];
  cycles: number;
  elapsedMs: number;
  readonly latencies: number[];
  clientCpuUs: number;
  serverCpuS: number;
  scriptCalls: number;
  scriptUsec: number;
  /** µs of the commands the client sent, and their names. */
  commandUsec: number;
  readonly commandNames: Set<string>;
  redirects: number;
  sentCount: number;
  writes: number;
  reads: number;
  readonly serverCommands: Map<string, number>;
  readonly sliceRates: number[];
}

/** The libraries that ran their first warm-up in this process (`firstWarmupMs`). */
const warmedUp = new Set<LibName>();

async function enter(
  topology: Topology,
  config: BenchConfig,
  lib: LibName,
  pattern: NamePattern,
  inFlight: number,
  tag: string,
): Promise<Contestant> {
  const redis = topology.client({ autoPipelining: AUTOPIPELINED_LIBS.includes(lib) });
  const sent = new SentCounter();
  sent.attach(redis);
  await ready(redis);
  const adapter = makeAdapter(lib, redis, config.fastRetryMs);
  const resources = Array.from({ length: inFlight }, (_, i) => `u:${tag}:${lib}:${pattern}:${inFlight}:${i}`);
  adapter.measuring?.(true);
  const warmupMs = warmedUp.has(lib) ? config.uncontended.warmupMs : config.uncontended.firstWarmupMs;
  warmedUp.add(lib);
  await cycleLoop(adapter, lib, resources, warmupMs, config.uncontended.maxCycles, false, pattern);
  adapter.measuring?.(false);
  return {
    lib,
    pattern,
    redis,
    sent,
    adapter,
    resources,
    cycles: 0,
    elapsedMs: 0,
    latencies: [],
    clientCpuUs: 0,
    serverCpuS: 0,
    scriptCalls: 0,
    scriptUsec: 0,
    commandUsec: 0,
    commandNames: new Set(),
    redirects: 0,
    sentCount: 0,
    writes: 0,
    reads: 0,
    serverCommands: new Map(),
    sliceRates: [],
  };
}

/** One timed slice of `c`'s cycles, added to its totals. */
async function slice(topology: Topology, config: BenchConfig, c: Contestant, slices: number): Promise<void> {
  const u = config.uncontended;
  const before = await snapshot(topology);
  const serverCpuBefore = await serverCpuSeconds(topology);
  c.sent.reset();
  const cpuBefore = process.cpuUsage();
  c.adapter.measuring?.(true);
  const run = await cycleLoop(c.adapter, c.lib, c.resources, u.durationMs / slices, Math.ceil(u.maxCycles / slices), true, c.pattern);
  c.adapter.measuring?.(false);
  const cpu = process.cpuUsage(cpuBefore);
  c.serverCpuS += (await serverCpuSeconds(topology)) - serverCpuBefore;
  c.sentCount += c.sent.count;
  c.writes += c.sent.writes;
  c.reads += c.sent.reads;
  const d = delta(before, await snapshot(topology));
  c.cycles += run.cycles;
  c.elapsedMs += run.elapsedMs;
  c.sliceRates.push((run.cycles * 1000) / run.elapsedMs);
  for (const l of run.latencies) c.latencies.push(l);
  c.clientCpuUs += cpu.user + cpu.system;
  c.scriptCalls += d.scriptCalls;
  c.scriptUsec += d.scriptUsec;
  for (const name of c.sent.byName.keys()) {
    // Only what was sent: Redis 7 also counts the commands a script runs under their own names.
    // Not INFO, which the bench's admin connections send to read these very counters.
    const redisName = name.toLowerCase();
    if (redisName === 'info') continue;
    c.commandNames.add(redisName);
    c.commandUsec += d.usec.get(redisName) ?? 0;
  }
  for (const [name, calls] of d.commands) if (name !== 'info') c.serverCommands.set(name, (c.serverCommands.get(name) ?? 0) + calls);
  c.redirects += d.redirects;
}

function result(c: Contestant, inFlight: number): CycleResult {
  return {
    lib: c.lib,
    pattern: c.pattern,
    inFlight,
    cycles: c.cycles,
    cyclesPerSec: (c.cycles * 1000) / c.elapsedMs,
    p50Ms: percentile(c.latencies, 50),
    p99Ms: percentile(c.latencies, 99),
    scriptsPerCycle: c.scriptCalls / c.cycles,
    sentPerCycle: c.sentCount / c.cycles,
    // The sockets of node-redis are not ioredis': no writes seen at all.
    writesPerCycle: c.writes > 0 ? c.writes / c.cycles : null,
    readsPerCycle: c.writes > 0 ? c.reads / c.cycles : null,
    serverCommandsPerCycle: Object.fromEntries([...c.serverCommands].sort().map(([name, calls]) => [name, calls / c.cycles])),
    redirects: c.redirects,
    serverUsecPerScript: c.scriptCalls > 0 ? c.scriptUsec / c.scriptCalls : null,
    serverUsecPerCycle: c.commandNames.size > 0 ? c.commandUsec / c.cycles : null,
    serverCommands: [...c.commandNames].sort(),
    clientCpuUsPerCycle: c.clientCpuUs / c.cycles,
    serverCpuUsPerCycle: (c.serverCpuS * 1e6) / c.cycles,
    sliceRates: c.sliceRates,
  };
}

/**
 * One run: every library at every concurrency. The measurement of each
 * concurrency is cut into slices taken round-robin over the libraries, so
 * every library is measured across the same stretch of wall time and a
 * shared machine's drift hits all alike (one window per library, one after
 * the other, gave per-run ratios that moved by ±30 %); at 1 in flight into
 * more, shorter ones (`slicesAtOne`). Each slice's rate is kept, for the
 * median of per-slice ratios.
 */
export async function uncontendedRun(
  topology: Topology,
  config: BenchConfig,
  tag: string,
  libs: readonly LibName[],
): Promise<CycleResult[]> {
  const out: CycleResult[] = [];
  for (const inFlight of config.uncontended.inFlight) {
    const contestants: Contestant[] = [];
    try {
      for (const pattern of config.uncontended.patterns) {
        for (const lib of libs.filter((l) => UNCONTENDED_LIBS.includes(l)))
          contestants.push(await enter(topology, config, lib, pattern, inFlight, tag));
      }
      // Both name patterns in the same round-robin, so their ratios span the same wall time too.
      const slices = inFlight === 1 ? config.uncontended.slicesAtOne : config.uncontended.slices;
      for (let k = 0; k < slices; k++) for (const c of contestants) await slice(topology, config, c, slices);
      out.push(...contestants.map((c) => result(c, inFlight)));
    } finally {
      for (const c of contestants) {
        await c.adapter.close();
        c.redis.disconnect();
      }
    }
  }
  return out;
}
