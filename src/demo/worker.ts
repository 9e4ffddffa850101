/**
 * One worker process of the demo: reader loops serve the cached values under
 * read locks and check every value they read is whole; rebuild loops replace
 * a value, part by part, under its write lock. Counters go to the coordinating
 * process over IPC.
 *
 * @module
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { authOptions } from '../cli/connect.js';
import { AcquireAbortedError, AcquireTimeoutError, type Lease, LockClient } from '../index.js';
import { checkValue, rebuildValue } from './cache-value.js';
import { emptyStats, type PrimaryMessage, type Target, type WorkerConfig, type WorkerMessage } from './protocol.js';

/** How long a reader or rebuild waits for its lock before it counts an error. */
const WAIT_MS = 30_000;
/** How often counters are sent to the coordinating process. */
const STATS_EVERY_MS = 200;
/** How many errors and half-built reads a worker describes in its notes. */
const MAX_NOTES = 5;

/** Connects to the demo's Redis, failing requests fast rather than queueing them forever. */
export function connect(target: Target): Redis | Cluster {
  const auth = authOptions(target);
  const redisOptions = { connectTimeout: 5_000, maxRetriesPerRequest: 3, ...auth.redis };
  if (target.kind === 'cluster') {
    return new Cluster(
      target.nodes.map((n) => ({ host: n.host, port: n.port })),
      {
        scaleReads: 'master', // the guarded data is read where the lock is: never from a lagging replica
        redisOptions,
        ...auth.cluster,
      },
    );
  }
  return new Redis(target.url, redisOptions);
}

/** Runs a worker until the coordinating process says stop (or goes away). */
export async function runWorker(config: WorkerConfig): Promise<void> {
  const stats = emptyStats();
  const note = (text: string): void => {
    if (stats.notes.length < MAX_NOTES) stats.notes.push(`worker ${config.id}: ${text}`);
  };
  const send = (message: WorkerMessage, callback?: () => void): void => {
    if (process.connected) process.send!(message, undefined, {}, () => callback?.());
    else callback?.();
  };

  // Stop on the coordinator's word, when it goes away, or on a signal (Ctrl-C
  // reaches every process of the terminal's process group, not just the coordinator).
  const stop = new AbortController();
  const stopNow = (): void => stop.abort();
  let start!: () => void;
  const started = new Promise<void>((resolve) => (start = resolve));
  process.on('message', (message: PrimaryMessage) => {
    if (message?.type === 'start') start();
    if (message?.type === 'stop') stopNow();
  });
  process.on('disconnect', stopNow);
  process.on('SIGINT', stopNow);
  process.on('SIGTERM', stopNow);

  const redis = connect(config.target);
  redis.on('error', (error: Error) => note(`redis: ${error.message}`));
  const locks = new LockClient(redis, { prefix: config.prefix });
  locks.on('lost', (error) => {
    stats.errors++;
    note(error.message);
  });

  /**
   * Runs `fn` under the lock (`withRead` / `withWrite`), first without
   * waiting, so that a wait is counted only when the lock really was taken.
   * Resolves to how long the caller waited, in ms (0 when it did not wait).
   */
  async function underLock(mode: 'read' | 'write', resource: string, fn: (lease?: Lease) => Promise<void>): Promise<number> {
    if (config.withoutLocks) {
      await fn();
      return 0;
    }
    const withLock = mode === 'read' ? locks.withRead.bind(locks) : locks.withWrite.bind(locks);
    const askedAt = performance.now();
    try {
      await withLock(resource, fn, { waitMs: 0 });
      return 0;
    } catch (error) {
      if (!(error instanceof AcquireTimeoutError)) throw error;
    }
    let grantedAt = askedAt;
    await withLock(
      resource,
      (lease) => {
        grantedAt = performance.now();
        return fn(lease);
      },
      { waitMs: WAIT_MS, signal: stop.signal },
    );
    return grantedAt - askedAt;
  }

  /** Serves reads of random values until stopped; checks each value read is whole. */
  async function readLoop(): Promise<void> {
    while (!stop.signal.aborted) {
      const value = pick(config.values);
      try {
        const waited = await underLock('read', value.resource, async () => {
          const read = await redis.mget(value.meta, ...value.parts);
          const problem = checkValue(read);
          stats.reads++;
          if (problem !== undefined) {
            stats.halfBuilt++;
            note(`half-built read of ${value.resource}: ${problem}`);
          }
        });
        if (waited > 0) {
          stats.readerWaits++;
          stats.maxReaderWaitMs = Math.max(stats.maxReaderWaitMs, waited);
        }
      } catch (error) {
        if (!failed(error)) break;
      }
      await pause(config.readPauseMs);
    }
  }

  /** Rebuilds random values until stopped. */
  async function rebuildLoop(): Promise<void> {
    await pause(config.rebuildPauseMs); // spread the first rebuilds out
    while (!stop.signal.aborted) {
      const value = pick(config.values);
      try {
        const waited = await underLock('write', value.resource, async () => {
          await rebuildValue(redis, value, config.stepMs);
        });
        stats.rebuilds++;
        if (waited > 0) {
          stats.writerWaits++;
          stats.maxWriterWaitMs = Math.max(stats.maxWriterWaitMs, waited);
        }
      } catch (error) {
        if (!failed(error)) break;
      }
      await pause(config.rebuildPauseMs);
    }
  }

  /** Records an unexpected error; false when the loop should end because the demo is stopping. */
  function failed(error: unknown): boolean {
    if (stop.signal.aborted && error instanceof AcquireAbortedError) return false;
    stats.errors++;
    note(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
    return !stop.signal.aborted;
  }

  /** A random pause of up to `maxMs`, cut short when the demo stops. */
  async function pause(maxMs: number): Promise<void> {
    await sleep(Math.random() * maxMs, undefined, { signal: stop.signal }).catch(() => undefined);
  }

  let ticker: NodeJS.Timeout | undefined;
  try {
    // Warm up, uncounted: connect to every master the values live on and load
    // the scripts, so the first counted waits are waits for locks, not for connections.
    for (const value of config.values) {
      if (config.withoutLocks) await redis.mget(value.meta, ...value.parts);
      else await locks.withRead(value.resource, () => redis.mget(value.meta, ...value.parts));
    }
    send({ type: 'ready' });
    await Promise.race([started, new Promise((resolve) => stop.signal.addEventListener('abort', resolve))]);
    ticker = setInterval(() => send({ type: 'stats', stats: { ...stats, locks: locks.stats() } }), STATS_EVERY_MS);
    await Promise.all([...Array.from({ length: config.readers }, readLoop), ...Array.from({ length: config.writers }, rebuildLoop)]);
  } finally {
    if (ticker) clearInterval(ticker);
    // Every lease was released by withRead/withWrite; close() also releases any left (there are none).
    await locks.close();
    await redis.quit().catch(() => redis.disconnect());
  }
  stats.locks = locks.stats(); // after close(): every lease released
  await new Promise<void>((resolve) => send({ type: 'done', stats }, resolve));
  if (process.connected) process.disconnect();
}

function pick<T>(items: readonly T[]): T {
  return items[Math.floor(Math.random() * items.length)]!;
}
