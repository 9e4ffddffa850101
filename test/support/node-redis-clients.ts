/**
 * The client libraries the tests run LockClients on, and node-redis clients
 * of either major (5: the dev dependency `redis`; 6: the alias `redis6`),
 * for the topologies and for worker processes.
 *
 * @module
 */
import { createClient, createCluster } from 'redis';
import { createClient as createClient6, createCluster as createCluster6 } from 'redis6';
import type { LockRedisClient } from '../../src/clients/index.js';

/** The client libraries a suite's LockClients can run on: ioredis 6, node-redis 5, node-redis 6, GLIDE 2. */
export type ClientKind = 'ioredis' | 'node-redis' | 'node-redis6' | 'glide';

/** Whether `kind` is a node-redis major. */
export function isNodeRedis(kind: ClientKind | undefined): kind is 'node-redis' | 'node-redis6' {
  return kind === 'node-redis' || kind === 'node-redis6';
}

/** A node-redis client (of the major `kind`) on one server, not connected. */
export function nodeRedisClient(
  kind: 'node-redis' | 'node-redis6',
  options: Parameters<typeof createClient>[0],
): LockRedisClient & NodeRedisLike {
  return (kind === 'node-redis6' ? createClient6(options as never) : createClient(options)) as unknown as LockRedisClient & NodeRedisLike;
}

/** A node-redis Cluster client (of the major `kind`), not connected. */
export function nodeRedisCluster(
  kind: 'node-redis' | 'node-redis6',
  options: Parameters<typeof createCluster>[0],
): LockRedisClient & NodeRedisLike {
  return (kind === 'node-redis6' ? createCluster6(options as never) : createCluster(options)) as unknown as LockRedisClient & NodeRedisLike;
}

/** What the tests use of a node-redis client or Cluster, of either major. */
export interface NodeRedisLike {
  readonly isOpen: boolean;
  connect(): Promise<unknown>;
  close(): Promise<void>;
  destroy(): void;
  on(event: 'error', listener: (error: Error) => void): unknown;
}
