/**
 * What waiting costs in connections: one waiting LockClient adds exactly one
 * connection, its wake-up subscriber, on one server and on a 3+3 Cluster (a
 * plain connection to the master of the lock's slot, not a second Cluster
 * client with a connection to every node). Counted with CLIENT LIST on every
 * node, by the connection name the LockClient's client carries (ioredis or
 * node-redis: on a node-redis Cluster the subscriber is the Cluster's own
 * sharded pub/sub connection to that master). GLIDE's Cluster subscriber is
 * a `GlideClusterClient` of the library's own: one connection per node.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import type { LockRedisClient } from '../../src/clients/index.js';
import { ClientClosedError, LockClient } from '../../src/index.js';
import { ALL_CLIENTS, disconnect, forEachTopology, type TopologyContext } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { rejection } from '../support/rejection.js';

const NAME = 'waiter-under-test';

/** One admin connection per node of the topology, replicas included. */
function admins(ctx: TopologyContext): Redis[] {
  return ctx.kind === 'cluster' ? ctx.cluster.nodes.map((n) => n.client()) : [ctx.server.client()];
}

/** Connections named NAME on every node, with their flags (P: a subscriber). */
async function named(nodes: readonly Redis[]): Promise<string[]> {
  const lists = await Promise.all(nodes.map(async (node) => (await node.client('LIST')) as string));
  return lists.flatMap((list) =>
    list
      .split('\n')
      .filter((line) => line.includes(` name=${NAME} `))
      .map((line) => /flags=(\S+)/.exec(line)![1]!),
  );
}

/** Subscribers of shard channel `channel`, summed over the nodes (only its slot's master has any). */
async function subscribers(nodes: readonly Redis[], channel: string): Promise<number> {
  const counts = await Promise.all(
    nodes.map(async (node) => Number(((await node.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number])[1])),
  );
  return counts.reduce((a, b) => a + b, 0);
}

forEachTopology('connections', { clients: ALL_CLIENTS }, (ctx) => {
  it('a waiting LockClient adds one connection: its wake-up subscriber', async () => {
    const nodes = admins(ctx);
    const holder = new LockClient(await ctx.lockRedis());
    const locks = new LockClient(await ctx.lockRedis({ name: NAME }), { recheckMs: 10_000 });
    try {
      const lease = await holder.lock('conn').acquireWrite();
      await locks.inspect('conn'); // the client's own connection to the lock's node exists
      const before = await named(nodes);
      expect(
        before.every((flags) => !flags.includes('P')),
        'no subscriber yet',
      ).to.equal(true);

      const waiting = locks.lock('conn').acquireWrite({ waitMs: 20_000 });
      waiting.catch(() => undefined); // a failed check below closes the client under it
      const channel = locks.lock('conn').keys.channel;
      await eventually("the writer to subscribe to its lock's wake-ups", async () => (await subscribers(nodes, channel)) === 1);
      const during = await named(nodes);
      const added = ctx.clientKind === 'glide' && ctx.kind === 'cluster' ? nodes.length : 1;
      expect(during.length - before.length, `connections named ${NAME}: ${before.join(' ')} -> ${during.join(' ')}`).to.equal(added);
      expect(during.filter((flags) => flags.includes('P'))).to.have.length(1);

      await lease.release();
      await (await waiting).release();
    } finally {
      await locks.close();
      await holder.close();
      for (const node of nodes) node.disconnect();
    }
  });
});

/** A client of the suite's library whose connections (and their duplicates) carry the name NAME. */
async function namedClient(ctx: TopologyContext): Promise<LockRedisClient> {
  if (ctx.clientKind === 'glide') return ctx.lockRedis({ name: NAME });
  if (ctx.clientKind === 'ioredis') {
    const client = ctx.kind === 'cluster' ? ctx.client({ redisOptions: { connectionName: NAME } }) : ctx.client({ connectionName: NAME });
    await client.ping();
    return client;
  }
  if (ctx.kind === 'cluster') {
    const rootNodes = ctx.cluster.startupNodes.map((n) => ({ socket: { host: n.host, port: n.port } }));
    return (await createCluster({ rootNodes, defaults: { name: NAME } }).connect()) as unknown as LockRedisClient;
  }
  return (await createClient({
    socket: { host: ctx.server.host, port: ctx.server.port },
    name: NAME,
  }).connect()) as unknown as LockRedisClient;
}

forEachTopology('connections', { clients: ALL_CLIENTS }, (ctx) => {
  it("the wake-up subscriber ends with the user's client, even when the LockClient is never closed", async () => {
    const nodes = admins(ctx);
    const holder = new LockClient(ctx.client());
    const redis = await namedClient(ctx);
    const locks = new LockClient(redis, { recheckMs: 100 });
    try {
      const lease = await holder.lock('conn-end').acquireWrite();
      const channel = locks.lock('conn-end').keys.channel;
      const waiting = rejection(locks.lock('conn-end').acquireWrite({ waitMs: 20_000 }));
      await eventually("the writer to subscribe to its lock's wake-ups", async () => (await subscribers(nodes, channel)) === 1);
      disconnect(redis); // closed under a waiting LockClient, which is never closed
      expect(await waiting).to.be.instanceOf(ClientClosedError);
      await eventually(`no connection named ${NAME} to be left`, async () => (await named(nodes)).length === 0);
      await lease.release();
    } finally {
      await holder.close();
      for (const node of nodes) node.disconnect();
    }
  });
  it("a closed LockClient leaves no listener on the user's client, and no timer", async () => {
    const redis = await namedClient(ctx);
    // GLIDE's client is no event emitter: it has no listeners to leave.
    const emitter = redis as unknown as { listenerCount?(event: string): number };
    const listeners = emitter.listenerCount?.('end');
    const timers = () => process.getActiveResourcesInfo().filter((type) => type === 'Timeout').length;
    const before = timers();
    const holder = new LockClient(ctx.client());
    const lease = await holder.lock('conn-listeners').acquireWrite();
    for (let i = 0; i < 3; i++) {
      const locks = new LockClient(redis, { recheckMs: 10_000 });
      const waiting = rejection(locks.lock('conn-listeners').acquireWrite({ waitMs: 20_000 }));
      await eventually('the writer to wait', async () => (await holder.inspect('conn-listeners')).queue.length === 1);
      await locks.close();
      expect(await waiting).to.be.instanceOf(ClientClosedError);
    }
    expect(emitter.listenerCount?.('end'), "'end' listeners on the user's client").to.equal(listeners);
    await lease.release();
    await holder.close();
    disconnect(redis);
    await eventually('no timer of the closed LockClients to be left', () => timers() <= before, 2_000);
  });
});
