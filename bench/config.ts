/**
 * Every count and duration of the benchmark, in one place. `full` is what
 * `npm run bench` runs (about 30 minutes on 2 cores, both topologies);
 * `smoke` is what CI runs (`npm run bench:smoke`): the same code paths with
 * tiny counts, one server, under a minute.
 */
/** How an uncontended loop names its resources; see {@link BenchConfig.uncontended}. */
export type NamePattern = 'new' | 'reused';

export interface BenchConfig {
  readonly name: 'full' | 'smoke';
  /** Each workload is measured this many times; every figure is the median of the runs. */
  readonly runs: number;
  /** Topologies measured, in order. */
  readonly topologies: readonly ('standalone' | 'cluster')[];

  /** (a) uncontended acquire+release cycles on distinct resources. */
  readonly uncontended: {
    /**
     * Resource names: `new`, a name never used before on every cycle (how
     * entity locks such as `profile:{id}` are used: the headline), or
     * `reused`, each loop taking its own name again and again.
     */
    readonly patterns: readonly NamePattern[];
    readonly inFlight: readonly number[];
    /** Untimed cycles before each measurement (JIT, script cache, slot map). */
    readonly warmupMs: number;
    /**
     * The warm-up instead, the first time a library runs in the process:
     * until V8's optimizing tier has compiled its code, a library measures
     * slower than it runs in a long-lived service. With 250 ms for every
     * first time, redis-rwlock's write lock at 16 in flight on new names
     * measured 0.90-0.91x the floor, with 2.5 s 0.96-1.02x (the floor's own
     * first warm-up as long; two runs each, AMD EPYC).
     */
    readonly firstWarmupMs: number;
    /** Timed ms per library and concurrency, in `slices` slices taken round-robin over the libraries. */
    readonly durationMs: number;
    readonly slices: number;
    /**
     * At 1 in flight, the same duration in this many shorter slices: a cycle
     * there is two round trips whose wake-ups any other process on the
     * machine delays, so a slice of 250 ms can catch a loaded spell of its
     * own, and one run's ratio move by 0.7-1.1x; short slices paired with
     * the other libraries' keep it steady.
     */
    readonly slicesAtOne: number;
    /** Upper bound of cycles per measurement, whatever the duration. */
    readonly maxCycles: number;
  };

  /** (b) contended handoff of one write lock among waiters on separate connections. */
  readonly contended: {
    readonly waiters: number;
    /** How long a holder keeps the lock. */
    readonly holdMs: number;
    readonly warmupMs: number;
    readonly durationMs: number;
    readonly maxGrants: number;
    /** After the measurement, how long waiters may take to leave; a lock that takes longer is reported. */
    readonly drainMs: number;
  };

  /** (c) many readers on one resource, one writer taking it periodically. */
  readonly readers: {
    readonly readers: number;
    /** Connections (one LockClient each) the readers are spread over. */
    readonly readerConnections: number;
    readonly writerEveryMs: number;
    readonly writerHoldMs: number;
    readonly warmupMs: number;
    readonly durationMs: number;
    readonly maxCycles: number;
  };

  /** (d) read cycles on a resource that already has this many live readers. */
  readonly scale: {
    readonly liveReaders: readonly number[];
    readonly inFlight: number;
    readonly warmupMs: number;
    readonly durationMs: number;
    readonly maxCycles: number;
  };

  /** (e) renewal cost of many held auto-renewed leases. */
  readonly renewal: {
    readonly leases: number;
    /** Lease length of the held leases: they renew every third of it. */
    readonly leaseMs: number;
    /** Renewal periods observed. */
    readonly periods: number;
    /** Explicit `lease.extend()` calls counted for the one-script-per-extend check. */
    readonly extends: number;
    /** In flight while the leases are taken. */
    readonly acquireInFlight: number;
  };

  /** (g) a neighbour's GET loop while leases renew, and with none held. */
  readonly neighbour: {
    readonly leases: number;
    /** Lease length of the held leases: they renew every third of it. */
    readonly leaseMs: number;
    /** How long each GET loop runs. */
    readonly durationMs: number;
    /** In flight while the leases are taken. */
    readonly acquireInFlight: number;
  };

  /** Server µs per call of the floor's commands, the library's scripts and reference scripts. */
  readonly anatomy: {
    readonly calls: number;
  };

  /** (f) memory of a held lock. */
  readonly memory: {
    readonly readers: number;
  };

  /** Retry interval of the floor's polling waiters, and of the peers' "fast" settings (Node's timers do not go below 1 ms). */
  readonly fastRetryMs: number;
}

export const FULL: BenchConfig = {
  name: 'full',
  runs: 3,
  topologies: ['standalone', 'cluster'],
  uncontended: {
    patterns: ['new', 'reused'],
    inFlight: [1, 16, 64],
    warmupMs: 250,
    firstWarmupMs: 2_500,
    durationMs: 1_500,
    slices: 6,
    slicesAtOne: 30,
    maxCycles: 250_000,
  },
  contended: { waiters: 8, holdMs: 1, warmupMs: 300, durationMs: 2_500, maxGrants: 100_000, drainMs: 15_000 },
  readers: { readers: 64, readerConnections: 4, writerEveryMs: 50, writerHoldMs: 1, warmupMs: 300, durationMs: 2_500, maxCycles: 500_000 },
  scale: { liveReaders: [1, 100, 1_000], inFlight: 16, warmupMs: 250, durationMs: 1_200, maxCycles: 200_000 },
  // 100,000 leases take ~1.5 s of server time a round: a 15 s lease renews every 5 s.
  renewal: { leases: 100_000, leaseMs: 15_000, periods: 2, extends: 200, acquireInFlight: 64 },
  neighbour: { leases: 10_000, leaseMs: 3_000, durationMs: 3_000, acquireInFlight: 64 },
  memory: { readers: 100 },
  anatomy: { calls: 20_000 },
  fastRetryMs: 1,
};

export const SMOKE: BenchConfig = {
  name: 'smoke',
  runs: 1,
  topologies: ['standalone'],
  uncontended: {
    patterns: ['new', 'reused'],
    inFlight: [1, 16, 64],
    warmupMs: 20,
    firstWarmupMs: 20,
    durationMs: 60,
    slices: 2,
    slicesAtOne: 3,
    maxCycles: 2_000,
  },
  contended: { waiters: 8, holdMs: 1, warmupMs: 20, durationMs: 150, maxGrants: 2_000, drainMs: 5_000 },
  readers: { readers: 64, readerConnections: 4, writerEveryMs: 50, writerHoldMs: 1, warmupMs: 20, durationMs: 200, maxCycles: 5_000 },
  scale: { liveReaders: [1, 100, 1_000], inFlight: 16, warmupMs: 20, durationMs: 60, maxCycles: 2_000 },
  renewal: { leases: 200, leaseMs: 300, periods: 2, extends: 10, acquireInFlight: 64 },
  neighbour: { leases: 200, leaseMs: 300, durationMs: 300, acquireInFlight: 64 },
  memory: { readers: 100 },
  anatomy: { calls: 300 },
  fastRetryMs: 1,
};
