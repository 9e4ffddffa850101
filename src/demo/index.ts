/**
 * `redis-rwlock demo`: the cache-rebuild scenario, live.
 *
 * The coordinating process starts (or connects to) Redis, seeds the cached
 * values, forks the worker processes, shows their counters as they go, stops
 * them when the time is up (or on Ctrl-C), checks that no lock is left
 * behind, stops the servers it started and prints a summary.
 *
 * A worker is the same entry point run again (`process.argv[1]`, with the same
 * arguments and Node options, as `node:cluster` does) with its configuration
 * in an environment variable, so the demo works the same from `npm run demo`
 * (TypeScript through tsx), from the built files and from the CLI.
 *
 * @module
 */
import { type ChildProcess, execFile, fork } from 'node:child_process';
import { once } from 'node:events';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
import { UsageError } from '../cli/command.js';
import { LockClient, type LockStats, WAIT_BUCKETS_MS } from '../index.js';
import { type RedisClusterHandle, startRedisCluster } from '../testing/index.js';
import { DEMO_SYNOPSIS, DEMO_USAGE, type DemoOptions, parseDemoArgs } from './args.js';
import { cachedValueNames, checkValue, rebuildValue } from './cache-value.js';
import { count, ms, ProgressView, secs } from './progress.js';
import { emptyStats, mergeStats, type Target, WORKER_ENV, type WorkerConfig, type WorkerMessage, type WorkerStats } from './protocol.js';
import { connect, runWorker } from './worker.js';

export { DEMO_HELP, DEMO_OWN_OPTIONS, DEMO_SUMMARY, DEMO_SYNOPSIS, DEMO_USAGE, demoOptions } from './args.js';

/** The lock prefix of the demo's locks, so that they never mix with an application's. */
export const DEMO_PREFIX = 'rwlock-demo';

/** The demo's workload knobs that are not on the command line. */
const PACE = { stepMs: 3, readPauseMs: 8, rebuildPauseMs: 250 } as const;
/** How long workers get to start, and to finish and release after `stop`. */
const WORKER_START_TIMEOUT_MS = 60_000;
const WORKER_STOP_TIMEOUT_MS = 20_000;
/** How long the first contact with the user's Redis may take. */
const CONNECT_TIMEOUT_MS = 10_000;

/** What the demo reports at the end (also its `--json` output). */
export interface DemoSummary {
  /** True when nothing went wrong: no half-built read, no error, no lock left behind. */
  readonly ok: boolean;
  /** The process exit code: 0 ok, 1 a check failed, 2 bad usage, 128 + the signal's number when stopped by SIGINT (130) or SIGTERM (143). */
  readonly exitCode: number;
  /** True when a signal stopped the demo before its time was up. */
  readonly interrupted: boolean;
  /** The signal that stopped it early, if one did. */
  readonly stoppedBy: string | null;
  readonly redis: string;
  readonly durationMs: number;
  readonly elapsedMs: number;
  readonly processes: number;
  readonly readersPerProcess: number;
  readonly writersPerProcess: number;
  readonly values: number;
  readonly parts: number;
  readonly withoutLocks: boolean;
  readonly reads: number;
  readonly rebuilds: number;
  readonly halfBuilt: number;
  readonly readerWaits: number;
  readonly writerWaits: number;
  readonly maxReaderWaitMs: number;
  readonly maxWriterWaitMs: number;
  readonly errors: number;
  /** Workers that did not report back (crashed, or killed after the stop timeout). */
  readonly lostWorkers: number;
  /** Lock keys (state, leases, queue) still in Redis after every worker stopped. */
  readonly locksLeft: number;
  /** Cached values found whole after the run. */
  readonly valuesWhole: number;
  readonly notes: readonly string[];
  /** The workers' `LockClient.stats()` at their end, summed (null when none reported). */
  readonly lockStats: LockStats | null;
}

/**
 * Runs the demo on its own (`npm run demo`) with the given arguments and
 * resolves to the exit code; in a worker process (see the module comment),
 * runs the worker.
 */
export async function runDemo(argv: readonly string[]): Promise<number> {
  if (process.env[WORKER_ENV] !== undefined) return runDemoWith(undefined);
  let options: DemoOptions;
  try {
    options = await parseDemoArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`redis-rwlock demo: ${error.message}\nUsage: ${DEMO_SYNOPSIS}\nRun "redis-rwlock demo --help" for the options.\n`);
    return 2;
  }
  if (options.help) {
    process.stdout.write(DEMO_USAGE);
    return 0;
  }
  return runDemoWith(options);
}

/**
 * Runs the demo with `options` (the CLI parses them itself) and resolves to
 * the exit code; in a worker process, runs the worker instead.
 */
export async function runDemoWith(options: DemoOptions | undefined): Promise<number> {
  const workerConfig = process.env[WORKER_ENV];
  if (workerConfig !== undefined) {
    await runWorker(JSON.parse(workerConfig) as WorkerConfig);
    return 0;
  }
  if (options === undefined) throw new Error('runDemoWith: no options outside a worker process');
  return new Demo(options).run();
}

class Demo {
  readonly #o: DemoOptions;
  readonly #out: NodeJS.WriteStream;
  readonly #view: ProgressView;
  /** Aborted on the first SIGINT/SIGTERM. */
  readonly #interrupt = new AbortController();
  #forced = false;
  #force!: () => void;
  /** Resolves on the second SIGINT/SIGTERM: stop waiting for anything, kill the workers, stop the servers. */
  readonly #forcedStop = new Promise<void>((resolve) => (this.#force = resolve));
  readonly #workers: { child: ChildProcess; stats: WorkerStats; ready: boolean; done: boolean }[] = [];
  #cluster: RedisClusterHandle | undefined;
  #redis: Redis | Cluster | undefined;
  #locks: LockClient | undefined;
  readonly #notes: string[] = [];

  constructor(options: DemoOptions) {
    this.#o = options;
    this.#out = options.json ? process.stderr : process.stdout;
    this.#view = new ProgressView(this.#out);
  }

  async run(): Promise<number> {
    const onSignal = (signal: NodeJS.Signals): void => this.#onSignal(signal);
    // Installed before any server starts: this process stops its servers
    // itself, after its workers have released their locks.
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    let summary: DemoSummary | undefined;
    try {
      summary = await Promise.race([this.#run(), this.#forcedStop.then(() => undefined)]);
    } catch (error) {
      this.#view.clear();
      process.stderr.write(`redis-rwlock demo: ${error instanceof Error ? error.message : String(error)}\n`);
    } finally {
      await this.#teardown();
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
    if (!summary) return this.#interrupt.signal.aborted ? this.#signalExitCode() : 1; // forced, or failed before the summary
    if (this.#o.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
    this.#printSummary(summary);
    return summary.exitCode;
  }

  async #run(): Promise<DemoSummary | undefined> {
    const o = this.#o;
    const say = (text: string): void => this.#view.message(text);
    say(this.#view.paint('redis-rwlock demo: cache rebuild under read-write locks', 'bold'));

    let target: Target;
    let where: string;
    if (o.target) {
      target = o.target;
      where = describeTarget(target);
      say(`  Redis     ${where}`);
    } else {
      await checkRedisServerBinary();
      say('  Redis     starting an embedded Redis Cluster (3 masters, 3 replicas) on 127.0.0.1 ...');
      const startedAt = performance.now();
      this.#cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
      const ports = this.#cluster.nodes.map((n) => n.port);
      where = `embedded Redis Cluster, 3 masters + 3 replicas on 127.0.0.1 ports ${ports.join(', ')}`;
      target = { kind: 'cluster', nodes: this.#cluster.startupNodes };
      say(`            ready in ${secs(performance.now() - startedAt)}: ${where}`);
    }
    if (this.#interrupt.signal.aborted) return undefined;

    const redis = (this.#redis = connect(target));
    redis.on('error', () => undefined); // reported by the calls that fail
    await withTimeout(redis.ping(), CONNECT_TIMEOUT_MS, `cannot reach Redis at ${describeTarget(target)}`);
    const locks = (this.#locks = new LockClient(redis, { prefix: DEMO_PREFIX }));

    const values = Array.from({ length: o.values }, (_, i) => cachedValueNames(i + 1, o.parts));
    // Seed every value (whole) under its write lock; also proves the lock works here.
    for (const value of values) await locks.withWrite(value.resource, () => rebuildValue(redis, value, 0));
    const workload =
      `${o.processes} processes × (${o.readers} readers + ${o.writers} rebuild writer${o.writers === 1 ? '' : 's'}), ` +
      `${o.values} cached values of ${o.parts} parts, ${secs(o.durationMs)}`;
    say(`  workload  ${workload}${o.withoutLocks ? this.#view.paint(', WITHOUT LOCKS', 'red') : ''}`);
    say(this.#view.paint(`  locks     ${values.map((v) => locks.lock(v.resource).keys.state).join(', ')}`, 'dim'));
    say('');

    // Fork the workers and wait until each is connected.
    const config = (id: number): WorkerConfig => ({
      id,
      target,
      prefix: DEMO_PREFIX,
      values,
      readers: o.readers,
      writers: o.writers,
      withoutLocks: o.withoutLocks,
      ...PACE,
    });
    for (let id = 1; id <= o.processes; id++) this.#fork(config(id));
    await this.#until(() => this.#workers.every((w) => w.ready || w.done), WORKER_START_TIMEOUT_MS, 'the workers to start');
    for (const w of this.#workers) if (w.child.connected) w.child.send({ type: 'start' }, (error) => void error);

    // Run, showing progress, until the time is up, Ctrl-C, or every worker is gone.
    const startedAt = performance.now();
    const elapsed = (): number => performance.now() - startedAt;
    const snapshot = () => ({ elapsedMs: elapsed(), durationMs: o.durationMs, stats: mergeStats(this.#workers.map((w) => w.stats)) });
    while (elapsed() < o.durationMs && !this.#interrupt.signal.aborted && this.#workers.some((w) => !w.done)) {
      this.#view.update(snapshot());
      await sleep(Math.min(this.#view.intervalMs, Math.max(1, o.durationMs - elapsed())), undefined, {
        signal: this.#interrupt.signal,
      }).catch(() => undefined);
    }
    const elapsedMs = Math.min(elapsed(), o.durationMs);
    this.#view.update({ ...snapshot(), elapsedMs });
    if (!this.#view.live)
      this.#view.message(`[${secs(elapsedMs).padStart(6)}] stopping: the workers finish what they hold and release their locks`);

    await this.#stopWorkers();
    const total = mergeStats(this.#workers.map((w) => w.stats));
    this.#view.update({ elapsedMs, durationMs: o.durationMs, stats: total });
    this.#view.message('');
    const lostWorkers = this.#workers.filter((w) => !w.done).length;

    // What the run left behind: lock keys (there must be none) and the values (all whole).
    let locksLeft = 0;
    let valuesWhole = 0;
    await withTimeout(
      (async () => {
        for (const value of values) {
          const keys = locks.lock(value.resource).keys;
          locksLeft += await redis.exists(keys.state, keys.leases, keys.queue);
          if (checkValue(await redis.mget(value.meta, ...value.parts)) === undefined) valuesWhole++;
        }
        if (o.target) {
          // The user's server: take the demo's data away again, under the locks.
          for (const value of values) await locks.withWrite(value.resource, () => redis.del(value.meta, ...value.parts));
        }
      })(),
      CONNECT_TIMEOUT_MS,
      'checking what the run left in Redis',
    );

    const interrupted = this.#interrupt.signal.aborted;
    const ok = total.halfBuilt === 0 && total.errors === 0 && lostWorkers === 0 && locksLeft === 0 && valuesWhole === values.length;
    return {
      ok,
      exitCode: !ok ? 1 : interrupted ? this.#signalExitCode() : 0,
      interrupted,
      stoppedBy: interrupted ? String(this.#interrupt.signal.reason) : null,
      redis: where,
      durationMs: o.durationMs,
      elapsedMs: Math.round(elapsedMs),
      processes: o.processes,
      readersPerProcess: o.readers,
      writersPerProcess: o.writers,
      values: o.values,
      parts: o.parts,
      withoutLocks: o.withoutLocks,
      reads: total.reads,
      rebuilds: total.rebuilds,
      halfBuilt: total.halfBuilt,
      readerWaits: total.readerWaits,
      writerWaits: total.writerWaits,
      maxReaderWaitMs: Math.round(total.maxReaderWaitMs),
      maxWriterWaitMs: Math.round(total.maxWriterWaitMs),
      errors: total.errors,
      lostWorkers,
      locksLeft,
      valuesWhole,
      notes: [...total.notes, ...this.#notes],
      lockStats: total.locks ?? null,
    };
  }

  #fork(config: WorkerConfig): void {
    const entry = process.argv[1];
    if (entry === undefined) throw new Error('cannot start worker processes: this process has no entry script (process.argv[1])');
    const child = fork(entry, process.argv.slice(2), {
      env: { ...process.env, [WORKER_ENV]: JSON.stringify(config) },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const worker = { child, stats: emptyStats(), ready: false, done: false };
    this.#workers.push(worker);
    child.on('message', (message: WorkerMessage) => {
      if (message.type === 'ready') worker.ready = true;
      else worker.stats = message.stats;
      if (message.type === 'done') worker.done = true;
    });
    child.on('error', (error) => this.#notes.push(`worker ${config.id}: ${error.message}`));
    child.once('exit', (code, signal) => {
      if (!worker.done) {
        this.#notes.push(`worker ${config.id} (pid ${child.pid}) ended without reporting back (${signal ?? `exit code ${code}`})`);
      }
      worker.done = true;
      worker.ready = true;
    });
  }

  /** Tells every worker to stop and waits for them to exit; kills those that do not within the timeout (or on a second Ctrl-C). */
  async #stopWorkers(): Promise<void> {
    const running = this.#workers.filter((w) => w.child.exitCode === null && w.child.signalCode === null);
    const exited = Promise.all(running.map((w) => once(w.child, 'exit')));
    // A worker that got the terminal's SIGINT itself may be closing its channel already.
    for (const w of running) if (w.child.connected) w.child.send({ type: 'stop' }, (error) => void error);
    await Promise.race([exited, sleep(WORKER_STOP_TIMEOUT_MS, undefined, { ref: false }), this.#forcedStop]);
    for (const w of running) {
      if (w.child.exitCode === null && w.child.signalCode === null) {
        this.#notes.push(
          `worker pid ${w.child.pid} was killed: it had not stopped within ${WORKER_STOP_TIMEOUT_MS / 1000} s, or Ctrl-C was pressed twice`,
        );
        w.child.kill('SIGKILL');
      }
    }
    await exited;
  }

  async #until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!condition()) {
      if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
      if (this.#interrupt.signal.aborted) return;
      await sleep(20);
    }
  }

  /** 128 + the number of the signal that stopped the demo, as a shell reports it. */
  #signalExitCode(): number {
    const signal = this.#interrupt.signal.reason as NodeJS.Signals;
    return 128 + (os.constants.signals[signal] ?? 2);
  }

  #onSignal(signal: NodeJS.Signals): void {
    if (!this.#interrupt.signal.aborted) {
      this.#view.message(`\n${signal}: stopping; the workers finish what they hold and release their locks (press Ctrl-C again to force)`);
      this.#interrupt.abort(signal);
      return;
    }
    if (this.#forced) {
      // A third time: leave at once; the exit hook of redis-rwlock/testing kills the servers.
      process.exit(this.#signalExitCode());
    }
    this.#forced = true;
    this.#view.message(`${signal} again: killing the workers and stopping the servers (a third time exits at once)`);
    for (const w of this.#workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
    this.#force();
  }

  /** Closes the clients and stops the servers this process started; never throws. */
  async #teardown(): Promise<void> {
    for (const w of this.#workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    if (this.#forced) {
      this.#redis?.disconnect();
    } else {
      await withTimeout(this.#locks?.close() ?? Promise.resolve(), 5_000, 'closing').catch(() => undefined);
      await withTimeout<unknown>(this.#redis?.quit() ?? Promise.resolve(), 5_000, 'quitting').catch(() => this.#redis?.disconnect());
    }
    if (this.#cluster) {
      this.#view.message('Stopping the embedded Redis Cluster ...');
      await this.#cluster.stop();
    }
  }

  #printSummary(s: DemoSummary): void {
    const v = this.#view;
    const row = (label: string, value: string, extra = ''): string => `  ${label.padEnd(20)}${value.padStart(10)}  ${extra}`.trimEnd();
    const seconds = Math.max(s.elapsedMs, 1) / 1_000;
    const lines = [
      v.paint(`Summary after ${secs(s.elapsedMs)}${s.stoppedBy ? ` (stopped early by ${s.stoppedBy})` : ''}`, 'bold'),
      row('reads served', count(s.reads), `(${count(s.reads / seconds)}/s)`),
      row('rebuilds', count(s.rebuilds), `(${(s.rebuilds / seconds).toFixed(1)}/s)`),
      row('reader waits', count(s.readerWaits), `longest ${ms(s.maxReaderWaitMs)}`),
      row('writer waits', count(s.writerWaits), `longest ${ms(s.maxWriterWaitMs)}`),
      row('errors', count(s.errors + s.lostWorkers)),
      row('locks left behind', count(s.locksLeft)),
      row('values whole at end', `${s.valuesWhole}/${s.values}`),
      row(
        'half-built reads',
        count(s.halfBuilt),
        s.halfBuilt === 0
          ? v.paint('✔ no reader ever saw a half-built value', 'green')
          : v.paint(`✘ readers saw half-built values${s.withoutLocks ? ' (expected: --without-locks)' : ''}`, 'red'),
      ),
    ];
    const l = s.lockStats;
    if (l) {
      lines.push(
        '',
        v.paint('LockClient.stats() of the workers, summed', 'bold'),
        row(
          'acquisitions',
          count(l.acquires),
          `${count(l.waits)} waited; wait p50 ${upTo(bucketQuantile(l, 0.5))}, p99 ${upTo(bucketQuantile(l, 0.99))}`,
        ),
        row('releases', count(l.releases), `${count(l.heldLeases)} still held`),
        row('timeouts / losses', `${count(l.timeouts)} / ${count(l.losses)}`),
        row(
          'wake-ups',
          count(l.wakeups),
          `${count(l.pollingFallbacks)} fallbacks to polling, ${count(l.subscriberErrors)} subscriber errors`,
        ),
      );
    }
    if (s.notes.length > 0) lines.push('', 'Notes:', ...s.notes.slice(0, 10).map((n) => `  - ${n}`));
    lines.push('', s.ok ? v.paint('OK', 'green') : v.paint('FAILED', 'red'));
    this.#out.write(`${lines.join('\n')}\n`);
  }
}

/** `≤ 5 ms`: a histogram bucket's upper bound; past the last bound, `> 10,000 ms`. */
function upTo(boundMs: number): string {
  return Number.isFinite(boundMs) ? `≤ ${ms(boundMs)}` : `> ${ms(WAIT_BUCKETS_MS.at(-1)!)}`;
}

/** The upper bound of the histogram bucket that holds quantile `q` of the grants' waits (Infinity past the last). */
function bucketQuantile(stats: LockStats, q: number): number {
  const { counts, boundsMs, count: total } = stats.waitTime;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i]!;
    if (seen >= q * total) return boundsMs[i] ?? Infinity;
  }
  return 0;
}

function describeTarget(target: Target): string {
  if (target.kind === 'redis') {
    const url = new URL(target.url);
    if (url.password) url.password = '***';
    return `Redis server ${url.toString()}`;
  }
  return `Redis Cluster ${target.nodes.map((n) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`).join(', ')}`;
}

/** Fails with an install hint when `redis-server` (7 or newer) cannot be run. */
async function checkRedisServerBinary(): Promise<void> {
  const bin = process.env.REDIS_SERVER_BIN ?? 'redis-server';
  const version = await new Promise<string | undefined>((resolve) => {
    execFile(bin, ['--version'], { timeout: 10_000 }, (error, stdout) => resolve(error ? undefined : stdout));
  });
  const major = Number(/v=(\d+)/.exec(version ?? '')?.[1]);
  if (version !== undefined && major >= 7) return;
  throw new Error(
    (version === undefined ? `cannot run ${bin}: ` : `${bin} is version ${major}; `) +
      'the embedded Redis Cluster needs redis-server and redis-cli 7 or newer.\n' +
      '  From a clone of redis-rwlock, `npm run demo` installs them (Debian/Ubuntu, as root).\n' +
      '  Debian/Ubuntu: sudo apt-get install redis-server   macOS: brew install redis\n' +
      '  Or set REDIS_SERVER_BIN and REDIS_CLI_BIN, or run against your own servers with --redis URL or --cluster host:port,...',
  );
}

async function withTimeout<T>(promise: Promise<T>, timeoutMs: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${message} (no answer within ${timeoutMs / 1000} s)`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export type { DemoOptions } from './args.js';
