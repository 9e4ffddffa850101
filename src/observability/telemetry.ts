/**
 * A LockClient's counters and events: plain number increments on every path,
 * an event only built when someone listens for it.
 */
import type { EventEmitter } from 'node:events';
import type { BlockReason } from '../backends/backend.js';
import {
  AcquireAbortedError,
  AcquireTimeoutError,
  type EvictionRisk,
  type LockLostError,
  type LockMode,
  type RWLockError,
} from '../errors.js';
import type { Lease } from '../lease.js';

/**
 * A measured time in ms to 0.1 ms, as events and stats give it: finer is
 * noise (a timer's own jitter), and `12.300000000000182` reads as a bug.
 */
export function tenthOfMs(ms: number): number {
  return Math.round(ms * 10) / 10;
}

/** Upper bounds of the wait-time histogram's buckets, in ms; a last bucket takes everything longer. */
export const WAIT_BUCKETS_MS: readonly number[] = Object.freeze([1, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000]);

/** Granted acquisitions by the time from the call to the grant (OpenTelemetry's explicit-bucket layout). */
export interface WaitTimeHistogram {
  /** The buckets' upper bounds, in ms, increasing. */
  readonly boundsMs: readonly number[];
  /**
   * Grants per bucket, `boundsMs.length + 1` of them: `counts[i]` took more
   * than `boundsMs[i - 1]` and at most `boundsMs[i]`; the last took longer
   * than the last bound.
   */
  readonly counts: readonly number[];
  /** The grants counted. */
  readonly count: number;
  /** Their total time, in ms. */
  readonly sumMs: number;
}

/**
 * A snapshot of one LockClient's counters since it was made
 * ({@link LockClient.stats}). Counters only grow; `heldLeases` is the
 * number held now.
 */
export interface LockStats {
  /** Acquisitions granted. */
  readonly acquires: number;
  /** Acquisitions that found the lock taken at least once (each is also counted by how it ended). */
  readonly waits: number;
  /** Granted acquisitions by time from the call to the grant. */
  readonly waitTime: WaitTimeHistogram;
  /** Acquisitions with a `waitMs` above 0 that ran out of it (`AcquireTimeoutError`). */
  readonly timeouts: number;
  /** Tries that found the lock taken: `tryAcquire*` (resolved with null), and acquisitions with `waitMs: 0`. */
  readonly busy: number;
  /** Acquisitions aborted through their signal. */
  readonly aborts: number;
  /** Acquisitions that failed otherwise: Redis unavailable, upgrade conflict, client closed. */
  readonly failures: number;
  /** Leases released. */
  readonly releases: number;
  /** Leases lost (expired or taken over while held; each was reported by a `lost` event). */
  readonly losses: number;
  /** Leases held now. */
  readonly heldLeases: number;
  /** Holdings renewed by automatic renewal (one per lock and owner per round). */
  readonly renewals: number;
  /** Holdings a renewal round could not renew because Redis did not answer (tried again 25 ms later, then with backoff). */
  readonly renewalFailures: number;
  /** Wake-up messages received (a release on a lock this client waited for). */
  readonly wakeups: number;
  /**
   * Waits that began without a confirmed subscription to their lock's
   * wake-ups: they re-check every `recheckMs` until it comes through.
   */
  readonly pollingFallbacks: number;
  /** Errors of the subscriber connections (each was reported by a `subscriberError` event). */
  readonly subscriberErrors: number;
  /**
   * The masters that may evict lock keys now (`maxmemory` set,
   * `maxmemory-policy` not `noeviction`), as each last said; empty when none
   * may, or none said (docs/production.md, "Eviction").
   */
  readonly evictionRisks: readonly EvictionRisk[];
}

/** A {@link LockClient} `contended` event: an acquisition found its lock taken. */
export interface ContentionInfo {
  /** The resource name. */
  readonly resource: string;
  /** The mode asked for. */
  readonly mode: LockMode;
  /** The acquisition's owner token. */
  readonly owner: string;
  /**
   * Why it was refused: `write` (a writer holds it), `read` (readers hold it),
   * `intent` (a writer waits, and writers go first), `queue` (writers that
   * came earlier wait), `upgrade` (another reader is upgrading).
   */
  readonly blockedBy: BlockReason;
  /** How long it will wait, in ms (0 for a `tryAcquire*`). */
  readonly waitMs: number;
}

/** What a LockClient emits through (its `emit` and `listenerCount`). */
type Emitter = Pick<EventEmitter, 'emit' | 'listenerCount'>;

/** @internal The counters of one LockClient, and its events. */
export class Telemetry {
  acquires = 0;
  waits = 0;
  timeouts = 0;
  busy = 0;
  aborts = 0;
  failures = 0;
  releases = 0;
  losses = 0;
  renewals = 0;
  renewalFailures = 0;
  wakeups = 0;
  pollingFallbacks = 0;
  subscriberErrors = 0;
  private readonly waitCounts: number[] = new Array<number>(WAIT_BUCKETS_MS.length + 1).fill(0);
  private waitSumMs = 0;

  constructor(private readonly emitter: Emitter) {}

  granted(lease: Lease, elapsedMs: number): void {
    const waitedMs = tenthOfMs(elapsedMs);
    this.acquires++;
    this.waitSumMs += waitedMs;
    let i = 0;
    while (i < WAIT_BUCKETS_MS.length && waitedMs > WAIT_BUCKETS_MS[i]!) i++;
    this.waitCounts[i]!++;
    if (this.emitter.listenerCount('acquired') > 0) this.emitter.emit('acquired', lease, waitedMs);
  }

  /** An acquisition's first refusal. */
  contended(resource: string, mode: LockMode, owner: string, blockedBy: BlockReason, waitMs: number): void {
    this.waits++;
    if (this.emitter.listenerCount('contended') > 0) {
      const info: ContentionInfo = { resource, mode, owner, blockedBy, waitMs };
      this.emitter.emit('contended', info);
    }
  }

  /** An acquisition that ended without a grant; `waiting`: it had a `waitMs` above 0. */
  refused(error: unknown, waiting: boolean): void {
    if (error instanceof AcquireTimeoutError) {
      if (waiting) this.timeouts++;
      else this.busy++;
    } else if (error instanceof AcquireAbortedError) this.aborts++;
    else this.failures++;
  }

  released(lease: Lease): void {
    this.releases++;
    if (this.emitter.listenerCount('released') > 0) this.emitter.emit('released', lease, tenthOfMs(performance.now() - lease.grantedAt));
  }

  lost(error: LockLostError, leases: readonly Lease[]): void {
    this.losses += leases.length;
    this.emitter.emit('lost', error, leases);
  }

  renewed(holdings: number): void {
    this.renewals += holdings;
  }

  renewalFailed(error: RWLockError, holdings: number, leases: readonly Lease[]): void {
    this.renewalFailures += holdings;
    if (this.emitter.listenerCount('renewalFailed') > 0) this.emitter.emit('renewalFailed', error, leases);
  }

  backgroundError(error: RWLockError): void {
    if (this.emitter.listenerCount('backgroundError') > 0) this.emitter.emit('backgroundError', error);
  }

  wakeup(): void {
    this.wakeups++;
  }

  pollingFallback(): void {
    this.pollingFallbacks++;
  }

  /** A master that may evict lock keys (see `onEvictionRisk`). */
  evictionRisk(risk: EvictionRisk): void {
    if (this.emitter.listenerCount('evictionRisk') > 0) this.emitter.emit('evictionRisk', risk);
  }

  subscriberError(error: Error): void {
    this.subscriberErrors++;
    if (this.emitter.listenerCount('subscriberError') > 0) this.emitter.emit('subscriberError', error);
  }

  snapshot(heldLeases: number, evictionRisks: readonly EvictionRisk[]): LockStats {
    return {
      acquires: this.acquires,
      waits: this.waits,
      waitTime: { boundsMs: WAIT_BUCKETS_MS, counts: [...this.waitCounts], count: this.acquires, sumMs: tenthOfMs(this.waitSumMs) },
      timeouts: this.timeouts,
      busy: this.busy,
      aborts: this.aborts,
      failures: this.failures,
      releases: this.releases,
      losses: this.losses,
      heldLeases,
      renewals: this.renewals,
      renewalFailures: this.renewalFailures,
      wakeups: this.wakeups,
      pollingFallbacks: this.pollingFallbacks,
      subscriberErrors: this.subscriberErrors,
      evictionRisks,
    };
  }
}
