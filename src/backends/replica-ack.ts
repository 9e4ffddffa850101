import type { Redis } from 'ioredis';
import { RedisUnavailableError, ReplicaAckError } from '../errors.js';
import type { ResolvedReplicaAck } from '../options.js';
import { isCluster, type RedisClient } from '../redis.js';
import type { AcquireOutcome, AcquireRequest, LockBackend } from './backend.js';

/**
 * The connection that serves `slot`'s master: on one server the client
 * itself; on a Cluster the pooled connection ioredis sends that slot's
 * commands through (`cluster.slots[slot][0]` names the master). `WAIT` counts
 * the writes of the connection it is sent on, so it must be this one.
 */
export function masterConnection(client: RedisClient, slot: number): Redis {
  if (!isCluster(client)) return client;
  const key = client.slots[slot]?.[0];
  const node = key === undefined ? undefined : client.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === key);
  if (!node) {
    throw new RedisUnavailableError(`no connection to the master of Cluster slot ${slot} (slot map: ${key ?? 'not loaded'})`);
  }
  return node;
}

/**
 * Sends `WAIT replicas timeoutMs` to the master that owns `slot`, on the
 * connection that wrote the grant, and resolves with the replicas that
 * acknowledged every write of that connection so far.
 */
export async function waitForReplicas(client: RedisClient, slot: number, replicas: number, timeoutMs: number): Promise<number> {
  return Number(await masterConnection(client, slot).wait(replicas, timeoutMs));
}

/**
 * Replica acknowledgement of a grant, for a request that asks for it: after
 * the grant, `WAIT` on the lock's master; on a shortfall, either give the
 * grant back and reject with {@link ReplicaAckError}, or report the count.
 * (Requests that do not ask for it never come here: no extra round trip.)
 */
export async function acknowledged(
  backend: Pick<LockBackend, 'release'>,
  client: RedisClient,
  r: AcquireRequest,
  ack: ResolvedReplicaAck,
  outcome: AcquireOutcome,
): Promise<AcquireOutcome> {
  if (!outcome.granted) return outcome;
  let acked: number;
  try {
    acked = await waitForReplicas(client, r.keys.slot, ack.replicas, ack.timeoutMs);
  } catch {
    acked = 0; // unknown: count none
  }
  if (acked >= ack.replicas || ack.onShortfall === 'accept') return { ...outcome, replicasAcked: acked };
  // Undo this grant only (one hold: a reentrant owner keeps its outer hold).
  await backend.release(r.keys, r.mode, r.owner, r.holdId).catch(() => undefined);
  throw new ReplicaAckError(ack.replicas, acked, ack.timeoutMs, { resource: r.resource, mode: r.mode, owner: r.owner });
}
