/**
 * `redis-rwlock`: distributed read-write locks on one Redis server or a Redis
 * Cluster, through ioredis (5 or 6, or iovalkey), node-redis (5 or 6) or GLIDE 2
 * (`@valkey/valkey-glide`). Start with
 * {@link LockClient}: `locks.lock(resource)` gives a resource's
 * {@link RWLock}; `locks.withRead` / `locks.withWrite` run a function under a
 * lease. Every error is an {@link RWLockError}.
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

export type { BlockReason, HolderInfo, LegacyInfo, LegacyKeyInfo, LockInfo, WaiterInfo } from './backends/backend.js';
export { MIN_REDLOCK_NODES } from './backends/redlock-nodes.js';
export { LockClient, type LockClientEvents } from './client.js';
export type {
  GlideCompatibleClient,
  IoredisCompatibleClient,
  LockRedisClient,
  NodeRedisCompatibleClient,
  NodeRedisCompatibleCluster,
} from './clients/index.js';
export {
  AcquireAbortedError,
  AcquireTimeoutError,
  ClientClosedError,
  CrossSlotError,
  type EvictionRisk,
  EvictionRiskError,
  InvalidArgumentError,
  LayoutVersionError,
  LockLostError,
  type LockMode,
  LockNotHeldError,
  type NodeOutcome,
  NoPermissionError,
  QuorumError,
  RedisUnavailableError,
  ReplicaAckError,
  RWLockError,
  type RWLockErrorCode,
  type RWLockErrorContext,
  type ServerCondition,
  ServerOutOfMemoryError,
  ServerRefusedError,
  StaleFenceError,
  UnsupportedServerError,
  UpgradeConflictError,
} from './errors.js';
export { type FencedSetOptions, fencedGet, fencedSet, fenceKeyOf } from './fencing.js';
export type { ForcedRelease } from './force-release.js';
export { hashTagOf, type LockKeys, lockKeys, MAX_RESOURCE_BYTES } from './keys/keys.js';
export { defaultLegacyKeys, type LegacyKeyPair, type LegacyLockKeys } from './keys/legacy.js';
export { Lease } from './lease.js';
export { LeaseGroup, type LockRequest } from './lease-group.js';
export { RWLock } from './lock.js';
export {
  type AcquireOutcomeName,
  type AcquireTraceContext,
  type LeaseOutcomeName,
  type LeaseTraceContext,
  type RenewTraceContext,
  TRACING_CHANNELS,
} from './observability/channels.js';
export { type ContentionInfo, type LockStats, WAIT_BUCKETS_MS, type WaitTimeHistogram } from './observability/telemetry.js';
export type {
  AcquireOptions,
  EvictionRiskAction,
  LockClientMode,
  LockClientOptions,
  RedlockOptions,
  ReplicaAckOptions,
  ResolvedClientOptions,
  ResolvedRedlockOptions,
  ResolvedReplicaAck,
  TryAcquireOptions,
} from './options.js';
