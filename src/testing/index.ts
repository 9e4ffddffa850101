/**
 * `redis-rwlock/testing`: start real `redis-server` processes on loopback
 * ports for tests — a standalone server, a Redis Cluster (masters and
 * replicas, with failover helpers) or N independent masters — without Docker.
 *
 * Needs `redis-server` and `redis-cli` 7 or newer on PATH (or in
 * `REDIS_SERVER_BIN` / `REDIS_CLI_BIN`). Every process started here is killed
 * when the starting process exits, including on SIGINT/SIGTERM. A process that
 * listens for SIGINT/SIGTERM itself is left to stop its servers on that signal
 * (say, after its clients have released their locks); they are still killed
 * when it exits.
 *
 * @example
 * ```ts
 * import { startRedisCluster, stopAllServers } from 'redis-rwlock/testing';
 * const cluster = await startRedisCluster();   // 3 masters, 3 replicas
 * const redis = cluster.client();              // ioredis Cluster
 * // ...
 * await stopAllServers();                      // e.g. in a root afterAll hook
 * ```
 *
 * @module redis-rwlock/testing
 */

import './needs-ioredis.js'; // first: says what to install when ioredis is not

export {
  type ClusterFaultProxy,
  type DropMatch,
  type FaultProxy,
  type FaultProxyOptions,
  type FaultProxyStats,
  type ProxiedAddress,
  proxyCluster,
  respLength,
  startFaultProxy,
} from './fault-proxy.js';
export { CLUSTER_BUS_PORT_OFFSET, type FindFreePortOptions, findFreePort, findFreePorts, isPortFree, LOOPBACK_HOST } from './ports.js';
export {
  CLUSTER_SLOTS,
  type ClusterRole,
  type ClusterTls,
  DEFAULT_CLUSTER_NODE_TIMEOUT_MS,
  DEFAULT_CLUSTER_START_TIMEOUT_MS,
  DEFAULT_FAILOVER_TIMEOUT_MS,
  type FailoverOptions,
  type FailoverResult,
  type ManualFailoverOptions,
  type NodeAddress,
  type RedisClusterHandle,
  type RedisClusterNode,
  type RedisClusterOptions,
  startRedisCluster,
  type WaitForClusterOkOptions,
} from './redis-cluster.js';
export { type RedisMastersHandle, type RedisMastersOptions, startRedisMasters } from './redis-masters.js';
export {
  type AclUser,
  DEFAULT_START_TIMEOUT_MS,
  DEFAULT_STOP_TIMEOUT_MS,
  type FlushOptions,
  type RedisServerHandle,
  type RedisServerOptions,
  RedisServerStartError,
  startRedisServer,
} from './redis-server.js';
export { type RunningServerInfo, reapStaleServers, runningServers, stopAllServers } from './registry.js';
export { makeTestCertificates, type TestCertificates, type TlsEndpoint } from './tls.js';
