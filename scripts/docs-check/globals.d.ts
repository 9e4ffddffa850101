// Names the docs' TypeScript blocks use without making them (scripts/docs-check.ts):
// what the surrounding prose says the reader already has.
import type { Cluster, Redis } from 'ioredis';
import type { Lease, LeaseGroup, LegacyInfo as LegacyInfoType, LockClient as LockClientClass, LockRequest, RWLock } from 'redis-rwlock';

declare global {
  // Connections and clients the text has already made.
  const redis: Redis;
  const cluster: Cluster;
  const server: Redis;
  const redisA: Redis;
  const redisB: Redis;
  const redisC: Redis;
  const redisOrCluster: Redis | Cluster;
  const LockClient: typeof LockClientClass;
  const locks: LockClientClass;
  const lock: RWLock;
  const lease: Lease;
  type LegacyInfo = LegacyInfoType;

  // The API overview's option values and arguments, named rather than made up.
  const signal: AbortSignal;
  const leaseMs: number;
  const waitMs: number;
  const owner: string;
  const requests: LockRequest[];
  function fn(group: LeaseGroup): Promise<void>;

  // The application's own work, which the examples call.
  function transfer(from: string, to: string, amount: number, options?: { signal?: AbortSignal }): Promise<void>;
  function buildReport(): Promise<string>;
  function computeProfile(id: string, options?: { signal?: AbortSignal }): Promise<string>;
  function computeReport(options?: { signal?: AbortSignal }): Promise<string[]>;
  interface Report {
    version: number;
    builtAt: number;
    sections: (string | null)[];
  }
}
