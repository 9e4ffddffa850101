/**
 * Runs one integration suite against every topology (node-redlock's
 * `run(name, client)` pattern): a standalone server and a 6-node Redis Cluster
 * (3 masters, 3 replicas), both real `redis-server` processes on loopback
 * ports started by `src/testing`.
 *
 * - Each shared server is started once per mocha run, lazily, by the first
 *   suite that needs it, and stopped by the root `afterAll` hook in
 *   `hooks.ts` (also when tests fail).
 * - Before each test every master is flushed (FLUSHALL), and any node a fault
 *   test left killed is restarted (paused, resumed) first, and on the Cluster
 *   the test waits until the Cluster is healthy in every node's view
 *   (`waitForClusterOk`), so one test's damage does not leak into the next.
 * - `ctx.client()` returns a fresh client; it is disconnected after the test
 *   that created it (or after the suite, if made in a `before` hook).
 * - `TEST_TOPOLOGIES=standalone` (or `cluster`, or `standalone,cluster`, the
 *   default) limits the topologies that run.
 */
import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import {
  type FlushOptions,
  type RedisClusterHandle,
  type RedisServerHandle,
  startRedisCluster,
  startRedisServer,
  stopAllServers,
} from '../../src/testing/index.js';

/** The topologies a suite runs on. */
export type TopologyKind = 'standalone' | 'cluster';

/** All topologies, in the order their suites are declared. */
export const ALL_TOPOLOGIES: readonly TopologyKind[] = ['standalone', 'cluster'];

interface ContextBase {
  /** FLUSHALL on every master (and SCRIPT FLUSH with `{ scripts: true }`); done before each test already. */
  flush(options?: FlushOptions): Promise<void>;
}

/** What a suite body gets on the standalone topology. */
export interface StandaloneContext extends ContextBase {
  readonly kind: 'standalone';
  /** A fresh `Redis` client on the shared server, disconnected after the current test (or suite). */
  client(options?: RedisOptions): Redis;
  /** The shared server, for fault tests (available from the suite's hooks and tests on). */
  readonly server: RedisServerHandle;
}

/** What a suite body gets on the Cluster topology. */
export interface ClusterContext extends ContextBase {
  readonly kind: 'cluster';
  /** A fresh `Cluster` client on the shared cluster, disconnected after the current test (or suite). */
  client(options?: ClusterOptions): Cluster;
  /** The shared cluster, for fault tests (available from the suite's hooks and tests on). */
  readonly cluster: RedisClusterHandle;
}

/** The context handed to a {@link forEachTopology} body; narrow it with `ctx.kind`. */
export type TopologyContext = StandaloneContext | ClusterContext;

let standalone: Promise<RedisServerHandle> | undefined;
let cluster: Promise<RedisClusterHandle> | undefined;

/** The shared standalone server, started on first use. */
export function sharedStandalone(): Promise<RedisServerHandle> {
  return (standalone ??= startRedisServer());
}

/** The shared 6-node cluster (3 masters, 3 replicas), started on first use. */
export function sharedCluster(): Promise<RedisClusterHandle> {
  return (cluster ??= startRedisCluster({ masters: 3, replicasPerMaster: 1 }));
}

/** Stops the shared servers (if started) and every other server this process started. Used by the root hooks. */
export async function stopSharedTopologies(): Promise<void> {
  const started = [standalone, cluster];
  standalone = undefined;
  cluster = undefined;
  await Promise.allSettled(started.map(async (handle) => (await handle)?.stop()));
  await stopAllServers();
}

/** The topologies selected by `TEST_TOPOLOGIES` (default: all). */
export function selectedTopologies(): TopologyKind[] {
  const raw = process.env.TEST_TOPOLOGIES?.trim();
  if (!raw) return [...ALL_TOPOLOGIES];
  const kinds = raw.split(',').map((s) => s.trim());
  for (const kind of kinds) {
    if (!ALL_TOPOLOGIES.includes(kind as TopologyKind))
      throw new Error(`TEST_TOPOLOGIES: unknown topology "${kind}" (use ${ALL_TOPOLOGIES.join(', ')})`);
  }
  return ALL_TOPOLOGIES.filter((k) => kinds.includes(k));
}

/**
 * Declares `describe(`${title} [standalone]`)` and `describe(`${title} [cluster]`)`,
 * each running `body` with a {@link TopologyContext} for that topology.
 *
 * @example
 * ```ts
 * forEachTopology('read-write lock', (ctx) => {
 *   it('works', async () => {
 *     const redis = ctx.client();
 *     await redis.set('k', 'v');
 *   });
 * });
 * ```
 */
export function forEachTopology(title: string, body: (ctx: TopologyContext) => void): void {
  for (const kind of selectedTopologies()) {
    describe(`${title} [${kind}]`, () => {
      const suiteClients = new Set<Redis | Cluster>();
      const testClients = new Set<Redis | Cluster>();
      let inTest = false;
      let server: RedisServerHandle | undefined;
      let clusterHandle: RedisClusterHandle | undefined;

      const remember = <C extends Redis | Cluster>(client: C): C => {
        (inTest ? testClients : suiteClients).add(client);
        return client;
      };
      const notYet = (what: string): never => {
        throw new Error(`ctx.${what} is available in hooks and tests, not while the suite is being declared`);
      };

      const ctx: TopologyContext =
        kind === 'standalone'
          ? {
              kind,
              get server() {
                return server ?? notYet('server');
              },
              client: (options?: RedisOptions) => remember((server ?? notYet('client()')).client(options)),
              flush: (options?: FlushOptions) => (server ?? notYet('flush()')).flush(options),
            }
          : {
              kind,
              get cluster() {
                return clusterHandle ?? notYet('cluster');
              },
              client: (options?: ClusterOptions) => remember((clusterHandle ?? notYet('client()')).client(options)),
              flush: (options?: FlushOptions) => (clusterHandle ?? notYet('flush()')).flush(options),
            };

      before(async function () {
        // The first suite of a run pays for starting the server or cluster.
        this.timeout(Math.max(this.timeout(), 60_000));
        if (kind === 'standalone') server = await sharedStandalone();
        else clusterHandle = await sharedCluster();
      });

      beforeEach(async function () {
        this.timeout(Math.max(this.timeout(), 60_000));
        inTest = true;
        await heal(server, clusterHandle);
        await ctx.flush();
      });

      afterEach(() => {
        inTest = false;
        closeAll(testClients);
      });

      after(() => {
        closeAll(suiteClients);
      });

      body(ctx);
    });
  }
}

/**
 * Restarts whatever a fault test left killed and resumes what it left paused,
 * so the next test starts from a healthy topology. On the Cluster it always
 * waits for `waitForClusterOk()`, also when no node was down: a test may have
 * cut a replica's link, and a node restarted by the test itself may still be
 * flagged failing in some node's view or not yet linked to its new master.
 * It returns once every node sees every other as healthy and every replica
 * is linked and caught up, or fails naming the node that is not.
 */
async function heal(server: RedisServerHandle | undefined, clusterHandle: RedisClusterHandle | undefined): Promise<void> {
  if (server) {
    if (server.running)
      await server.resume(); // in case a test left it paused
    else await server.restart();
  }
  if (clusterHandle) {
    for (const node of clusterHandle.nodes) if (node.running) await node.resume();
    await Promise.all(clusterHandle.nodes.filter((n) => !n.running).map((n) => n.restart()));
    await clusterHandle.waitForClusterOk();
  }
}

function closeAll(clients: Set<Redis | Cluster>): void {
  for (const client of clients) client.disconnect();
  clients.clear();
}
