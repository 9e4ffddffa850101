export { LockClient, type LockClientEvents } from './client.js';
export { RWLock } from './lock.js';
export { Lease } from './lease.js';
export type { LockInfo, HolderInfo, WaiterInfo, LegacyInfo, LegacyKeyInfo } from './backend.js';
export type { LockClientOptions, LockClientMode, AcquireOptions, TryAcquireOptions, ResolvedClientOptions } from './options.js';
export { defaultLegacyKeys, type LegacyKeyPair, type LegacyLockKeys } from './legacy-keys.js';
export type { RedisClient } from './redis.js';
export type { RedlockOptions, ReplicaAckOptions } from './options.js';
export { MIN_REDLOCK_NODES } from './redlock-backend.js';
export { fencedSet, fenceKeyOf, type FencedSetOptions } from './fencing.js';
export { lockKeys, hashTagOf, type LockKeys, MAX_RESOURCE_BYTES } from './keys.js';
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
  type NodeOutcome,
  type LockMode,
  type RWLockErrorContext,
} from './errors.js';
