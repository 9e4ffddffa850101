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
 * - A suite declared with `{ clients: ALL_CLIENTS }` (before its body) runs once per client
 *   library as well (`[standalone]`, `[standalone, node-redis]`, `[standalone, node-redis6]`):
 *   `ctx.lockRedis()` gives it a client of that library for its LockClients,
 *   while `ctx.client()` stays ioredis, for the test's own look at Redis.
 *   `node-redis` is node-redis 5 (the dev dependency `redis`), `node-redis6`
 *   node-redis 6 (the alias `redis6`), `glide` GLIDE 2 (`@valkey/valkey-glide`). A heavy suite runs on
 *   `ONE_NODE_REDIS` (ioredis and node-redis 5; GLIDE in CI) to keep `npm test` short, the
 *   slowest on `NODE_REDIS_IN_CI` (ioredis in `npm test`, node-redis 5 in
 *   `npm run test:clients`). Without `TEST_CLIENTS`, suites run on ioredis and
 *   node-redis 5; `npm run test:clients` (CI) runs the rest: node-redis 5 on
 *   `NODE_REDIS_IN_CI` suites, node-redis 6 and GLIDE on `ALL_CLIENTS` ones.
 *   `TEST_CLIENTS=ioredis` (or `node-redis`, `node-redis6`, `glide`, a list) chooses the libraries that run;
 *   `TEST_NODE_REDIS_IN_CI_ONLY=1` (test:clients' node-redis 5 run) runs only the `NODE_REDIS_IN_CI` suites.
 */
import { once } from 'node:events';
import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import type { LockRedisClient } from '../../src/clients/index.js';
import {
  type FlushOptions,
  type RedisClusterHandle,
  type RedisServerHandle,
  startRedisCluster,
  startRedisServer,
  stopAllServers,
} from '../../src/testing/index.js';
import { glideClient, glideCluster, isGlide } from '../support/glide-clients.js';
import { type ClientKind, nodeRedisClient, nodeRedisCluster } from '../support/node-redis-clients.js';

/** The topologies a suite runs on. */
export type TopologyKind = 'standalone' | 'cluster';

/** All topologies, in the order their suites are declared. */
export const ALL_TOPOLOGIES: readonly TopologyKind[] = ['standalone', 'cluster'];

export { type ClientKind, isNodeRedis, type NodeRedisLike, nodeRedisClient, nodeRedisCluster } from '../support/node-redis-clients.js';

/** All client libraries, in the order their suites are declared. */
export const ALL_CLIENTS: readonly ClientKind[] = ['ioredis', 'node-redis', 'node-redis6', 'glide'];

/** ioredis and one node-redis major (5), and GLIDE: for the suites too slow to run on every major. */
export const ONE_NODE_REDIS: readonly ClientKind[] = ['ioredis', 'node-redis', 'glide'];

/**
 * ioredis and node-redis 5, but `npm test` runs them on ioredis alone: the
 * slowest suites, whose node-redis runs would take `npm test` past its
 * budget. `npm run test:clients` (CI) runs them on node-redis 5.
 */
export const NODE_REDIS_IN_CI: readonly ClientKind[] = ['ioredis', 'node-redis'];

/** {@link NODE_REDIS_IN_CI}, and GLIDE in `npm run test:clients` too. */
export const NODE_REDIS_IN_CI_AND_GLIDE: readonly ClientKind[] = [...NODE_REDIS_IN_CI, 'glide'];

/** What runs when `TEST_CLIENTS` is not set (`npm test`): node-redis 6 and GLIDE run in `npm run test:clients`. */
const NPM_TEST_CLIENTS: readonly ClientKind[] = ['ioredis', 'node-redis'];

/** Options of {@link ContextBase.lockRedis}. */
export interface LockRedisOptions {
  /**
   * ioredis and GLIDE only: commands with no reply after this long fail
   * (`commandTimeout`, GLIDE's `requestTimeout`). node-redis has no such
   * option: its `timeout` covers only commands not yet sent.
   */
  commandTimeoutMs?: number;
  /** An ACL user to log in as (on every node of a Cluster). */
  user?: { username: string; password: string };
  /** The connection's name (`CLIENT SETNAME`), to find it in `CLIENT LIST`. */
  name?: string;
}

interface ContextBase {
  /** FLUSHALL on every master (and SCRIPT FLUSH with `{ scripts: true }`); done before each test already. */
  flush(options?: FlushOptions): Promise<void>;
  /** The client library of the suite's LockClients. */
  readonly clientKind: ClientKind;
  /**
   * A fresh client of {@link clientKind} on the topology, connected (a
   * Cluster: its slots known), for a LockClient; closed after the current
   * test (or suite).
   */
  lockRedis(options?: LockRedisOptions): Promise<LockRedisClient>;
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

/**
 * The client libraries a suite declared for `declared` runs on: those of
 * `TEST_CLIENTS`, or without it (`npm test`) ioredis and node-redis 5, and
 * ioredis alone for {@link NODE_REDIS_IN_CI}.
 */
export function selectedClients(declared: readonly ClientKind[] = ALL_CLIENTS): ClientKind[] {
  const raw = process.env.TEST_CLIENTS?.trim();
  let chosen: readonly string[];
  if (raw) {
    chosen = raw.split(',').map((s) => s.trim());
    for (const kind of chosen) {
      if (!ALL_CLIENTS.includes(kind as ClientKind))
        throw new Error(`TEST_CLIENTS: unknown client "${kind}" (use ${ALL_CLIENTS.join(', ')})`);
    }
  } else chosen = declared === NODE_REDIS_IN_CI || declared === NODE_REDIS_IN_CI_AND_GLIDE ? ['ioredis'] : NPM_TEST_CLIENTS;
  // test:clients' node-redis 5 run: only the suites `npm test` left to it, not those it ran on node-redis 5 already.
  if (process.env.TEST_NODE_REDIS_IN_CI_ONLY === '1' && declared !== NODE_REDIS_IN_CI && declared !== NODE_REDIS_IN_CI_AND_GLIDE) return [];
  return declared.filter((k) => chosen.includes(k));
}

/** Closes a client of either library, at once (commands in flight fail), whether or not it is still open. */
export function disconnect(client: LockRedisClient): void {
  if (isGlide(client)) client.close();
  else if (!('isOpen' in client)) (client as Redis | Cluster).disconnect();
  else if ((client as { isOpen: boolean }).isOpen) (client as unknown as { destroy(): void }).destroy();
}

/** Closes a client of either library once its commands in flight are answered (ioredis `quit()`, node-redis `close()`). */
export async function quit(client: LockRedisClient): Promise<void> {
  if (isGlide(client)) client.close();
  else if ('isOpen' in client) await (client as unknown as { close(): Promise<void> }).close();
  else await (client as Redis | Cluster).quit();
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
 * each running `body` with a {@link TopologyContext} for that topology; with
 * `clients`, once per client library too (ioredis' suites keep their titles,
 * the others add the library: `[cluster, node-redis]`).
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
export function forEachTopology(title: string, body: (ctx: TopologyContext) => void): void;
export function forEachTopology(title: string, options: { clients: readonly ClientKind[] }, body: (ctx: TopologyContext) => void): void;
export function forEachTopology(
  title: string,
  ...rest: [body: (ctx: TopologyContext) => void] | [options: { clients: readonly ClientKind[] }, body: (ctx: TopologyContext) => void]
): void {
  const [{ clients }, body] = rest.length === 1 ? [{ clients: ['ioredis'] as const }, rest[0]] : rest;
  const libraries = selectedClients(clients);
  for (const kind of selectedTopologies()) for (const clientKind of libraries) declareTopology(title, kind, clientKind, body);
}

function declareTopology(title: string, kind: TopologyKind, clientKind: ClientKind, body: (ctx: TopologyContext) => void): void {
  describe(`${title} [${kind}${clientKind === 'ioredis' ? '' : `, ${clientKind}`}]`, () => {
    const suiteClients = new Set<LockRedisClient>();
    const testClients = new Set<LockRedisClient>();
    let inTest = false;
    let server: RedisServerHandle | undefined;
    let clusterHandle: RedisClusterHandle | undefined;

    const remember = <C extends LockRedisClient>(client: C): C => {
      (inTest ? testClients : suiteClients).add(client);
      return client;
    };
    const notYet = (what: string): never => {
      throw new Error(`ctx.${what} is available in hooks and tests, not while the suite is being declared`);
    };

    const lockRedis = async ({ commandTimeoutMs, user, name }: LockRedisOptions = {}): Promise<LockRedisClient> => {
      if (clientKind === 'ioredis') {
        const options = {
          ...user,
          ...(name && { connectionName: name }),
          ...(commandTimeoutMs !== undefined && { commandTimeout: commandTimeoutMs }),
        };
        const client = kind === 'cluster' ? ctx.client({ redisOptions: options }) : ctx.client(options);
        if (client.status !== 'ready') await once(client, 'ready'); // connected, and on a Cluster the slots are known (no PING: an ACL user may lack it)
        return client;
      }
      if (clientKind === 'glide') {
        const addresses = kind === 'cluster' ? (clusterHandle ?? notYet('lockRedis()')).startupNodes : [server ?? notYet('lockRedis()')];
        const options = { addresses, user, name, requestTimeoutMs: commandTimeoutMs };
        return remember(await (kind === 'cluster' ? glideCluster(options) : glideClient(options)));
      }
      if (commandTimeoutMs !== undefined) throw new Error('lockRedis({ commandTimeoutMs }) is for ioredis and GLIDE');
      const login = { ...user, ...(name && { name }) };
      const client =
        kind === 'cluster'
          ? nodeRedisCluster(clientKind, {
              rootNodes: (clusterHandle ?? notYet('lockRedis()')).startupNodes.map((n) => ({ socket: { host: n.host, port: n.port } })),
              defaults: login,
            })
          : nodeRedisClient(clientKind, { socket: { host: (server ?? notYet('lockRedis()')).host, port: server!.port }, ...login });
      client.on('error', () => undefined); // reconnects; a test that cares looks at the LockClient's events
      remember(client);
      await client.connect();
      return client;
    };

    const ctx: TopologyContext =
      kind === 'standalone'
        ? {
            kind,
            clientKind,
            lockRedis,
            get server() {
              return server ?? notYet('server');
            },
            client: (options?: RedisOptions) => remember((server ?? notYet('client()')).client(options)),
            flush: (options?: FlushOptions) => (server ?? notYet('flush()')).flush(options),
          }
        : {
            kind,
            clientKind,
            lockRedis,
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

function closeAll(clients: Set<LockRedisClient>): void {
  for (const client of clients) disconnect(client);
  clients.clear();
}
