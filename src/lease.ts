import type { LockMode } from './errors.js';

/** What a {@link Lease} needs from the client that granted it. */
export interface LeaseHost {
  releaseLease(lease: Lease): Promise<void>;
  extendLease(lease: Lease, leaseMs: number | undefined): Promise<void>;
}

export type LeaseState = 'held' | 'released' | 'lost';

/**
 * One granted acquisition. Release it exactly once (or let `await using`
 * do it); a second `release()` is a no-op.
 */
export class Lease implements AsyncDisposable {
  /** How long the lease lasts from its last grant or extension, in ms. */
  readonly leaseMs: number;
  /** Aborts, with a `LockLostError` as its reason, when the lock is lost. */
  readonly signal: AbortSignal;
  /** @internal */
  readonly controller: AbortController;
  /** @internal */
  state: LeaseState = 'held';
  /** @internal */
  pending: Promise<void> | undefined;

  constructor(
    private readonly host: LeaseHost,
    /** The resource name. */
    readonly resource: string,
    /** `read` or `write`. */
    readonly mode: LockMode,
    /** The owner token: acquisitions with the same token are the same holder. */
    readonly token: string,
    /**
     * Fencing token: strictly larger than that of any earlier grant on this
     * resource. Pass it to the guarded resource and let it refuse smaller ones.
     */
    readonly fence: number,
    leaseMs: number,
    /** True when the lease is renewed automatically while held. */
    readonly autoRenew: boolean,
    controller: AbortController,
  ) {
    this.leaseMs = leaseMs;
    this.controller = controller;
    this.signal = controller.signal;
  }

  /** True until the lease is released or lost. */
  get held(): boolean {
    return this.state === 'held';
  }

  /**
   * Releases this hold. Rejects with `LockNotHeldError` if the lock was lost
   * meanwhile; resolves at once if this lease was already released.
   */
  release(): Promise<void> {
    return this.host.releaseLease(this);
  }

  /**
   * Renews the lease to `leaseMs` (default: this lease's length) from now, on
   * the server's clock. Rejects with `LockLostError` if the lock was lost.
   */
  extend(leaseMs?: number): Promise<void> {
    return this.host.extendLease(this, leaseMs);
  }

  /** Releases the lease at the end of an `await using` scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }
}
