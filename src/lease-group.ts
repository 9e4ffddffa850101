import { type LockMode, LockNotHeldError } from './errors.js';
import type { Lease } from './lease.js';
import { paced, RELEASE_CALLS_IN_FLIGHT } from './paced.js';

/** One lock of a multi-resource acquisition ({@link LockClient.acquireAll}, {@link LockClient.withLocks}). */
export interface LockRequest {
  /** The resource name. */
  readonly resource: string;
  /** `read` or `write`. */
  readonly mode: LockMode;
}

/**
 * The leases of one multi-resource acquisition, held together: release them
 * together (or let `await using` do it).
 */
export class LeaseGroup implements AsyncDisposable {
  /** The leases, in the order of the requests (they were taken in the canonical order). */
  readonly leases: readonly Lease[];
  private readonly byResource: ReadonlyMap<string, Lease>;
  private combined: AbortSignal | undefined;

  /** @internal Groups are made by `acquireAll`. */
  constructor(leases: readonly Lease[]) {
    this.leases = leases;
    this.byResource = new Map(leases.map((lease) => [lease.resource, lease]));
  }

  /** The lease of `resource`, as it was named in the requests. */
  get(resource: string): Lease | undefined {
    return this.byResource.get(resource);
  }

  /** Aborts, with the `LockLostError` as its reason, as soon as any of the leases is lost. */
  get signal(): AbortSignal {
    this.combined ??= AbortSignal.any(this.leases.map((lease) => lease.signal));
    return this.combined;
  }

  /** True while every lease is held (see {@link Lease.held}). */
  get held(): boolean {
    return this.leases.every((lease) => lease.held);
  }

  /** Throws unless every lease is still held (see {@link Lease.assertHeld}). */
  assertHeld(): void {
    for (const lease of this.leases) lease.assertHeld();
  }

  /**
   * Releases every lease (sent in the reverse of the requests' order, not of
   * the order taken; 16 releases in flight at a time, so
   * that a group of thousands does not hold up the server's other clients),
   * and waits for all; then rejects with the first failure if any failed (a
   * lease lost meanwhile: `LockNotHeldError`). Releasing again does nothing more.
   */
  async release(): Promise<void> {
    throwFirstFailure(await paced([...this.leases].reverse(), RELEASE_CALLS_IN_FLIGHT, (lease) => lease.release()));
  }

  /**
   * Extends every lease to `leaseMs` (default: each lease's own length), as
   * many in flight at a time as `release()`; rejects with the first failure.
   */
  async extend(leaseMs?: number): Promise<void> {
    throwFirstFailure(await paced(this.leases, RELEASE_CALLS_IN_FLIGHT, (lease) => lease.extend(leaseMs)));
  }

  /** Releases the leases at the end of an `await using` scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }
}

/** Throws the first failure among `outcomes`, if any. */
function throwFirstFailure(outcomes: readonly (PromiseSettledResult<unknown> | undefined)[]): void {
  const failed = outcomes.find((r): r is PromiseRejectedResult => r?.status === 'rejected');
  if (failed) throw failed.reason;
}

/** @internal The first of `leases` that is lost, as the error it was lost with. */
export function lossOf(leases: readonly Lease[]): unknown {
  for (const lease of leases) {
    if (lease.held) continue;
    try {
      lease.assertHeld();
    } catch (error) {
      if (!(error instanceof LockNotHeldError)) return error;
    }
  }
  return undefined;
}
