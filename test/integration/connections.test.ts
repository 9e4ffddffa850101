/**
 * What waiting costs in connections: one waiting LockClient adds exactly one
 * connection, its wake-up subscriber, on one server and on a 3+3 Cluster (a
 * plain connection to the master of the lock's slot, not a second Cluster
 * client with a connection to every node). Counted with CLIENT LIST on every
 * node, by the connection name the LockClient's ioredis client carries.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { LockClient } from '../../src/index.js';
import { forEachTopology, type TopologyContext } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';

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

forEachTopology('connections', (ctx) => {
  it('a waiting LockClient adds one connection: its wake-up subscriber', async () => {
    const nodes = admins(ctx);
    const holder = new LockClient(ctx.client());
    const redis = ctx.kind === 'cluster' ? ctx.client({ redisOptions: { connectionName: NAME } }) : ctx.client({ connectionName: NAME });
    const locks = new LockClient(redis, { recheckMs: 10_000 });
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
      expect(during.length - before.length, `connections named ${NAME}: ${before.join(' ')} -> ${during.join(' ')}`).to.equal(1);
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
