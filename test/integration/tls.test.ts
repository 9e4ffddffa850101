/**
 * The library over TLS, as an ACL user: a standalone server and a Cluster
 * started by the testing helper with `tls: true` (certificates made for the
 * run) and the documented ACL rule as a user; the core of the library
 * (acquire, wait and be woken, extend, renewal, inspect, release,
 * force-release, fenced writes) through TLS connections only, and a client
 * that does not trust the CA refused.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { Cluster, Redis } from 'ioredis';
import type { LockRedisClient } from '../../src/clients/index.js';
import { fencedGet, fencedSet, LockClient, RedisUnavailableError } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import {
  type AclUser,
  type RedisClusterHandle,
  type RedisServerHandle,
  startRedisCluster,
  startRedisServer,
} from '../../src/testing/index.js';
import { serverHasTls } from '../setup/server.js';
import {
  disconnect,
  isNodeRedis,
  NODE_REDIS_IN_CI,
  type NodeRedisLike,
  nodeRedisClient,
  nodeRedisCluster,
  selectedClients,
} from '../setup/topologies.js';
import { glideClient, glideCluster } from '../support/glide-clients.js';
import { handOffWrite } from '../support/handoff.js';
import { rejection } from '../support/rejection.js';

/** The LockClient user of docs/operations.md, with the guarded data's keys added (the application's own). */
function documentedUser(): AclUser {
  const line = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8')
    .split('\n')
    .find((l) => l.startsWith('ACL SETUSER app '))!;
  const [, , name, on, password, ...rules] = line.split(/\s+/);
  expect(on).to.equal('on');
  return { name: name!, password: password!.slice(1), rules: [...rules, '~data:*'] };
}

interface TlsTopology {
  readonly kind: 'standalone' | 'cluster';
  /** A client of the ACL user, over TLS only. */
  client(options?: { trustCa?: boolean }): RedisClient;
  /** A node-redis client of the ACL user, over TLS only, connecting. */
  nodeRedis(kind: 'node-redis' | 'node-redis6', options?: { trustCa?: boolean }): Promise<LockRedisClient>;
  /** A GLIDE client of the ACL user, over TLS only, connected. */
  glide(): Promise<LockRedisClient>;
  /** Connections the server saw over TLS (INFO stats), summed over the nodes. */
  stop(): Promise<void>;
}

/**
 * `client`, remembered to be closed, connected; or, when it cannot be (`trusted` false), connecting:
 * node-redis keeps trying, and queues commands meanwhile.
 */
async function connecting(client: LockRedisClient & NodeRedisLike, clients: LockRedisClient[], trusted: boolean): Promise<LockRedisClient> {
  client.on('error', () => undefined);
  clients.push(client);
  const connected = client.connect();
  if (trusted) await connected;
  else connected.catch(() => undefined);
  return client;
}

async function standaloneTls(user: AclUser): Promise<TlsTopology & { server: RedisServerHandle }> {
  const server = await startRedisServer({ tls: true, users: [user] });
  const tls = server.tls!;
  const login = { username: user.name, password: user.password };
  const clients: LockRedisClient[] = [];
  return {
    kind: 'standalone',
    server,
    nodeRedis: (kind, { trustCa = true } = {}) =>
      connecting(
        nodeRedisClient(kind, {
          socket: { host: '127.0.0.1', port: tls.port, tls: true, ...(trustCa && { ca: tls.ca }) },
          username: user.name,
          password: user.password,
        }),
        clients,
        trustCa,
      ),
    glide: async () => {
      const client = await glideClient({ addresses: [{ host: '127.0.0.1', port: tls.port }], user: login, ca: tls.ca });
      clients.push(client);
      return client;
    },
    client: ({ trustCa = true } = {}) => {
      const client = new Redis({
        host: '127.0.0.1',
        port: tls.port,
        username: user.name,
        password: user.password,
        tls: trustCa ? { ca: tls.ca } : {},
        maxRetriesPerRequest: 1,
        retryStrategy: trustCa ? undefined : () => null,
      });
      client.on('error', () => undefined);
      clients.push(client);
      return client;
    },
    stop: async () => {
      for (const client of clients) disconnect(client);
      await server.stop();
    },
  };
}

async function clusterTls(user: AclUser): Promise<TlsTopology & { cluster: RedisClusterHandle }> {
  const cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 0, tls: true, users: [user] });
  const tls = cluster.tls!;
  const login = { username: user.name, password: user.password };
  const clients: LockRedisClient[] = [];
  return {
    kind: 'cluster',
    cluster,
    nodeRedis: (kind, { trustCa = true } = {}) =>
      connecting(
        nodeRedisCluster(kind, {
          rootNodes: tls.startupNodes.map((n) => ({ socket: { host: n.host, port: n.port } })),
          defaults: { socket: { tls: true, ...(trustCa && { ca: tls.ca }) }, username: user.name, password: user.password },
        }),
        clients,
        trustCa,
      ),
    glide: async () => {
      const client = await glideCluster({ addresses: tls.startupNodes, user: login, ca: tls.ca });
      clients.push(client);
      return client;
    },
    client: ({ trustCa = true } = {}) => {
      const client = new Cluster(
        tls.startupNodes.map((n) => ({ host: n.host, port: n.port })),
        {
          redisOptions: { username: user.name, password: user.password, tls: trustCa ? { ca: tls.ca } : {} },
          clusterRetryStrategy: trustCa ? undefined : () => null,
        },
      );
      client.on('error', () => undefined);
      clients.push(client);
      return client;
    },
    stop: async () => {
      for (const client of clients) disconnect(client);
      await cluster.stop();
    },
  };
}

// The servers scripts/build-servers.sh builds (TEST_SERVER=redis8, valkey9) have no TLS (BUILD_TLS=no): this
// suite is registered on Redis 7.0 and Valkey 8.0, Debian's binaries, and nowhere else (not left pending).
const tlsServer = serverHasTls();

for (const make of tlsServer ? [standaloneTls, clusterTls] : [])
  for (const clientKind of [...selectedClients(NODE_REDIS_IN_CI), ...selectedClients(['glide'])])
    describe(`over TLS as an ACL user [${make === standaloneTls ? 'standalone' : 'cluster'}${clientKind === 'ioredis' ? '' : `, ${clientKind}`}]`, function () {
      this.timeout(60_000);
      const user = documentedUser();
      let topology: TlsTopology;
      const opened: LockClient[] = [];
      before(async () => {
        topology = await make(user);
      });
      after(async () => {
        for (const locks of opened) await locks.close();
        await topology.stop();
      });
      /** A client of the suite's library. */
      const client = async (options?: { trustCa?: boolean }): Promise<LockRedisClient> =>
        clientKind === 'glide'
          ? topology.glide()
          : isNodeRedis(clientKind)
            ? topology.nodeRedis(clientKind, options)
            : topology.client(options);
      const open = async (options?: ConstructorParameters<typeof LockClient>[1]) => {
        const locks = new LockClient(await client(), options);
        opened.push(locks);
        return locks;
      };

      it('acquires, waits and is woken, renews, extends, inspects, releases and force-releases', async () => {
        const locks = await open({ leaseMs: 2_000 });
        const other = await open({ recheckMs: 20_000 }); // a grant before 20 s is the wake-up, over the TLS subscriber
        await handOffWrite(locks, other, 'job:{1}');
        expect((await other.forceRelease('job:{1}')).deleted.length).to.be.greaterThan(0);
        expect((await locks.inspect('job:{1}')).mode).to.equal('free');
        expect(locks.stats().subscriberErrors + other.stats().subscriberErrors).to.equal(0);
      });

      it('writes and reads with fences', async () => {
        const locks = await open();
        const redis = await client();
        await locks.withWrite('data:{7}', (lease) => fencedSet(redis, 'data:{7}', 'v1', lease));
        const value = await locks.withRead('data:{7}', (lease) => fencedGet(redis, 'data:{7}', lease));
        expect(value).to.equal('v1');
      });

      // GLIDE's createClient itself refuses such a server: there is no client to hand a LockClient.
      if (clientKind !== 'glide')
        it('refuses a server whose certificate it cannot check: RedisUnavailableError, nothing held', async () => {
          const locks = new LockClient(await client({ trustCa: false }), { redisTimeoutMs: 1_000 });
          try {
            const error = await rejection(locks.lock('job:{2}').acquireWrite({ waitMs: 500 }));
            expect(error).to.be.instanceOf(RedisUnavailableError);
          } finally {
            await locks.close();
          }
          expect((await (await open()).inspect('job:{2}')).mode).to.equal('free');
        });
    });
