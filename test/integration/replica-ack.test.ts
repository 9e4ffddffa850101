/**
 * Replica acknowledgement (`replicaAck`: WAIT after a grant) on a real
 * Cluster whose master is killed right after a grant: with acknowledgement
 * the promoted replica has the lock; without it, a grant the replica never
 * received is lost in the failover and a second writer gets the lock too.
 * The loss is made certain, not left to timing: the replica is frozen
 * (SIGSTOP) and its replication link cut (CLIENT KILL TYPE replica) before the
 * grant, so the write cannot reach it.
 */
import { expect } from 'chai';
import { holderArg, runScript } from '../../src/backends/scripts.js';
import { driverFor, type LockRedisClient } from '../../src/clients/index.js';
import { LockClient, type LockClientOptions, RedisUnavailableError, ReplicaAckError } from '../../src/index.js';
import { withAdminConnection } from '../../src/testing/admin.js';
import type { RedisClusterHandle, RedisClusterNode, RedisServerHandle } from '../../src/testing/index.js';
import {
  ALL_CLIENTS,
  type ClientKind,
  disconnect,
  isNodeRedis,
  NODE_REDIS_IN_CI_AND_GLIDE,
  nodeRedisClient,
  nodeRedisCluster,
  selectedClients,
  sharedCluster,
  sharedStandalone,
} from '../setup/topologies.js';
import { glideClient, glideCluster } from '../support/glide-clients.js';
import { rejection } from '../support/rejection.js';

/** WAIT calls a server has served so far. */
async function waitCalls(port: number): Promise<number> {
  const info = await withAdminConnection(port, (conn) => conn.info('commandstats'));
  return Number(/^cmdstat_wait:calls=(\d+)/m.exec(info)?.[1] ?? 0);
}

/** A connected client of `kind` on the server at `port` (node-redis and GLIDE: its own; ioredis: the handle's). */
async function connected(
  kind: ClientKind,
  ioredis: () => LockRedisClient,
  nodeRedis: () => ReturnType<typeof nodeRedisClient>,
  glide?: () => Promise<LockRedisClient>,
) {
  if (kind === 'glide') return glide!();
  if (!isNodeRedis(kind)) return ioredis();
  const client = nodeRedis();
  client.on('error', () => undefined); // failovers are the tests' doing
  await client.connect();
  return client;
}

// Failovers are slow: ioredis and one node-redis major.
for (const clientKind of selectedClients(NODE_REDIS_IN_CI_AND_GLIDE))
  describe(`replica acknowledgement [cluster${clientKind === 'ioredis' ? '' : `, ${clientKind}`}]`, function () {
    this.timeout(90_000);
    let cluster: RedisClusterHandle;
    const clients = new Set<LockRedisClient>();
    const lockClients = new Set<LockClient>();
    const open = async (options?: LockClientOptions): Promise<LockClient> => {
      const redis = await connected(
        clientKind,
        () => cluster.client(),
        () =>
          nodeRedisCluster(clientKind as 'node-redis', {
            rootNodes: cluster.startupNodes.map((n) => ({ socket: { host: n.host, port: n.port } })),
          }),
        () => glideCluster({ addresses: cluster.startupNodes }),
      );
      clients.add(redis);
      const locks = new LockClient(redis, options);
      lockClients.add(locks);
      return locks;
    };

    /** Restarts killed nodes, resumes frozen ones and waits until the cluster is whole again. */
    async function heal(): Promise<void> {
      for (const node of cluster.nodes) if (node.running) await node.resume();
      const down = cluster.nodes.filter((n) => !n.running);
      await Promise.all(down.map((n) => n.restart()));
      await cluster.waitForClusterOk();
    }

    /** The master of `key`'s slot and its replica, the replica frozen and cut off so no write reaches it. */
    async function cutReplication(key: string): Promise<{ master: RedisClusterNode; replica: RedisClusterNode }> {
      const master = await cluster.masterForKey(key);
      const [replica] = await cluster.replicasOf(master.port);
      if (!replica) throw new Error(`master ${master.port} has no replica`);
      await replica.pause();
      await withAdminConnection(master.port, (conn) => conn.call('CLIENT', 'KILL', 'TYPE', 'replica'));
      return { master, replica };
    }

    before(async function () {
      this.timeout(120_000);
      cluster = await sharedCluster();
    });
    beforeEach(async function () {
      this.timeout(120_000);
      await heal();
      await cluster.flush();
    });
    afterEach(async function () {
      this.timeout(120_000);
      await Promise.allSettled([...lockClients].map((l) => l.close()));
      lockClients.clear();
      for (const c of clients) disconnect(c);
      clients.clear();
      await heal();
    });

    it('with replicaAck, a write grant survives the failover of its master: the promoted replica has it', async () => {
      const locks = await open({ replicaAck: { replicas: 1, timeoutMs: 2_000 } });
      const lock = locks.lock('invoice:7');
      const lease = await lock.acquireWrite({ leaseMs: 60_000 });
      expect(lease.replicasAcked).to.equal(1);
      const master = await cluster.masterForKey(lock.keys.state);
      const { promoted } = await cluster.killMaster(master.port);

      // A free lock's sole holder: '<w|r> <holdId> <owner>' in `o` (lua/includes/fresh-grant.lua).
      const onPromoted = await withAdminConnection(promoted.port, (conn) => conn.hget(lock.keys.state, 'o'));
      expect(onPromoted)
        .to.match(/^w \S+ /)
        .and.to.satisfy((sole: string) => sole.endsWith(` ${lease.token}`));
      const other = await open();
      expect(await other.lock('invoice:7').tryAcquireWrite()).to.equal(null);
      expect((await other.inspect('invoice:7')).writer?.owner).to.equal(lease.token);
      if (isNodeRedis(clientKind)) {
        // node-redis refreshes a Cluster's slot map on a MOVED reply, not when a master's connection is
        // lost: the client that was connected to the killed master keeps sending its slots there, so
        // its calls fail after redisTimeoutMs, typed and retryable (README: the client table).
        const error = await rejection(lease.release());
        expect(error).to.be.instanceOf(RedisUnavailableError);
        expect(error.message).to.match(/did not answer within \d+ ms/);
        expect((await other.inspect('invoice:7')).writer?.owner, 'still held on the new master').to.equal(lease.token);
        return;
      }
      await lease.release(); // the lease is still good on the new master
      expect(await other.lock('invoice:7').tryAcquireWrite()).to.not.equal(null);
    });

    it('without replicaAck, a grant the replica never received is lost in the failover, and a second writer gets the lock', async () => {
      const locks = await open();
      const lock = locks.lock('invoice:8');
      const { master, replica } = await cutReplication(lock.keys.state);
      const lease = await lock.acquireWrite({ leaseMs: 60_000 });
      expect(lease.replicasAcked).to.equal(undefined);
      // The master dies right after the grant; its replica, thawed, takes over without the write.
      await cluster.killNode(master.port);
      await replica.resume();
      await cluster.waitForClusterOk();
      expect(replica.role).to.equal('master');

      expect(await withAdminConnection(replica.port, (conn) => conn.exists(lock.keys.state))).to.equal(0);
      const second = await (await open()).lock('invoice:8').tryAcquireWrite({ leaseMs: 60_000 });
      expect(second, 'a second writer').to.not.equal(null);
      expect(lease.held, 'the first writer still believes it holds the lock').to.equal(true);
      expect(second!.fence).to.be.greaterThan(lease.fence); // a fenced store would still refuse the first writer
    });

    it("with replicaAck and the same cut link, the grant is released and refused ('release') or reported ('accept')", async () => {
      const locks = await open();
      const lock = locks.lock('invoice:9');
      const { master } = await cutReplication(lock.keys.state);

      const error = await rejection(lock.acquireWrite({ replicaAck: { replicas: 1, timeoutMs: 300 } }));
      expect(error).to.be.instanceOf(ReplicaAckError);
      expect(error).to.include({ replicas: 1, acked: 0, timeoutMs: 300, resource: 'invoice:9', mode: 'write' });
      expect(error.message).to.match(/only 0 of the 1 replicas/);
      expect(await withAdminConnection(master.port, (conn) => conn.exists(lock.keys.state))).to.equal(0);

      const accepted = await lock.acquireWrite({ replicaAck: { replicas: 1, timeoutMs: 300, onShortfall: 'accept' } });
      expect(accepted.replicasAcked).to.equal(0);
      expect((await lock.inspect()).writer?.owner).to.equal(accepted.token);
      await accepted.release();
    });

    it("sends WAIT to the master of the lock's slot, and no WAIT at all when not asked", async () => {
      const locks = await open();
      const lock = locks.lock('invoice:10');
      const master = await cluster.masterForKey(lock.keys.state);
      const masters = await cluster.masters();
      const before = await Promise.all(masters.map((m) => waitCalls(m.port)));
      await (await lock.acquireWrite()).release();
      await (await lock.acquireRead()).release();
      expect(await Promise.all(masters.map((m) => waitCalls(m.port)))).to.deep.equal(before);
      const lease = await lock.acquireRead({ replicaAck: { replicas: 1, timeoutMs: 1_000 } });
      expect(lease.replicasAcked).to.equal(1);
      await lease.release();
      const after = await Promise.all(masters.map((m) => waitCalls(m.port)));
      masters.forEach((m, i) => expect(after[i]! - before[i]!).to.equal(m.port === master.port ? 1 : 0));
    });
  });

for (const clientKind of selectedClients(ALL_CLIENTS))
  describe(`replica acknowledgement [standalone${clientKind === 'ioredis' ? '' : `, ${clientKind}`}]`, () => {
    let server: RedisServerHandle;
    let redis: LockRedisClient;
    before(async () => {
      server = await sharedStandalone();
    });
    beforeEach(async () => {
      if (!server.running) await server.restart();
      await server.flush();
      redis = await connected(
        clientKind,
        () => server.client(),
        () => nodeRedisClient(clientKind as 'node-redis', { socket: { host: server.host, port: server.port } }),
        () => glideClient({ addresses: [server] }),
      );
    });
    afterEach(() => disconnect(redis));

    it('a server without replicas acknowledges nothing: the grant is released, or reported with 0', async () => {
      const locks = new LockClient(redis, { replicaAck: { replicas: 1, timeoutMs: 50 } });
      const lock = locks.lock('solo');
      expect(await rejection(lock.acquireWrite())).to.be.instanceOf(ReplicaAckError);
      // A try asks too, and fails the same way: the lock was free, so not null but the shortfall.
      expect(await rejection(lock.tryAcquireWrite())).to.be.instanceOf(ReplicaAckError);
      expect((await lock.inspect()).mode).to.equal('free');
      const lease = await lock.acquireWrite({ replicaAck: { replicas: 1, timeoutMs: 50, onShortfall: 'accept' } });
      expect(lease.replicasAcked).to.equal(0);
      await lease.release();
      const before = await waitCalls(server.port);
      const plain = await lock.acquireWrite({ replicaAck: false }); // the client's setting, turned off for one call
      expect(plain.replicasAcked).to.equal(undefined);
      await plain.release();
      expect(await waitCalls(server.port)).to.equal(before);
      await locks.close();
    });

    it('a write grant confirmed again (a handed hold, with replicaAck) writes, so the WAIT after it counts the grant', async () => {
      // Redis 7.2+ moves a client's replication offset, which WAIT waits for, only for commands
      // that propagated something; 7.0 shows it by the server's count of changes (dirty).
      const changes = async () =>
        Number(/^rdb_changes_since_last_save:(\d+)/m.exec(await withAdminConnection(server.port, (conn) => conn.info('persistence')))?.[1]);
      const driver = driverFor(redis)!;
      const locks = new LockClient(redis);
      const { state, leases, queue } = locks.lock('confirm').keys;
      const acquire = () =>
        runScript(driver, 'acquireWrite', [state, leases, queue], [10_000, holderArg('write', 'c.1', 'w'), 1_000, '0h']);
      const first = await acquire();
      await acquire(); // the fresh grant's hold moves to the usual layout (a write of its own)
      const before = await changes();
      const again = await acquire();
      expect(Array.isArray(again) ? again[1] : again, 'the same grant').to.equal(first);
      expect(await changes(), 'changes written by the confirming call').to.be.greaterThan(before);
      await locks.close();
    });

    it('refuses bad replicaAck options', async () => {
      expect(() => new LockClient(redis, { replicaAck: { replicas: 0, timeoutMs: 10 } })).to.throw(/replicaAck.replicas/);
      expect(() => new LockClient(redis, { replicaAck: { replicas: 1 } as never })).to.throw(/replicaAck.timeoutMs/);
      expect(() => new LockClient(redis, { replicaAck: { replicas: 1, timeoutMs: 0 } })).to.throw(/replicaAck.timeoutMs/);
      expect(() => new LockClient(redis, { replicaAck: { replicas: 1, timeoutMs: 5, onShortfall: 'ignore' as never } })).to.throw(
        /onShortfall/,
      );
      const locks = new LockClient(redis);
      expect(await rejection(locks.lock('x').acquireWrite({ replicaAck: { replicas: 1, timeoutMs: 5, extra: 1 } as never })))
        .to.have.property('message')
        .that.matches(/unknown option "extra"/);
      await locks.close();
    });
  });
