import { type LockMode, LockNotHeldError } from './errors.js';

/** What a {@link Lease} needs from the client that granted it. */
export interface LeaseHost {
  releaseLease(lease: Lease): Promise<void>;
  extendLease(lease: Lease, leaseMs: number | undefined): Promise<void>;
  /** Marks the lease lost now if its local deadline has passed (its timer may not have run yet). */
  expireIfDue(lease: Lease): void;
}

export type LeaseState = 'held' | 'released' | 'lost';

/**
 * One granted acquisition. Release it exactly once (or let `await using`
 * do it); a second `release()` is a no-op.
 */
export class Lease implements AsyncDisposable {
  /** How long the lease lasts from its last grant or extension, in ms. */
  readonly leaseMs: number;
  /** @internal */
  state: LeaseState = 'held';
  // Made on first use of `signal`: most leases are released without anyone looking at it.
  private controller: AbortController | undefined;
  private lostReason: unknown;
  /** @internal */
  pending: Promise<void> | undefined;
  /** @internal The client's record of what this lease's owner holds on its lock. */
  holding: object | undefined;
  /** @internal True once renewal stopped because a release failed. */
  renewalStopped = false;
  /** @internal True once a release attempt failed with an unknown outcome. */
  releaseUnknown = false;
  /** @internal When its acquire was sent (performance.now): the grant came a little later. */
  grantedAt = 0;
  /** @internal Leases are made by acquisitions, never by users. */
  constructor(
    private readonly host: LeaseHost,
    /** The resource name. */
    readonly resource: string,
    /** `read` or `write`. */
    readonly mode: LockMode,
    /** The owner token: acquisitions with the same token are the same holder. */
    readonly token: string,
    /**
     * Fencing token: an owner's first hold of a mode gets one larger than
     * every earlier fence of this resource (see docs/safety.md for the
     * limits); its repeat holds of that mode share it. Pass it to the
     * guarded resource and let it refuse smaller ones.
     */
    readonly fence: number,
    leaseMs: number,
    /** True when the lease is renewed automatically while held. */
    readonly autoRenew: boolean,
    /** @internal The id of the acquire that took this hold; its release names it. */
    readonly holdId: string,
    /**
     * With `replicaAck`: how many replicas acknowledged the grant (in `redlock`
     * mode, the fewest of any granting node); undefined when not asked for.
     */
    readonly replicasAcked: number | undefined,
  ) {
    this.leaseMs = leaseMs;
  }

  /**
   * Aborts, with a `LockLostError` as its reason, when the lock is lost:
   * when its deadline passes unrenewed, also if the event loop was blocked
   * then, at the latest when the signal or `held` is next read.
   */
  get signal(): AbortSignal {
    if (this.state === 'held') this.host.expireIfDue(this);
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.state === 'lost') this.controller.abort(this.lostReason);
    }
    return this.controller.signal;
  }

  /** @internal Marks the lease lost and aborts its signal with `reason`. */
  markLost(reason: unknown): void {
    this.state = 'lost';
    this.lostReason = reason;
    this.controller?.abort(reason);
  }

  /**
   * True until the lease is released or lost. Read, it compares the clock with
   * the lease's local deadline, so code that resumes after a stall (a blocked
   * event loop, a long GC pause) learns the truth before it acts.
   */
  get held(): boolean {
    if (this.state === 'held') this.host.expireIfDue(this);
    return this.state === 'held';
  }

  /**
   * Throws unless the lease is still held: its `LockLostError` when it was
   * lost, `LockNotHeldError` when it was released. Call it right before a
   * write the lock guards.
   */
  assertHeld(): void {
    if (this.held) return;
    if (this.state === 'lost') throw this.lostReason;
    throw new LockNotHeldError(`the ${this.mode} lock on "${this.resource}" is not held by this lease (it was released)`, {
      resource: this.resource,
      mode: this.mode,
      owner: this.token,
    });
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
