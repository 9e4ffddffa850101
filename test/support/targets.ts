/**
 * Where a worker process connects (the test's server or Cluster, or a fault
 * proxy in front of it), passed to it as JSON, and the client it makes of it.
 *
 * @module
 */
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { ClusterFaultProxy, FaultProxy } from '../../src/testing/index.js';
import type { TopologyContext } from '../setup/topologies.js';

export interface WorkerTarget {
  kind: 'standalone' | 'cluster';
  nodes: { host: string; port: number }[];
  /** ioredis natMap for a Cluster: every connection goes through a fault proxy. */
  natMap?: Readonly<Record<string, { host: string; port: number }>>;
}

/** The test's server or Cluster. */
export function targetOf(ctx: TopologyContext): WorkerTarget {
  return ctx.kind === 'cluster'
    ? { kind: 'cluster', nodes: ctx.cluster.startupNodes.map((n) => ({ host: n.host, port: n.port })) }
    : { kind: 'standalone', nodes: [{ host: ctx.server.host, port: ctx.server.port }] };
}

/** The servers behind `proxy`, reached through it: every connection goes through the proxy. */
export function targetThrough(proxy: FaultProxy | ClusterFaultProxy): WorkerTarget {
  if ('natMap' in proxy)
    return { kind: 'cluster', nodes: proxy.proxies.map((p) => ({ host: p.host, port: p.port })), natMap: proxy.natMap };
  return { kind: 'standalone', nodes: [{ host: proxy.host, port: proxy.port }] };
}

/** In a worker: an ioredis client for `target`. */
export function connectTarget(target: WorkerTarget, redisOptions: RedisOptions = {}, clusterOptions: ClusterOptions = {}): Redis | Cluster {
  return target.kind === 'cluster'
    ? new Cluster(target.nodes, { natMap: target.natMap, ...clusterOptions, redisOptions })
    : new Redis(target.nodes[0]!.port, target.nodes[0]!.host, redisOptions);
}
