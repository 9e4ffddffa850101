import type { Driver } from '../clients/driver.js';
import { type LockMode, ReplicaAckError } from '../errors.js';
import type { LockKeys } from '../keys/keys.js';
import type { ResolvedReplicaAck } from '../options.js';
import type { AcquireOutcome, AcquireRequest, ExtendRequest, LockBackend, LockInfo } from './backend.js';

/**
 * Adds replica acknowledgement to a single-node backend: after a grant whose
 * request asks for it, `WAIT` on the lock's master; on a shortfall, either
 * release the grant and reject with {@link ReplicaAckError}, or report the
 * count. Requests that do not ask for it pass straight through: no extra
 * round trip.
 */
export class ReplicaAckBackend implements LockBackend {
  constructor(
    private readonly inner: LockBackend,
    private readonly client: Driver,
  ) {}

  keysFor(resource: string): LockKeys {
    return this.inner.keysFor(resource);
  }

  acquire(r: AcquireRequest): Promise<AcquireOutcome> {
    const ack = r.replicaAck;
    return ack === undefined ? this.inner.acquire(r) : this.acquireAcked(r, ack);
  }

  private async acquireAcked(r: AcquireRequest, ack: ResolvedReplicaAck): Promise<AcquireOutcome> {
    const outcome = await this.inner.acquire(r);
    if (!outcome.granted) return outcome;
    let acked: number;
    try {
      acked = await this.client.waitForReplicas(r.keys.slot, ack.replicas, ack.timeoutMs);
    } catch {
      acked = 0; // unknown: count none
    }
    if (acked >= ack.replicas || ack.onShortfall === 'accept') return { ...outcome, replicasAcked: acked };
    // Undo this grant only (one hold: a reentrant owner keeps its outer hold).
    await this.inner.release(r.keys, r.mode, r.owner, r.holdId).catch(() => undefined);
    throw new ReplicaAckError(ack.replicas, acked, ack.timeoutMs, { resource: r.resource, mode: r.mode, owner: r.owner });
  }

  release(keys: LockKeys, mode: LockMode, owner: string, holdId: string): Promise<boolean> {
    return this.inner.release(keys, mode, owner, holdId);
  }

  extend(requests: readonly ExtendRequest[]): Promise<number[]> {
    return this.inner.extend(requests);
  }

  abandon(keys: LockKeys, owner: string, drop?: string): Promise<void> {
    return this.inner.abandon(keys, owner, drop);
  }

  inspect(resource: string, keys: LockKeys): Promise<LockInfo> {
    return this.inner.inspect(resource, keys);
  }
}
