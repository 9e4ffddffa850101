/**
 * What the demo's coordinating process and its worker processes tell each
 * other: the worker's configuration (in an environment variable, so that any
 * entry point that reaches `runDemo` can become a worker) and its counters
 * (over the IPC channel of `child_process.fork`).
 *
 * @module
 */

import type { ConnectionAuth } from '../cli/connect.js';
import type { LockStats } from '../observability/telemetry.js';

/** Where the demo's Redis is, and who connects how (the password travels in {@link WORKER_ENV}, never in argv). */
export type Target = (
  | { readonly kind: 'redis'; readonly url: string }
  | { readonly kind: 'cluster'; readonly nodes: readonly { readonly host: string; readonly port: number }[] }
) &
  ConnectionAuth;

/** Environment variable that turns a process running `runDemo` into a worker; holds its {@link WorkerConfig} as JSON. */
export const WORKER_ENV = 'RWLOCK_DEMO_WORKER';

/** Everything one worker process needs. */
export interface WorkerConfig {
  /** 1-based worker number, for messages. */
  readonly id: number;
  readonly target: Target;
  /** Lock key prefix of the demo's locks. */
  readonly prefix: string;
  /** The cached values: one lock resource each; the data keys share its hash tag. */
  readonly values: readonly CachedValueNames[];
  /** Reader loops in this process. */
  readonly readers: number;
  /** Rebuild loops in this process. */
  readonly writers: number;
  /** Pause between two steps of a rebuild, in ms (the "work" of computing the next part). */
  readonly stepMs: number;
  /** Pause between two reads of one reader loop, in ms (upper bound of a random pause). */
  readonly readPauseMs: number;
  /** Pause between two rebuilds of one rebuild loop, in ms (upper bound of a random pause). */
  readonly rebuildPauseMs: number;
  /** Skip the locks, to show that the check does catch half-built values. */
  readonly withoutLocks: boolean;
}

/** The Redis names of one cached value. */
export interface CachedValueNames {
  /** The lock's resource name, e.g. `cache:{report-1}`. */
  readonly resource: string;
  /** `<data>:meta`: `<version>:<checksum>`. */
  readonly meta: string;
  /** `<data>:part:<i>`: `<version>:<payload>`, one key per rebuild step. */
  readonly parts: readonly string[];
}

/** A worker's counters since it started; sent every few hundred ms and once more when it stops. */
export interface WorkerStats {
  /** Reads that completed (whole or not). */
  reads: number;
  /** Reads that saw a value whose parts did not all belong to one version or whose checksum did not match. */
  halfBuilt: number;
  /** Rebuilds that completed. */
  rebuilds: number;
  /** Read acquisitions that found the lock taken and had to wait. */
  readerWaits: number;
  /** Write acquisitions that found the lock taken and had to wait. */
  writerWaits: number;
  /** The longest time a reader waited for its lock, in ms. */
  maxReaderWaitMs: number;
  /** The longest time a rebuild waited for its lock, in ms. */
  maxWriterWaitMs: number;
  /** Unexpected errors (timeouts, lost locks, Redis errors). */
  errors: number;
  /** The first few unexpected errors and half-built reads, described. */
  notes: string[];
  /** The worker's `LockClient.stats()`; absent until its first report. */
  locks?: LockStats;
}

/** Messages from a worker. */
export type WorkerMessage =
  /** Connected and warmed up (scripts loaded, connections to every master the values live on); waits for `start`. */
  | { readonly type: 'ready' }
  | { readonly type: 'stats'; readonly stats: WorkerStats }
  | { readonly type: 'done'; readonly stats: WorkerStats };

/** Messages to a worker. */
export type PrimaryMessage = { readonly type: 'start' } | { readonly type: 'stop' };

/** Counters at zero. */
export function emptyStats(): WorkerStats {
  return {
    reads: 0,
    halfBuilt: 0,
    rebuilds: 0,
    readerWaits: 0,
    writerWaits: 0,
    maxReaderWaitMs: 0,
    maxWriterWaitMs: 0,
    errors: 0,
    notes: [],
  };
}

/** The sum (counters) and maximum (longest waits) over workers. */
export function mergeStats(all: Iterable<WorkerStats>): WorkerStats {
  const total = emptyStats();
  for (const s of all) {
    total.reads += s.reads;
    total.halfBuilt += s.halfBuilt;
    total.rebuilds += s.rebuilds;
    total.readerWaits += s.readerWaits;
    total.writerWaits += s.writerWaits;
    total.maxReaderWaitMs = Math.max(total.maxReaderWaitMs, s.maxReaderWaitMs);
    total.maxWriterWaitMs = Math.max(total.maxWriterWaitMs, s.maxWriterWaitMs);
    total.errors += s.errors;
    total.notes.push(...s.notes);
    if (s.locks) total.locks = total.locks ? addLockStats(total.locks, s.locks) : s.locks;
  }
  return total;
}

/** Two clients' stats together: counters and histogram buckets summed (the buckets are the same everywhere). */
export function addLockStats(a: LockStats, b: LockStats): LockStats {
  const sum = {} as Record<string, unknown>;
  for (const [key, value] of Object.entries(a)) {
    if (typeof value === 'number') sum[key] = value + (b[key as keyof LockStats] as number);
  }
  const w = a.waitTime;
  return {
    ...(sum as unknown as LockStats),
    waitTime: {
      boundsMs: w.boundsMs,
      counts: w.counts.map((n, i) => n + (b.waitTime.counts[i] ?? 0)),
      count: w.count + b.waitTime.count,
      sumMs: w.sumMs + b.waitTime.sumMs,
    },
  };
}
