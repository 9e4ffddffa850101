import type { Driver } from '../clients/driver.js';
import { ReplicaAckError } from '../errors.js';
import type { ResolvedReplicaAck } from '../options.js';
import type { AcquireOutcome, AcquireRequest, LockBackend } from './backend.js';

/**
 * Replica acknowledgement of a grant, for a request that asks for it: after
 * the grant, `WAIT` on the lock's master; on a shortfall, either give the
 * grant back and reject with {@link ReplicaAckError}, or report the count.
 * (Requests that do not ask for it never come here: no extra round trip.)
 */
export async function acknowledged(
  backend: Pick<LockBackend, 'release'>,
  client: Driver,
  r: AcquireRequest,
  ack: ResolvedReplicaAck,
  outcome: AcquireOutcome,
): Promise<AcquireOutcome> {
  if (!outcome.granted) return outcome;
  let acked: number;
  try {
    acked = await client.waitForReplicas(r.keys.slot, ack.replicas, ack.timeoutMs);
  } catch {
    acked = 0; // unknown: count none
  }
  if (acked >= ack.replicas || ack.onShortfall === 'accept') return { ...outcome, replicasAcked: acked };
  // Undo this grant only (one hold: a reentrant owner keeps its outer hold).
  await backend.release(r.keys, r.mode, r.owner, r.holdId).catch(() => undefined);
  throw new ReplicaAckError(ack.replicas, acked, ack.timeoutMs, { resource: r.resource, mode: r.mode, owner: r.owner });
}
