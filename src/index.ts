/**
 * `redis-rwlock`: distributed read-write locks on one Redis server or a Redis
 * Cluster, through ioredis. Start with {@link LockClient}: `locks.lock(resource)`
 * gives a resource's {@link RWLock}; `locks.withRead` / `locks.withWrite` run a
 * function under a lease. Every error is an {@link RWLockError}.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { LockClient } from 'redis-rwlock';
 *
 * const redis = new Redis();
 * const locks = new LockClient(redis);
 * const value = await locks.withRead('cache:{report}', () => redis.get('cache:{report}'));
 * await locks.withWrite('cache:{report}', async (lease) => {
 *   await redis.set('cache:{report}', await rebuild({ signal: lease.signal }));
 * });
 * await locks.close();
 * ```
 *
 * @module redis-rwlock
 */
export { LockClient, type LockClientEvents } from './client.js';
export { RWLock } from './lock.js';
export { Lease } from './lease.js';
export { LeaseGroup, type LockRequest } from './lease-group.js';
export type { ForcedRelease } from './force-release.js';
export type { LockInfo, HolderInfo, WaiterInfo, LegacyInfo, LegacyKeyInfo } from './backends/backend.js';
export type { LockClientOptions, LockClientMode, AcquireOptions, TryAcquireOptions, ResolvedClientOptions } from './options.js';
export { defaultLegacyKeys, type LegacyKeyPair, type LegacyLockKeys } from './keys/legacy.js';
export type { RedisClient } from './redis.js';
export type { RedlockOptions, ReplicaAckOptions, ResolvedRedlockOptions, ResolvedReplicaAck } from './options.js';
export { MIN_REDLOCK_NODES } from './backends/redlock.js';
export { WAIT_BUCKETS_MS, type LockStats, type WaitTimeHistogram, type ContentionInfo } from './observability/telemetry.js';
export type { BlockReason } from './backends/backend.js';
export {
  TRACING_CHANNELS,
  type AcquireTraceContext,
  type AcquireOutcomeName,
  type LeaseTraceContext,
  type LeaseOutcomeName,
  type RenewTraceContext,
} from './observability/channels.js';
export { fencedGet, fencedSet, fenceKeyOf, type FencedSetOptions } from './fencing.js';
export { lockKeys, hashTagOf, type LockKeys, MAX_RESOURCE_BYTES } from './keys/keys.js';
export {
  RWLockError,
  InvalidArgumentError,
  CrossSlotError,
  AcquireTimeoutError,
  AcquireAbortedError,
  UpgradeConflictError,
  LockNotHeldError,
  LockLostError,
  ClientClosedError,
  RedisUnavailableError,
  QuorumError,
  ReplicaAckError,
  StaleFenceError,
  UnsupportedServerError,
  NoPermissionError,
  type RWLockErrorCode,
  type NodeOutcome,
  type LockMode,
  type RWLockErrorContext,
} from './errors.js';
