/**
 * node-redis 5 and 6 as the Redis client, for what the shared suites (lock,
 * liveness, bad input, several processes, redlock, legacy and bridge, run
 * per client library) do not reach: a LockClient on createClient() and
 * createCluster() results (typed: this file compiles), fenced writes and
 * force-release on them, a client not connected yet or closed, an ACL
 * refusal, replica acknowledgement (WAIT on the connection of the lock's
 * master), and what each major does with a call made as its connection
 * resets.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import {
  ClientClosedError,
  fencedGet,
  fencedSet,
  LockClient,
  type LockClientOptions,
  type LockRedisClient,
  NoPermissionError,
} from '../../src/index.js';
import { startFaultProxy } from '../../src/testing/index.js';
import { forEachTopology, nodeRedisClient, nodeRedisCluster, quit, type TopologyContext } from '../setup/topologies.js';
import { handOffWrite } from '../support/handoff.js';
import { totalKeys } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';

/** A node-redis client (of the suite's major) of the topology, not connected, logged in as `user` if given. */
function unconnected(ctx: TopologyContext, user?: { username: string; password: string }) {
  const kind = ctx.clientKind === 'node-redis6' ? 'node-redis6' : 'node-redis';
  return ctx.kind === 'standalone'
    ? nodeRedisClient(kind, { socket: { host: ctx.server.host, port: ctx.server.port }, ...user })
    : nodeRedisCluster(kind, {
        rootNodes: ctx.cluster.startupNodes.map((n) => ({ socket: { host: n.host, port: n.port } })),
        defaults: { ...user },
      });
}

/** The `app` rule of docs/operations.md ("Redis ACL"), as arguments after `ACL`. */
const APP_RULE = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8')
  .split('\n')
  .find((l) => l.startsWith('ACL SETUSER app '))!
  .split(/\s+/)
  .slice(1);

forEachTopology('node-redis as the client', { clients: ['node-redis', 'node-redis6'] }, (ctx) => {
  const opened: LockClient[] = [];
  const open = (client: LockRedisClient, options?: LockClientOptions) => {
    const locks = new LockClient(client, options);
    opened.push(locks);
    return locks;
  };
  afterEach(async () => {
    for (const locks of opened.splice(0)) await locks.close();
  });

  it('acquires, waits and is woken, extends, inspects and releases', async () => {
    const locks = open(await ctx.lockRedis(), { leaseMs: 2_000 });
    const other = open(await ctx.lockRedis(), { recheckMs: 20_000 }); // a grant before 20 s is the wake-up
    await (await handOffWrite(locks, other, 'job:{1}')).release();
    expect(locks.stats().subscriberErrors + other.stats().subscriberErrors).to.equal(0);
    expect(await totalKeys(ctx.client())).to.equal(0);
  });

  it('writes and reads with fences, and force-releases', async () => {
    const client = await ctx.lockRedis();
    const locks = open(client);
    await locks.withWrite('data:{7}', (lease) => fencedSet(client, 'data:{7}', 'v1', lease));
    expect(await locks.withRead('data:{7}', (lease) => fencedGet(client, 'data:{7}', lease))).to.equal('v1');
    await locks.lock('job:{2}').acquireWrite();
    expect((await locks.forceRelease('job:{2}')).deleted.length).to.be.greaterThan(0);
    expect((await locks.inspect('job:{2}')).mode).to.equal('free');
  });

  it('refuses a client not connected yet, and one closed, with ClientClosedError', async () => {
    const client = unconnected(ctx);
    expect(() => new LockClient(client)).to.throw(ClientClosedError, /not yet connected/);
    await client.connect();
    const locks = open(client);
    const lock = locks.lock('job:{3}');
    await (await lock.acquireWrite()).release();
    await quit(client);
    expect(await rejection(lock.acquireWrite())).to.be.instanceOf(ClientClosedError);
    expect(() => new LockClient(client)).to.throw(ClientClosedError);
  });

  it('turns an ACL refusal into NoPermissionError, writing nothing', async () => {
    const password = APP_RULE.find((a) => a.startsWith('>'))!.slice(1);
    const nodes = ctx.kind === 'standalone' ? [ctx.client()] : ctx.cluster.nodes.map((node) => node.client());
    for (const node of nodes) await node.call('ACL', ...APP_RULE);
    if (ctx.kind === 'cluster') for (const node of nodes) node.disconnect();
    const client = unconnected(ctx, { username: 'app', password });
    client.on('error', () => undefined);
    await client.connect();
    try {
      const error = await rejection(open(client, { prefix: 'other' }).lock('x').acquireWrite({ waitMs: 500 }));
      expect(error).to.be.instanceOf(NoPermissionError);
      expect(error).to.include({ permission: 'keys' });
      await (await open(client).lock('x').acquireWrite()).release(); // inside the prefix: allowed
      expect(await totalKeys(ctx.client())).to.equal(0);
    } finally {
      client.destroy();
    }
  });

  it('acknowledges a grant with WAIT on the connection of its master', async () => {
    const locks = open(await ctx.lockRedis());
    // The shared Cluster has a replica per master; the standalone server has none.
    const replicas = ctx.kind === 'cluster' ? 1 : 0;
    const lease = await locks.lock('job:{4}').acquireWrite({ replicaAck: { replicas: 1, timeoutMs: 1_000, onShortfall: 'accept' } });
    expect(lease.replicasAcked).to.equal(replicas);
    await lease.release();
  });

  // Why the fault suite's network row runs on node-redis 6, not 5 (test/faults/network.test.ts).
  if (ctx.kind === 'standalone')
    it("a call made as its connection resets: node-redis 6 sends it on the next connection, node-redis 5 gets another command's reply", async () => {
      const proxy = await startFaultProxy({ target: { port: ctx.server.port } });
      const client = nodeRedisClient(ctx.clientKind === 'node-redis6' ? 'node-redis6' : 'node-redis', {
        socket: { host: proxy.host, port: proxy.port },
      });
      client.on('error', () => undefined);
      const send = (args: string[]) => (client as unknown as { sendCommand(args: string[]): Promise<unknown> }).sendCommand(args);
      try {
        await client.connect();
        // From a timer: node-redis leaves the write to the check phase (setImmediate), and the poll phase in between
        // reads the reset first. node-redis 5 then writes the call to the dead socket, and counts it as waiting for
        // the first reply of the next connection: that of its handshake's CLIENT SETINFO.
        const call = await new Promise<{ reply: Promise<unknown> }>((resolve) =>
          setTimeout(() => {
            proxy.reset();
            resolve({ reply: send(['ECHO', 'mine']) });
          }),
        );
        const outcome = await call.reply.then(
          (value) => ({ value }),
          (error: Error) => ({ error: error.message }),
        );
        if (ctx.clientKind === 'node-redis6') {
          expect(outcome).to.deep.equal({ value: 'mine' });
          expect(await send(['ECHO', 'next'])).to.equal('next');
        } else {
          // CLIENT SETINFO's reply: an error before Redis 7.2, OK from 7.2 on.
          const setinfo = 'error' in outcome ? /SETINFO/.test(outcome.error) : outcome.value === 'OK';
          expect(setinfo, `the call's outcome: ${JSON.stringify(outcome)}`).to.equal(true);
        }
      } finally {
        client.destroy();
        await proxy.close();
      }
    });
});
