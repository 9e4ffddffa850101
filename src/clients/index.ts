import { isUsableClient, type RedisClient } from '../redis.js';
import type { Driver } from './driver.js';
import { type GlideCompatibleClient, GlideDriver, isGlideClient } from './glide.js';
import { IoredisDriver } from './ioredis.js';
import {
  isNodeRedisClient,
  isNodeRedisCluster,
  NodeRedisClusterDriver,
  type NodeRedisCompatibleClient,
  type NodeRedisCompatibleCluster,
  NodeRedisDriver,
} from './node-redis.js';

export type { Driver, Subscriber, SubscriberEvents, SubscriberOptions } from './driver.js';
export type { GlideCompatibleClient } from './glide.js';
export type { NodeRedisCompatibleClient, NodeRedisCompatibleCluster } from './node-redis.js';

/**
 * An ioredis `Redis` or `Cluster` (ioredis 5 or 6), or a client with
 * ioredis' API such as iovalkey's `Redis` and `Cluster`: one of the clients
 * `new LockClient(redis)` and the fencing functions take (`LockRedisClient`).
 * Checked by shape, not by class, so another copy or a fork of ioredis fits;
 * the library uses these methods and the rest of ioredis' API behind them
 * (`duplicate`, sharded pub/sub, a Cluster's `nodes`).
 */
export interface IoredisCompatibleClient {
  /** Defines a Lua script as a command (EVALSHA, EVAL on NOSCRIPT): how the library runs its scripts. */
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
  /** A new connection with the same options: the library's wake-up subscriber. */
  duplicate(...args: never[]): unknown;
  /** Any command by name: the library's server check (`COMMAND INFO`). */
  call(...args: never[]): unknown;
  /** The connection's state (`ready`, `end`, ...): a closed client is refused. */
  readonly status: string;
}

/**
 * A Redis client the library runs on: an ioredis 5 or 6 `Redis` or
 * `Cluster` (or iovalkey's, of the same API), or a node-redis 5 or 6 client from
 * `createClient()` or `createCluster()`, connected, or a GLIDE 2.x
 * (`@valkey/valkey-glide`) `GlideClient` or `GlideClusterClient`. Each is taken by its
 * shape: the library needs no client library but the one passed (it looks
 * ioredis up, if installed, only to batch an autopipelining client's calls),
 * and its public types name none, so they compile with any one installed alone.
 */
export type LockRedisClient = IoredisCompatibleClient | NodeRedisCompatibleClient | NodeRedisCompatibleCluster | GlideCompatibleClient;

/** What `new LockClient(...)` and the fencing functions say when given something else. */
export const NOT_A_CLIENT =
  'must be a Redis client: an ioredis (5 or 6) or iovalkey Redis or Cluster, a node-redis (5 or 6) createClient() or createCluster() client, or a GLIDE GlideClient or GlideClusterClient';

/**
 * What a client of ioredis' shape (`defineCommand`, `duplicate`) lacks of
 * what the ioredis adapter runs it through: `call()`, every command the
 * scripts do not send, and `status`, whether it is open. A stand-in such as
 * ioredis-mock has that shape without them.
 */
function missingOfIoredis(client: object): string[] {
  const c = client as { call?: unknown; status?: unknown };
  const missing: string[] = [];
  if (typeof c.call !== 'function') missing.push('call()');
  if (typeof c.status !== 'string') missing.push('status');
  return missing;
}

/**
 * Why `client` is refused: {@link NOT_A_CLIENT}, or, for a client of
 * ioredis' shape without what the library drives it by (a mock), what it
 * lacks and what to test with instead.
 */
export function notAClient(client: unknown): string {
  const missing = typeof client === 'object' && client !== null && isUsableClient(client) ? missingOfIoredis(client) : [];
  if (missing.length === 0) return NOT_A_CLIENT;
  return (
    `has ioredis' shape (defineCommand, duplicate) but no ${missing.join(' and no ')}, which redis-rwlock drives an ioredis client by: ` +
    'a stand-in such as ioredis-mock, which cannot run the Lua scripts the locks are made of either (no SPUBLISH, no script flags); ' +
    'give it a real server instead: startRedisServer() from redis-rwlock/testing starts one for tests'
  );
}

/** One driver per client: made on first use, shared by every LockClient and fencing call on it. */
const drivers = new WeakMap<object, Driver>();

/** The driver of `client`, or undefined when it is none of the clients the library knows. */
export function driverFor(client: IoredisCompatibleClient): Driver;
export function driverFor(client: unknown): Driver | undefined;
export function driverFor(client: unknown): Driver | undefined {
  if (typeof client !== 'object' || client === null) return undefined;
  let driver = drivers.get(client);
  if (driver) return driver;
  if (isUsableClient(client)) {
    if (missingOfIoredis(client).length > 0) return undefined;
    driver = new IoredisDriver(client as RedisClient);
  } else if (isNodeRedisClient(client)) {
    driver = isNodeRedisCluster(client)
      ? new NodeRedisClusterDriver(client as NodeRedisCompatibleCluster)
      : new NodeRedisDriver(client as NodeRedisCompatibleClient);
  } else if (isGlideClient(client)) driver = new GlideDriver(client as GlideCompatibleClient);
  else return undefined;
  drivers.set(client, driver);
  return driver;
}
