/**
 * `redlock` mode against N independent redis-server processes started by the
 * harness (startRedisMasters): majority grants, node failures (SIGKILL,
 * SIGSTOP, data loss), loss signals, read/write conflicts across majorities,
 * clean-up of failed attempts, wake-ups, bad input. On ioredis nodes, and
 * (3 servers; a Cluster and two servers) on node-redis and GLIDE nodes.
 */

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { holderArg, runScript } from '../../src/backends/scripts.js';
import { driverFor, type LockRedisClient } from '../../src/clients/index.js';
import { InvalidArgumentError, type Lease, LockClient, type LockClientOptions, LockLostError, QuorumError } from '../../src/index.js';
import { type RedisClusterHandle, type RedisMastersHandle, startFaultProxy, startRedisMasters } from '../../src/testing/index.js';
import { type ClientKind, disconnect, NODE_REDIS_IN_CI_AND_GLIDE, selectedClients, sharedCluster } from '../setup/topologies.js';
import { bundled } from '../support/bundled.js';
import { eventually } from '../support/eventually.js';
import { glideClient, glideCluster } from '../support/glide-clients.js';
import { queueWriters } from '../support/queued-writers.js';
import { scriptCalls } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';

const REDLOCK_WRITER = fileURLToPath(new URL('../workers/redlock-writer.ts', import.meta.url));
const SHIFTED_CLOCK = fileURLToPath(new URL('../workers/shifted-clock.mjs', import.meta.url));

/**
 * A node-redis client of `server`, connecting: node-redis queues commands
 * until it is connected, and keeps trying while the server is down.
 */
function nodeRedisOf(server: { host: string; port: number }) {
  const client = createClient({ socket: { host: server.host, port: server.port } });
  client.on('error', () => undefined); // killed servers are part of the tests
  client.connect().catch(() => undefined);
  return client;
}

/**
 * A GLIDE client of `server`. `createClient` refuses a server that is down or
 * paused, and a redlock LockClient must start with a minority of its servers
 * so: `lazyConnect`, and a PING (up to 1 s) to connect now where the server
 * answers, as ioredis and node-redis start connecting when made.
 */
async function glideOf(server: { host: string; port: number }): Promise<LockRedisClient> {
  const client = await glideClient({ addresses: [{ host: server.host, port: server.port }], lazyConnect: true });
  const ping = (client as unknown as { customCommand(args: string[]): Promise<unknown> }).customCommand(['PING']);
  await Promise.race([ping.catch(() => undefined), sleep(1_000)]);
  return client;
}

function suite(n: number, clientKind: ClientKind = 'ioredis'): void {
  describe(`redlock mode [${n} independent servers${clientKind === 'ioredis' ? '' : `, ${clientKind}`}]`, function () {
    this.timeout(30_000);
    let masters: RedisMastersHandle;
    /** One admin connection per server, for looking at keys. */
    let admin: Redis[];
    const clients = new Set<LockRedisClient>();
    const lockClients = new Set<LockClient>();

    /** A redlock LockClient on fresh connections to every server, of the suite's client library. */
    const open = async (options: LockClientOptions = {}): Promise<LockClient> => {
      const nodes: LockRedisClient[] =
        clientKind === 'ioredis'
          ? masters.clients()
          : clientKind === 'glide'
            ? await Promise.all(masters.servers.map(glideOf))
            : masters.servers.map(nodeRedisOf);
      for (const c of nodes) {
        if (clientKind === 'ioredis') (c as Redis).on('error', () => undefined); // killed servers are part of the tests
        clients.add(c);
      }
      const locks = new LockClient(nodes, { mode: 'redlock', redlock: { nodeTimeoutMs: 200 }, ...options });
      lockClients.add(locks);
      return locks;
    };
    const keysOn = async (i: number): Promise<string[]> => (await admin[i]!.keys('*')).sort();
    const keyCounts = () => Promise.all(admin.map((a) => a.dbsize()));
    const quorum = Math.floor(n / 2) + 1;
    /** An acquire returns once a majority granted; the other nodes' grants follow. */
    // An acquire returns on a majority's grants; the last node's comes when it comes (a loaded machine).
    const onEveryNode = () => eventually('the lock on every node', async () => (await keyCounts()).every((c) => c > 0));
    /** A release returns once a majority released; the other nodes' releases follow. */
    const offEveryNode = () => eventually('every node to be empty', async () => (await keyCounts()).every((c) => c === 0));

    before(async function () {
      this.timeout(60_000);
      masters = await startRedisMasters(n);
      admin = masters.clients();
      for (const a of admin) a.on('error', () => undefined);
    });
    after(async () => {
      for (const a of admin ?? []) a.disconnect();
      await masters?.stop();
    });
    beforeEach(async () => {
      for (const s of masters.servers) {
        if (!s.running) await s.restart();
        else await s.resume();
      }
      await masters.flush();
    });
    afterEach(async () => {
      await Promise.allSettled([...lockClients].map((l) => l.close()));
      lockClients.clear();
      for (const c of clients) disconnect(c);
      clients.clear();
      for (const s of masters.servers) if (s.running) await s.resume();
    });

    it('grants on every node, with the same keys, and releases everywhere', async () => {
      const locks = await open();
      const lease = await locks.lock('report').acquireWrite();
      // The acquire returns once a majority granted; the rest follow.
      await onEveryNode();
      const keys = await Promise.all(masters.servers.map((_, i) => keysOn(i)));
      // A sole holder lives in the lock's hash alone.
      for (const k of keys) expect(k).to.deep.equal(['rwlock:{report}']);
      const info = await locks.inspect('report');
      expect(info.writer?.owner).to.equal(lease.token);
      expect(info.nodes).to.have.length(n);
      expect(info.fence).to.equal(Math.max(...info.nodes!.map((v) => v!.fence!)));
      // The lease's fence is the highest of the majority that answered first.
      expect(lease.fence).to.be.at.most(info.fence!);
      expect(info.nodes!.map((v) => v!.fence)).to.include(lease.fence);
      await lease.release();
      await offEveryNode();
    });

    it(`keeps mutual exclusion with ${n - quorum} server(s) killed`, async () => {
      for (const s of masters.servers.slice(0, n - quorum)) await s.kill('SIGKILL');
      const [a, b] = await Promise.all([open(), open()]);
      const held = await a.lock('account').acquireWrite();
      expect(await b.lock('account').tryAcquireWrite()).to.equal(null);
      expect(await b.lock('account').tryAcquireRead()).to.equal(null);
      await held.release();
      const reads = await Promise.all([a.lock('account').acquireRead(), b.lock('account').acquireRead()]);
      expect(await b.lock('account').tryAcquireWrite()).to.equal(null);
      await Promise.all(reads.map((r) => r.release()));

      // Several clients race for the write lock, waiting for each other: never two inside at once.
      const racers = [a, b, await open()];
      let inside = 0;
      let most = 0;
      let done = 0;
      await Promise.all(
        racers.map(async (locks) => {
          for (let k = 0; k < 4; k++) {
            await locks.withWrite(
              'account',
              async () => {
                inside++;
                most = Math.max(most, inside);
                await sleep(15);
                inside--;
                done++;
              },
              { waitMs: 20_000 },
            );
          }
        }),
      );
      expect(most).to.equal(1);
      expect(done).to.equal(12);
    });

    it('refuses with a QuorumError that names each node and why, when a majority is down', async () => {
      const down = masters.servers.slice(0, n - quorum + 1);
      for (const s of down) await s.kill('SIGKILL');
      const locks = await open();
      const error = await rejection(locks.lock('ledger').acquireWrite({ waitMs: 2_000 }));
      expect(error).to.be.instanceOf(QuorumError);
      const q = error as QuorumError;
      expect(q.quorum).to.equal(quorum);
      expect(q.nodes).to.have.length(n);
      down.forEach((s, i) => {
        expect(q.nodes[i]!.address).to.equal(`127.0.0.1:${s.port}`);
        expect(q.nodes[i]!.outcome).to.be.oneOf(['error', 'timeout']);
      });
      for (const node of q.nodes.slice(down.length)) expect(node.outcome).to.equal('ok');
      expect(q.message)
        .to.match(new RegExp(`needs a majority, ${quorum} of ${n} Redis nodes`))
        .and.to.include(`127.0.0.1:${down[0]!.port}`);
      // What the live nodes granted was taken back.
      for (let i = down.length; i < n; i++) expect(await keysOn(i)).to.deep.equal([]);
    });

    it('reports a lease lost once a majority of its nodes lost it (data gone, as after a restart without persistence)', async () => {
      const locks = await open({ leaseMs: 600 });
      const lease = await locks.lock('job').acquireWrite();
      // The acquire returns once a majority granted: a flush that came before the last node's
      // grant would leave a majority holding it, and the lease rightly not lost.
      await onEveryNode();
      const lost = new Promise<unknown>((resolve) => lease.signal.addEventListener('abort', () => resolve(lease.signal.reason)));
      await Promise.all(admin.slice(0, quorum).map((a) => a.flushall()));
      const reason = await Promise.race([lost, sleep(2_000).then(() => 'not lost')]);
      expect(reason).to.be.instanceOf(LockLostError);
      expect(lease.held).to.equal(false);
      // The minority that still held it lets go too.
      await offEveryNode();
    });

    it('reports a lease lost once a majority of its nodes are killed', async () => {
      const locks = await open({ leaseMs: 600 });
      const lease = await locks.lock('job').acquireWrite();
      const started = performance.now();
      const lost = new Promise<unknown>((resolve) => lease.signal.addEventListener('abort', () => resolve(lease.signal.reason)));
      for (const s of masters.servers.slice(0, quorum)) await s.kill('SIGKILL');
      const reason = await Promise.race([lost, sleep(3_000).then(() => 'not lost')]);
      expect(reason).to.be.instanceOf(LockLostError);
      expect(performance.now() - started).to.be.below(600 + 200);
    });

    it('keeps a lease while a majority renews it, with the other nodes down', async () => {
      // Renewed every 333 ms: a round held up by a starved event loop does not lose it (with 450 ms
      // it did, on a loaded machine, while the other client below connected: rightly lost).
      const locks = await open({ leaseMs: 1_000 });
      const lease = await locks.lock('job').acquireWrite();
      for (const s of masters.servers.slice(0, n - quorum)) await s.kill('SIGKILL');
      const killedAt = performance.now();
      const renewed = locks.stats().renewals;
      // Kept by renewals with the dead nodes timing out: past the lease its grant gave.
      await eventually(
        'three renewals, and the first lease over',
        () => locks.stats().renewals >= renewed + 3 && performance.now() - killedAt > 1_000,
      );
      expect(lease.held).to.equal(true);
      expect(await (await open()).lock('job').tryAcquireRead()).to.equal(null);
      expect(lease.held).to.equal(true);
      await lease.release();
    });

    it('keeps the lock through the restart of a minority of its nodes without persistence', async () => {
      const locks = await open({ leaseMs: 1_000 }); // renewed every 333 ms: a slow round on a loaded machine does not lose it
      const lease = await locks.lock('job').acquireWrite();
      await onEveryNode();
      for (const s of masters.servers.slice(0, n - quorum)) await s.restart(); // back empty
      expect(await (await open()).lock('job').tryAcquireWrite()).to.equal(null);
      await sleep(1_100); // renewals: the restarted nodes no longer hold it, a majority still does
      expect(lease.held).to.equal(true);
      expect(await (await open()).lock('job').tryAcquireRead()).to.equal(null);
      await lease.release();
    });

    it('loses the lock when a majority restarts without persistence: a second holder gets it before the first learns of it', async () => {
      const first = await (await open()).lock('job').acquireWrite({ leaseMs: 10_000 }); // not renewed: it learns at its next extend
      await onEveryNode();
      for (const s of masters.servers.slice(0, quorum)) await s.restart(); // back empty, at once (no delayed restart)
      const second = await (await open()).lock('job').tryAcquireWrite();
      expect(second, 'a second writer').to.not.equal(null);
      expect(first.held, 'the first writer has not heard yet').to.equal(true);
      // Its connections to the restarted nodes may still be reconnecting: undecided (QuorumError) until they are back.
      let error: Error | undefined;
      await eventually('a decided extend', async () => !((error = await rejection(first.extend())) instanceof QuorumError), 5_000);
      expect(error).to.be.instanceOf(LockLostError);
      expect(first.signal.aborted).to.equal(true);
      await second!.release();
    });

    if (n === 3) {
      it('renews each lease on its own: one left undecided by a hung node does not cost the leases a majority renewed', async () => {
        // Renewed every 500 ms: a loaded machine's late timer does not let lease 2 run out.
        const locks = await open({ leaseMs: 1_500 });
        const one = await locks.lock('one').acquireWrite();
        await onEveryNode();
        await masters.servers[1]!.restart(); // node B comes back without lease 1
        const two = await locks.lock('two').acquireWrite();
        await eventually(
          'lease 2 on every node',
          async () => (await Promise.all(admin.map((a) => a.exists('rwlock:{two}')))).every((e) => e === 1),
          2_000,
        );
        await masters.servers[2]!.pause(); // node C answers nothing: lease 1 is undecided (A holds it, B not)
        await eventually('lease 1 to be reported lost at its deadline', () => !one.held, 5_000);
        await sleep(1_000); // two renewal rounds go on with C hung
        expect(two.held, 'lease 2, renewed by A and B').to.equal(true);
        expect(two.signal.aborted).to.equal(false);
        await masters.servers[2]!.resume();
        await two.release();
      });

      it('acknowledges grants per node with replicaAck', async () => {
        // These servers have no replicas: every node falls short.
        const locks = await open({ replicaAck: { replicas: 1, timeoutMs: 20 } });
        const error = await rejection(locks.lock('acked').acquireWrite({ waitMs: 0 }));
        expect(error).to.be.instanceOf(QuorumError);
        expect((error as QuorumError).nodes.map((x) => x.outcome)).to.deep.equal(['error', 'error', 'error']);
        expect((error as QuorumError).nodes[0]!.reason).to.match(/only 0 of the 1 replicas/);
        await offEveryNode(); // each node gave its grant back
        const lease = await locks.lock('acked').acquireWrite({ replicaAck: { replicas: 1, timeoutMs: 20, onShortfall: 'accept' } });
        expect(lease.replicasAcked).to.equal(0);
        await lease.release();
      });
    }

    it('detects a read/write conflict across majorities: a writer on one majority, a reader reaching another', async () => {
      const writer = await open();
      const w = await writer.lock('doc').acquireWrite();
      await onEveryNode();
      // The last node forgets the write lock (restart without persistence): it is held on the first quorum only.
      await admin[n - 1]!.flushall();
      // The reader reaches only the nodes from the second on: the first is frozen.
      await masters.servers[0]!.pause();
      const reader = await open();
      expect(await reader.lock('doc').tryAcquireRead()).to.equal(null);
      expect(await admin[n - 1]!.dbsize()).to.equal(0); // what the reader got on the last node was given back
      await masters.servers[0]!.resume();
      await w.release();

      // And the other way round: readers on a majority, a writer that reaches another one.
      const r = await reader.lock('doc').acquireRead();
      await onEveryNode();
      await admin[n - 1]!.flushall();
      await masters.servers[0]!.pause();
      expect(await writer.lock('doc').tryAcquireWrite()).to.equal(null);
      expect(await admin[n - 1]!.dbsize()).to.equal(0);
      await masters.servers[0]!.resume();
      await r.release();
    });

    it('leaves no keys on any node after a failed attempt, a try or a wait that times out', async () => {
      const x = await open();
      const held = await x.lock('slot').acquireWrite();
      await onEveryNode();
      await admin[n - 1]!.flushall(); // held on the first n-1 nodes only, free on the last
      // Only x's hold is left anywhere: nothing on the last node, x alone (no waiter, no reader) on the others.
      // (A refused attempt may move x from the hash alone into the leases zset: the same hold.)
      const onlyX = async () => {
        const keys = await Promise.all(admin.map((_, i) => keysOn(i)));
        expect(keys[n - 1]).to.deep.equal([]);
        for (const k of keys.slice(0, n - 1)) expect(k.filter((name) => name !== 'rwlock#leases:{slot}')).to.deep.equal(['rwlock:{slot}']);
        const info = await x.inspect('slot');
        expect(info.writer?.owner).to.equal(held.token);
        expect(info.readers).to.deep.equal([]);
        expect(info.queue).to.deep.equal([]);
      };
      await onlyX();
      const y = await open();
      expect(await y.lock('slot').tryAcquireWrite()).to.equal(null);
      await onlyX();
      expect(await rejection(y.lock('slot').acquireWrite({ waitMs: 300 }))).to.have.property('name', 'AcquireTimeoutError');
      await onlyX();
      expect(await rejection(y.lock('slot').acquireRead({ waitMs: 300 }))).to.have.property('name', 'AcquireTimeoutError');
      await onlyX();
    });

    it('wakes a waiter when the holder releases, also with a node down, without waiting for the re-check', async () => {
      await masters.servers[0]!.kill('SIGKILL');
      const holder = await open();
      const waiter = await open({ recheckMs: 20_000 });
      const held = await holder.lock('queue').acquireWrite();
      const waiting = waiter.lock('queue').acquireWrite({ waitMs: 10_000 });
      // Queued by its first try; it then subscribes and tries again at once (a release meanwhile is
      // found by that try), and sleeps until a wake-up or its re-check.
      await eventually('the waiter queued', async () => (await holder.inspect('queue')).queue.length > 0);
      const releasedAt = performance.now();
      await held.release();
      const next = await waiting;
      expect(performance.now() - releasedAt).to.be.below(1_000);
      await next.release();
    });

    it("hands the lock over inside each node's release: no acquire per handoff, no herd", async () => {
      const calls = async () => (await Promise.all(admin.map((a) => scriptCalls(a)))).reduce((x, y) => x + y, 0);
      const holder = await open();
      const held = await holder.lock('herd').acquireWrite();
      await onEveryNode(); // else a waiter's try is granted on a node the holder did not reach yet
      const owners = ['w1', 'w2', 'w3', 'w4'];
      // Re-checks every 5 s: within this test a waiter tries again only when a release wakes it.
      const waiters = await Promise.all(owners.map(() => open({ recheckMs: 5_000 })));
      // Each queued on every node, in arrival order.
      const { order, done } = await queueWriters('herd', owners, waiters, async (count) =>
        (await Promise.all(admin.map((a) => a.zcard('rwlock#queue:{herd}')))).every((queued) => queued === count),
      );
      // Each waiter's first try and its try right after subscribing, on every node: then nothing more.
      let settled = await calls();
      await eventually('each waiter to try again after subscribing', async () => {
        const now = await calls();
        const still = now === settled;
        settled = now;
        return still && now >= n * (1 + 2 * owners.length);
      });
      await held.release();
      await done;
      expect(order).to.deep.equal(owners);
      // On every node: the holder's release, then each waiter's release. A waiter holds once a
      // majority of the nodes' releases handed it the lock; one whose messages came too far
      // apart (a descheduled server) tries once more on every node. Before the hand-over, each
      // woken waiter's acquire made it n * (1 + 2 * owners).
      // A release resolves on a majority: the last one may still be on its way to the other nodes.
      await eventually('the last release to run on every node', async () => (await keyCounts()).every((keys) => keys === 0));
      const used = (await calls()) - settled;
      expect(used, 'script calls on all nodes').to.be.within(n * (1 + owners.length), n * (1 + 2 * owners.length) - 1);
    });

    it('queues writers on every node in the order of their places, whatever order their tries arrive in', async () => {
      // Tries that reach the nodes in rotated orders (A-B-C, B-C-A, C-A-B) left the nodes' queues
      // in those orders: each node's release handed the lock to another writer, none held a
      // majority, and each give-back sent its writer to the end of one queue, which kept them so.
      const keys = ['rwlock:{places}', 'rwlock#leases:{places}', 'rwlock#queue:{places}'] as const;
      const writers = ['A', 'B', 'C'];
      const placeOf = (w: string) => 1_000_000 + writers.indexOf(w);
      for (const [i, a] of admin.entries()) {
        await runScript(driverFor(a), 'acquireWrite', [...keys], [60_000, holderArg('write', 'holder.0', 'holder'), 0, '0h']);
        for (let k = 0; k < writers.length; k++) {
          const w = writers[(i + k) % writers.length]!;
          await runScript(driverFor(a), 'acquireWrite', [...keys], [60_000, holderArg('write', `${w}.0`, w), 60_000, '0h', placeOf(w)]);
        }
      }
      for (const a of admin) expect(await a.zrange(keys[2], '0', '-1')).to.deep.equal(writers);
      for (const a of admin) await a.del(...keys);
    });

    it('hands a node a waiting writer gives back to the earliest place: two writers holding one node each do not swap them', async () => {
      // X holds node 0 and Y node 1, each queued on the other's; each gives its node back (no
      // majority). Before, each release handed its node to the other writer, and their next tries
      // did the same again, for 20 s (the mutual-exclusion test above, with a server killed).
      const keys = ['rwlock:{swap}', 'rwlock#leases:{swap}', 'rwlock#queue:{swap}'] as const;
      const placeOf = { X: 1_000_000, Y: 2_000_000 };
      const acquire = (a: Redis, w: 'X' | 'Y') =>
        runScript(driverFor(a), 'acquireWrite', [...keys], [60_000, holderArg('write', `${w}.0`, w), 60_000, '0h', placeOf[w]]);
      const [x, y] = [admin[0]!, admin[1]!];
      await acquire(x, 'X');
      await acquire(x, 'Y');
      await acquire(y, 'Y');
      await acquire(y, 'X');
      await runScript(driverFor(x), 'release', [...keys], [holderArg('write', 'X.0', 'X'), placeOf.X, 60_000, 60_000]);
      await runScript(driverFor(y), 'release', [...keys], [holderArg('write', 'Y.0', 'Y'), placeOf.Y, 60_000, 60_000]);
      expect(await x.hget(keys[0], 'w'), 'the writer holding node 0').to.equal('X');
      expect(await y.hget(keys[0], 'w'), 'the writer holding node 1').to.equal('X');
      for (const a of [x, y]) expect(await a.zrange(keys[2], '0', '-1')).to.deep.equal(['Y']);
      for (const a of admin) await a.del(...keys);
    });

    it("keeps one writer when the nodes' queues disagree: the majority's head holds, the other gives back and goes next", async () => {
      const queue = 'rwlock#queue:{split}';
      const holder = await open();
      const held = await holder.lock('split').acquireWrite();
      await onEveryNode(); // else a waiter's try is granted on a node the holder did not reach yet
      const owners = ['first', 'second'];
      const waiters = await Promise.all(owners.map(() => open({ recheckMs: 5_000 })));
      let inside = 0;
      let overlaps = 0;
      const order: string[] = [];
      const granted: Promise<void>[] = [];
      for (const [i, owner] of owners.entries()) {
        const lock = waiters[i]!.lock('split');
        granted.push(
          lock.acquireWrite({ owner, waitMs: 10_000 }).then(async (lease) => {
            if (++inside > 1) overlaps++;
            order.push(owner);
            await sleep(200); // long past the other writer's give-back
            inside--;
            await lease.release();
          }),
        );
        await eventually(`${owner} to queue on every node`, async () =>
          (await Promise.all(admin.map((a) => a.zcard(queue)))).every((queued) => queued === i + 1),
        );
      }
      // On a minority of the nodes 'second' queued first, so their releases hand it the lock.
      for (let i = 0; i < n - quorum; i++) expect(await admin[i]!.zadd(queue, 'XX', 'CH', 1, 'second')).to.equal(1);
      await held.release();
      await Promise.all(granted);
      expect(order).to.deep.equal(owners);
      expect(overlaps, 'writers holding at once').to.equal(0);
      await offEveryNode();
    });

    it('a writer with a long lease that a release hands the lock holds it: the drift allowance fits the handed hold', async () => {
      // The handed hold lasts 2 x recheckMs + 100 ms; an allowance of the whole lease (1 % of
      // 120 s) left it no validity, and the grant was released again with a QuorumError.
      const holder = await open();
      const held = await holder.lock('long').acquireWrite();
      await onEveryNode();
      const waiter = await open({ leaseMs: 120_000 });
      const waiting = waiter.lock('long').acquireWrite({ waitMs: 10_000 });
      await eventually('the waiter to queue on every node', async () =>
        (await Promise.all(admin.map((a) => a.zcard('rwlock#queue:{long}')))).every((queued) => queued === 1),
      );
      await held.release();
      const lease = await waiting;
      expect(lease.held).to.equal(true);
      await lease.release();
      await offEveryNode();
    });

    if (n === 3 && clientKind === 'ioredis') {
      it("orders waiting writers by the servers' clocks: a process whose clock runs 60 s ahead keeps its place", async () => {
        const holder = await open();
        const held = await holder.lock('skew').acquireWrite();
        await onEveryNode();
        const queued = (count: number) => async () =>
          (await Promise.all(admin.map((a) => a.zcard('rwlock#queue:{skew}')))).every((q) => q === count);
        const ahead = spawn(process.execPath, ['--import', SHIFTED_CLOCK, bundled(REDLOCK_WRITER)], {
          stdio: ['pipe', 'pipe', 'inherit'],
          env: {
            ...process.env,
            RWLOCK_CLOCK_SHIFT_MS: '60000',
            RWLOCK_PORTS: JSON.stringify(masters.servers.map((s) => s.port)),
            RWLOCK_RESOURCE: 'skew',
            RWLOCK_OWNER: 'ahead',
          },
        });
        try {
          await eventually('the process 60 s ahead to queue on every node', queued(1), 10_000);
          const later = (await open({ fair: true })).lock('skew').acquireWrite({ owner: 'later', waitMs: 20_000 });
          await eventually('the later writer to queue on every node', queued(2));
          await held.release();
          // The first writer after the holder: the release hands the lock to the head of each queue.
          let first: string | undefined;
          await eventually(
            'a writer to hold the lock',
            async () => (first = (await holder.lock('skew').inspect()).writer?.owner) !== undefined,
          );
          expect(first, 'the writer that queued first').to.equal('ahead');
          ahead.stdin.end();
          await (await later).release();
        } finally {
          ahead.stdin.end();
          if (ahead.exitCode === null) await once(ahead, 'exit');
        }
        await offEveryNode();
      });
    }

    if (clientKind === 'ioredis') {
      it("leaves nothing held on a node whose release of the last writer comes after the next writer's release", async () => {
        const last = masters.servers[n - 1]!;
        const proxy = await startFaultProxy({ target: { port: last.port } });
        try {
          // The holder reaches the last node through the proxy, the next writer directly.
          const nodes = [...masters.clients().slice(0, n - 1), new Redis({ host: proxy.host, port: proxy.port })];
          for (const c of nodes) clients.add(c);
          const holder = new LockClient(nodes, { mode: 'redlock', redlock: { nodeTimeoutMs: 200 } });
          lockClients.add(holder);
          const calls = async () => (await Promise.all(admin.map((a) => scriptCalls(a)))).reduce((x, y) => x + y, 0);
          const before = await calls();
          const held = await holder.lock('late').acquireWrite();
          await onEveryNode(); // else the writer's try is granted on a node the holder did not reach yet
          const writer = await open({ recheckMs: 5_000 });
          const waiting = writer.lock('late').acquireWrite({ waitMs: 10_000 });
          await eventually('the writer queued on every node', async () =>
            (await Promise.all(admin.map((a) => a.zcard('rwlock#queue:{late}')))).every((queued) => queued === 1),
          );
          // The holder's acquire, the writer's first try and its try after subscribing, on every node:
          // the writer now sleeps, and only the releases' messages can grant it the lock.
          await eventually('the writer to try again after subscribing', async () => (await calls()) - before >= 3 * n);
          proxy.stall();
          const beforeRelease = await calls();
          await held.release(); // released by the majority; the last node's release waits in the proxy
          const lease = await waiting; // handed the lock by that majority
          await lease.release(); // the last node runs it first: this writer holds nothing there yet
          // The holder's releases that went through and the writer's: the writer made no try of its own.
          await eventually('every release to run', async () => (await calls()) - beforeRelease >= 2 * n - 1);
          expect((await calls()) - beforeRelease, 'script calls since the release').to.equal(2 * n - 1);
          expect(await admin[n - 1]!.exists('rwlock#queue:{late}')).to.equal(0); // nor waits there any more
          proxy.resume();
          // The holder's release there finds nobody to hand the lock to (before: the writer, which
          // had released it, held that node until its handed lease ran out, 10 s later).
          await eventually('the last node free', async () => (await admin[n - 1]!.dbsize()) === 0, 2_000);
          expect(await keyCounts()).to.deep.equal(new Array(n).fill(0));
        } finally {
          await proxy.close();
        }
      });
    }

    it('hands out growing fences, reentrancy and upgrade across nodes', async () => {
      const locks = await open();
      const lock = locks.lock('fenced');
      const a = await lock.acquireWrite({ owner: 'job' });
      const b = await lock.acquireWrite({ owner: 'job' }); // reentrant on every node
      expect(b.fence).to.equal(a.fence); // the holding's fence: the outer lease's writes stay valid
      await b.release();
      expect(await (await open()).lock('fenced').tryAcquireRead()).to.equal(null); // still held once
      await a.release();
      const r = await lock.acquireRead({ owner: 'reader' });
      const w = await lock.acquireWrite({ owner: 'reader', waitMs: 1_000 }); // the sole reader upgrades
      expect(w.fence).to.be.greaterThan(a.fence);
      await w.release();
      await r.release();
      await offEveryNode();
    });
  });
}

// node-redis and GLIDE in `npm run test:clients`: the suite is among the slowest.
for (const kind of selectedClients(NODE_REDIS_IN_CI_AND_GLIDE)) {
  suite(3, kind);
  if (kind === 'ioredis') suite(5);
}

for (const clientKind of selectedClients(NODE_REDIS_IN_CI_AND_GLIDE)) {
  describe(`redlock mode over a Cluster and two servers${clientKind === 'ioredis' ? '' : `, ${clientKind}`}`, function () {
    this.timeout(60_000);
    let cluster: RedisClusterHandle;
    let masters: RedisMastersHandle;
    const made: LockRedisClient[] = [];
    const nodes = async (): Promise<LockRedisClient[]> => {
      let list: LockRedisClient[];
      if (clientKind === 'ioredis') list = [cluster.client(), ...(masters.clients() as [Redis, Redis])];
      else if (clientKind === 'glide')
        list = await Promise.all([glideCluster({ addresses: cluster.startupNodes }), ...masters.servers.map(glideOf)]);
      else {
        const nodeCluster = createCluster({
          rootNodes: cluster.startupNodes.map((node) => ({ socket: { host: node.host, port: node.port } })),
        });
        nodeCluster.on('error', () => undefined);
        await nodeCluster.connect(); // its slots known
        list = [nodeCluster, ...masters.servers.map(nodeRedisOf)];
      }
      made.push(...list);
      return list;
    };
    before(async function () {
      this.timeout(120_000);
      [cluster, masters] = await Promise.all([sharedCluster(), startRedisMasters(2)]);
      await cluster.flush();
    });
    after(async () => {
      for (const c of made) disconnect(c);
      await masters?.stop();
    });

    it('grants, renews, wakes waiters and releases with a Cluster as one of the nodes', async () => {
      // Renewed every 500 ms: a loaded machine's late timer does not let it run out.
      const holder = new LockClient(await nodes(), { mode: 'redlock', leaseMs: 1_500 });
      const waiter = new LockClient(await nodes(), { mode: 'redlock', recheckMs: 20_000 });
      const lease = await holder.lock('user:{42}').acquireWrite();
      const info = await holder.inspect('user:{42}');
      expect(info.writer?.owner).to.equal(lease.token);
      const waiting = waiter.lock('user:{42}').acquireWrite({ waitMs: 10_000 });
      await sleep(1_700); // past its first lease: renewed meanwhile, on the Cluster too
      expect(lease.held).to.equal(true);
      const releasedAt = performance.now();
      await lease.release();
      const next = await waiting;
      expect(performance.now() - releasedAt).to.be.below(1_000);
      await next.release();
      await Promise.all([holder.close(), waiter.close()]);
    });
  });
}

// On ioredis (and node-redis' constructors): not again in the GLIDE run of `npm run test:clients`.
if (selectedClients(['ioredis']).includes('ioredis'))
  describe('redlock mode: bad input', () => {
    let masters: RedisMastersHandle;
    const made: Redis[] = [];
    const clients = (): Redis[] => {
      const list = masters.clients({ lazyConnect: true });
      made.push(...list);
      return list;
    };
    before(async function () {
      this.timeout(60_000);
      masters = await startRedisMasters(3);
    });
    after(async () => {
      for (const c of made) c.disconnect();
      await masters?.stop();
    });

    /** node-redis clients of servers 0, 1 and 0 again (as "localhost"), not connected. */
    const nodeRedisOfOneServerTwice = () => [
      ...masters.servers.slice(0, 2).map((s) => createClient({ socket: { host: s.host, port: s.port } })),
      createClient({ socket: { host: 'localhost', port: masters.servers[0]!.port } }),
    ];

    const cases: [string, () => unknown][] = [
      ['fewer than 3 clients', () => new LockClient(clients().slice(0, 2), { mode: 'redlock' })],
      ['no clients', () => new LockClient([], { mode: 'redlock' })],
      [
        'the same client twice',
        () => {
          const [a, b] = clients();
          return new LockClient([a!, b!, a!], { mode: 'redlock' });
        },
      ],
      [
        'two clients of one server',
        () => {
          const [a, b] = clients();
          return new LockClient([a!, b!, masters.servers[0]!.client({ lazyConnect: true })], { mode: 'redlock' });
        },
      ],
      ['two node-redis clients of one server', () => new LockClient(nodeRedisOfOneServerTwice(), { mode: 'redlock' })],
      ['a non-client among them', () => new LockClient([...clients().slice(0, 2), {} as Redis], { mode: 'redlock' })],
      ['one client in redlock mode', () => new LockClient(clients()[0]!, { mode: 'redlock' })],
      ['an array without mode redlock', () => new LockClient(clients())],
      ['redlock options in hash mode', () => new LockClient(clients()[0]!, { redlock: { driftFactor: 0.01 } })],
      ['a drift factor of 0.5', () => new LockClient(clients(), { mode: 'redlock', redlock: { driftFactor: 0.5 } })],
      ['a node timeout of 0', () => new LockClient(clients(), { mode: 'redlock', redlock: { nodeTimeoutMs: 0 } })],
    ];
    for (const [what, make] of cases) {
      it(`refuses ${what} with InvalidArgumentError`, () => {
        expect(make).to.throw(InvalidArgumentError);
      });
    }

    it('names the problem', () => {
      expect(() => new LockClient(clients().slice(0, 2), { mode: 'redlock' })).to.throw(/at least 3 independent servers/);
      const [a, b] = clients();
      expect(() => new LockClient([a!, b!, a!], { mode: 'redlock' })).to.throw(/same client/);
      expect(() => new LockClient(clients())).to.throw(/mode "redlock"/);
      expect(() => new LockClient(nodeRedisOfOneServerTwice(), { mode: 'redlock' })).to.throw(
        /elements 0 and 2 both connect to 127\.0\.0\.1:/,
      );
    });

    it('accepts 3 distinct servers', async () => {
      const locks = new LockClient(clients(), { mode: 'redlock' });
      const lease: Lease = await locks.lock('ok').acquireWrite();
      await lease.release();
      await locks.close();
    });
  });
