/**
 * Where a worker process connects (the test's server or Cluster, or a fault
 * proxy in front of it), passed to it as JSON, and the client it makes of it.
 *
 * @module
 */
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { LockRedisClient } from '../../src/clients/index.js';
import type { ClusterFaultProxy, FaultProxy } from '../../src/testing/index.js';
import type { TopologyContext } from '../setup/topologies.js';
import { type ClientKind, isNodeRedis, nodeRedisClient, nodeRedisCluster } from './node-redis-clients.js';

export interface WorkerTarget {
  kind: 'standalone' | 'cluster';
  nodes: { host: string; port: number }[];
  /** ioredis natMap for a Cluster: every connection goes through a fault proxy. */
  natMap?: Readonly<Record<string, { host: string; port: number }>>;
  /** The client library of the worker's LockClients (default: ioredis). */
  client?: ClientKind;
}

/** The test's server or Cluster, and the suite's client library. */
export function targetOf(ctx: TopologyContext): WorkerTarget {
  const client = ctx.clientKind;
  return ctx.kind === 'cluster'
    ? { kind: 'cluster', nodes: ctx.cluster.startupNodes.map((n) => ({ host: n.host, port: n.port })), client }
    : { kind: 'standalone', nodes: [{ host: ctx.server.host, port: ctx.server.port }], client };
}

/** The servers behind `proxy`, reached through it (by clients of `client`): every connection goes through the proxy. */
export function targetThrough(proxy: FaultProxy | ClusterFaultProxy, client?: ClientKind): WorkerTarget {
  if ('natMap' in proxy)
    return { kind: 'cluster', nodes: proxy.proxies.map((p) => ({ host: p.host, port: p.port })), natMap: proxy.natMap, client };
  return { kind: 'standalone', nodes: [{ host: proxy.host, port: proxy.port }], client };
}

/**
 * In a worker: the client its LockClients run on: `redis` (the worker's
 * ioredis client) or, for node-redis and GLIDE, a client of its own, connected.
 */
export async function lockClientOf(target: WorkerTarget, redis: Redis | Cluster): Promise<LockRedisClient> {
  return target.client === undefined || target.client === 'ioredis' ? redis : connectLockClient(target);
}

/**
 * A client of `target.client`'s library for `target`, connected (a Cluster: its slots known), its
 * error events kept quiet (it reconnects); through the proxies of a `natMap` if there is one
 * (node-redis: `nodeAddressMap`; GLIDE: `addressResolver`).
 */
export async function connectLockClient(target: WorkerTarget): Promise<LockRedisClient> {
  if (target.client === 'glide') {
    const { glideClient, glideCluster } = await import('./glide-clients.js'); // GLIDE's native module: only where it runs
    const options = { addresses: target.nodes, natMap: target.natMap };
    return target.kind === 'cluster' ? glideCluster(options) : glideClient(options);
  }
  if (!isNodeRedis(target.client)) {
    const redis = connectTarget(target);
    redis.on('error', () => undefined);
    await redis.ping();
    return redis;
  }
  const sockets = target.nodes.map((n) => ({ socket: { host: n.host, port: n.port } }));
  const client =
    target.kind === 'cluster'
      ? nodeRedisCluster(target.client, { rootNodes: sockets, ...(target.natMap && { nodeAddressMap: target.natMap }) })
      : nodeRedisClient(target.client, sockets[0]);
  client.on('error', () => undefined); // it reconnects
  await client.connect();
  return client;
}

/** Closes what {@link lockClientOf} opened (nothing for ioredis: the worker quits its own client). */
export async function closeLockClientOf(client: LockRedisClient, redis: Redis | Cluster): Promise<void> {
  if (client !== redis) await (client as unknown as { close(): Promise<void> }).close();
}

/** In a worker: an ioredis client for `target`. */
export function connectTarget(target: WorkerTarget, redisOptions: RedisOptions = {}, clusterOptions: ClusterOptions = {}): Redis | Cluster {
  return target.kind === 'cluster'
    ? new Cluster(target.nodes, { natMap: target.natMap, ...clusterOptions, redisOptions })
    : new Redis(target.nodes[0]!.port, target.nodes[0]!.host, redisOptions);
}
