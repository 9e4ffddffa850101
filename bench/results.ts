/** The shape of bench/results/*.json, and the per-run ratios. */
import type { BenchConfig } from './config.js';
import { AUTOPIPELINED_LIBS, fencedPeerOf, type LibName, peerOf, UNCONTENDED_LIBS } from './libs.js';
import { median, ratio } from './stats.js';
import type { Target } from './targets.js';
import type { TopologyKind } from './topology.js';
import type { AnatomyRow } from './workloads/anatomy.js';
import type { ContendedResult } from './workloads/contended.js';
import type { MemoryResult } from './workloads/memory.js';
import type { NeighbourResult } from './workloads/neighbour.js';
import type { ReadersResult } from './workloads/readers.js';
import type { ExtendResult, RenewalResult } from './workloads/renewal.js';
import type { ScaleResult } from './workloads/scale.js';
import type { CycleResult } from './workloads/uncontended.js';

export interface Measured<T> {
  /** Every run's records. */
  readonly runs: T[][];
  /** Per record, the median of the runs. */
  readonly median: T[];
}

export interface TopologyResults {
  uncontended?: Measured<CycleResult>;
  contended?: Measured<ContendedResult>;
  readers?: Measured<ReadersResult>;
  scale?: Measured<ScaleResult>;
  renewal?: { rwlock?: RenewalResult; semaphore?: RenewalResult; extend?: ExtendResult };
  /** The GET loop with no lock held, then while leases renew (this checkout, and the baseline's). */
  neighbour?: NeighbourResult[];
  memory?: MemoryResult;
  anatomy?: AnatomyRow[];
  /** Medians of per-run ratios, by name (see `perRunRatios`). */
  ratios: Record<string, number | null>;
  /** How long this topology's workloads took, in seconds. */
  seconds: number;
}

export interface Machine {
  readonly cpu: string;
  readonly cores: number;
  readonly memoryGiB: number;
  readonly os: string;
  readonly node: string;
  /** The server's `redis_version` (Valkey reports the Redis version it is compatible with). */
  readonly redis: string;
  /** The server's name and version, as `Redis 7.0.15` or `Valkey 8.0.1` (absent in results written before it). */
  readonly server?: string;
  readonly ioredis: string;
  readonly loadAverageAtStart: number[];
}

export interface BenchResults {
  readonly date: string;
  readonly command: string;
  readonly machine: Machine;
  readonly config: BenchConfig;
  readonly versions: Record<string, string>;
  readonly topologies: Partial<Record<TopologyKind, TopologyResults>>;
  readonly targets: Target[];
  readonly seconds: number;
}

/**
 * The ratios of one run, named `<workload>.<case>.<lib>/<baseline>` (uncontended:
 * `uncontended.<pattern>.<in flight>.…`, cycles/s; with `.serverUsec` after it,
 * server µs per cycle).
 */
export function perRunRatios(run: {
  uncontended?: CycleResult[];
  contended?: ContendedResult[];
  readers?: ReadersResult[];
  scale?: ScaleResult[];
}): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  if (run.uncontended) {
    const find = (lib: string, pattern: string, n: number) =>
      run.uncontended!.find((m) => m.lib === lib && m.pattern === pattern && m.inFlight === n);
    const at = (lib: string, pattern: string, n: number) => find(lib, pattern, n);
    const rate = (a: CycleResult | undefined, b: CycleResult | undefined) => pairedRatio(a, b);
    for (const pattern of new Set(run.uncontended.map((m) => m.pattern))) {
      for (const n of new Set(run.uncontended.map((m) => m.inFlight))) {
        // Each lock of this checkout against the same lock of the baseline checkout (--baseline).
        for (const [lib, base] of BASELINE_PAIRS)
          out[`uncontended.${pattern}.${n}.${lib}/${base}`] = rate(at(lib, pattern, n), at(base, pattern, n));
        // Every lock against each baseline lock of the same run; an autopipelining one against those that autopipeline too.
        const baselines: readonly LibName[] = ['floor', 'semaphore', 'redlock', 'floor-ap', 'semaphore-ap'];
        for (const lib of UNCONTENDED_LIBS.filter((l) => !baselines.includes(l))) {
          const floor = peerOf(lib, 'floor');
          for (const base of [floor, peerOf(lib, 'semaphore'), ...(AUTOPIPELINED_LIBS.includes(lib) ? [] : ['redlock'])]) {
            out[`uncontended.${pattern}.${n}.${lib}/${base}`] = rate(at(lib, pattern, n), at(base, pattern, n));
          }
          // Client CPU per cycle against the floor's: what the library's own work costs the application's process.
          out[`uncontended.${pattern}.${n}.${lib}/${floor}.clientCpu`] = ratio(
            find(lib, pattern, n)?.clientCpuUsPerCycle,
            find(floor, pattern, n)?.clientCpuUsPerCycle,
          );
          // Server µs per cycle against the floor's: how much more of a server's time a cycle takes.
          out[`uncontended.${pattern}.${n}.${lib}/${floor}.serverUsec`] = ratio(
            find(lib, pattern, n)?.serverUsecPerCycle,
            find(floor, pattern, n)?.serverUsecPerCycle,
          );
          // The same against the fenced floor, the cheapest lock with the library's guarantees.
          const fenced = fencedPeerOf(lib);
          if (fenced !== lib) {
            out[`uncontended.${pattern}.${n}.${lib}/${fenced}`] = rate(at(lib, pattern, n), at(fenced, pattern, n));
            out[`uncontended.${pattern}.${n}.${lib}/${fenced}.serverUsec`] = ratio(
              find(lib, pattern, n)?.serverUsecPerCycle,
              find(fenced, pattern, n)?.serverUsecPerCycle,
            );
          }
        }
      }
    }
  }
  if (run.contended) {
    const get = (lib: string, variant: string) => run.contended!.find((m) => m.lib === lib && m.variant === variant);
    for (const base of ['floor', 'floor-spin', 'floor-immediate', 'semaphore', 'semaphore-fast', 'redlock', 'redlock-fast']) {
      out[`baton.rwlock-write/${base}`] = ratio(get('rwlock-write', 'baton')?.handoffsPerSec, get(base, 'baton')?.handoffsPerSec);
      out[`race.rwlock-write/${base}`] = ratio(get('rwlock-write', 'race')?.grantsPerSec, get(base, 'race')?.grantsPerSec);
      out[`race.rwlock-fair/${base}`] = ratio(get('rwlock-fair', 'race')?.grantsPerSec, get(base, 'race')?.grantsPerSec);
    }
    // Against the faster of the two floors that poll with no sleep, in this run.
    const polling = ['floor-spin', 'floor-immediate'].map((lib) => get(lib, 'baton')?.handoffsPerSec).filter((v) => v !== undefined);
    for (const lib of ['rwlock-write', 'rwlock-node-redis']) {
      out[`baton.${lib}/floor-polling`] = ratio(get(lib, 'baton')?.handoffsPerSec, polling.length > 0 ? Math.max(...polling) : undefined);
    }
    // redlock mode on three servers against the hash mode on one.
    out['baton.rwlock-redlock/rwlock-write'] = ratio(
      get('rwlock-redlock', 'baton')?.handoffsPerSec,
      get('rwlock-write', 'baton')?.handoffsPerSec,
    );
    for (const m of run.contended.filter((x) => x.variant === 'race')) {
      // The longest wait in cycle times: how many grants' worth of time the unluckiest waiter waited.
      out[`race.${m.lib}.longestWaitCycles`] =
        m.longestWaitMs === null || m.grantsPerSec === 0 ? null : m.longestWaitMs / (1000 / m.grantsPerSec);
    }
  }
  if (run.readers) {
    const w = run.readers.find((m) => m.withWriter);
    const n = run.readers.find((m) => !m.withWriter);
    out['readers.withWriter/withoutWriter'] = ratio(w?.readsPerSec, n?.readsPerSec);
  }
  if (run.scale) {
    const counts = run.scale.map((m) => m.liveReaders);
    const base = run.scale.find((m) => m.liveReaders === Math.min(...counts));
    for (const m of run.scale) out[`scale.${m.liveReaders}/${base?.liveReaders}`] = ratio(m.cyclesPerSec, base?.cyclesPerSec);
  }
  return out;
}

/** Each lock of this checkout and the same lock of the baseline checkout, compared in (a). */
const BASELINE_PAIRS: readonly (readonly [LibName, LibName])[] = [
  ['rwlock-write', 'rwlock-base'],
  ['rwlock-write-ap', 'rwlock-base-ap'],
  ['rwlock-read', 'rwlock-base-read'],
  ['rwlock-read-ap', 'rwlock-base-read-ap'],
  ['rwlock-node-redis', 'rwlock-base-node-redis'],
  ['rwlock-node-redis-read', 'rwlock-base-node-redis-read'],
];

/**
 * Cycles/s of `a` against `b` in one run: the median of their per-slice
 * ratios (slice k of each was taken in the same round of the round-robin,
 * seconds apart at most), which a loaded spell in one slice moves little;
 * the ratio of the totals when the slices do not pair up (a results file
 * written before slices were kept).
 */
export function pairedRatio(a: CycleResult | undefined, b: CycleResult | undefined): number | null {
  const x = a?.sliceRates;
  const y = b?.sliceRates;
  if (!x || !y || x.length === 0 || x.length !== y.length) return ratio(a?.cyclesPerSec, b?.cyclesPerSec);
  return median(x.map((v, i) => v / y[i]!));
}

/** Median of each named ratio over the runs. */
export function medianRatios(runs: Record<string, number | null>[]): Record<string, number | null> {
  const names = new Set(runs.flatMap((r) => Object.keys(r)));
  const out: Record<string, number | null> = {};
  for (const name of names) out[name] = median(runs.map((r) => r[name]));
  return out;
}
