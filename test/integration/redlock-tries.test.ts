/**
 * `redlock` mode: the tries of one acquire share its hold id, so a node's
 * late answer to an earlier try names the same hold as a later try's grant.
 * The clean-up of that late answer must not drop the hold a later try was
 * granted. Three independent servers, each behind a fault proxy.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { LockRedisClient } from '../../src/clients/index.js';
import { type Lease, LockClient, type LockClientOptions } from '../../src/index.js';
import { type FaultProxy, type RedisMastersHandle, startFaultProxy, startRedisMasters } from '../../src/testing/index.js';
import { type ClientKind, disconnect } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { connectLockClient, targetThrough } from '../support/targets.js';

const N = 3;

function suite(clientKind: ClientKind): void {
  describe(`redlock tries of one acquire [${N} independent servers, ${clientKind}]`, function () {
    this.timeout(60_000);
    let masters: RedisMastersHandle;
    let admin: Redis[];
    let proxies: FaultProxy[];
    let through: LockRedisClient[];
    const closing: LockClient[] = [];

    before(async function () {
      this.timeout(60_000);
      masters = await startRedisMasters(N);
      admin = masters.clients();
    });
    after(async () => {
      for (const a of admin ?? []) a.disconnect();
      await masters?.stop();
    });
    beforeEach(async () => {
      proxies = await Promise.all(masters.servers.map((server) => startFaultProxy({ target: { port: server.port } })));
      through = await Promise.all(proxies.map((proxy) => connectLockClient(targetThrough(proxy, clientKind))));
    });
    afterEach(async () => {
      for (const proxy of proxies) proxy.resume();
      for (const locks of closing.splice(0)) await locks.close();
      for (const c of through) disconnect(c);
      await Promise.all(proxies.map((proxy) => proxy.close()));
      await masters.flush();
    });

    const open = (clients: LockRedisClient | readonly LockRedisClient[], options: LockClientOptions = {}): LockClient => {
      const locks = new LockClient(clients, options);
      closing.push(locks);
      return locks;
    };
    /** How many servers hold `lease`'s hold (by its id, in the lock's hash). */
    const nodesHolding = async (lease: Lease, state: string): Promise<number> => {
      const fields = await Promise.all(admin.map((a) => a.hgetall(state)));
      return fields.filter((f) => Object.values(f).some((v) => ` ${v} `.includes(` ${lease.holdId} `))).length;
    };
    const scriptsSent = (proxy: FaultProxy) => (proxy.stats.commands.evalsha ?? 0) + (proxy.stats.commands.eval ?? 0);

    it("a server's late grant to an earlier try is not undone once a later try of the same acquire was granted", async () => {
      const locks = open(through, { mode: 'redlock', redlock: { nodeTimeoutMs: 400 } });
      await (await locks.lock('warm').acquireWrite()).release(); // the scripts are loaded on every server
      const { state, queue } = locks.lock('tries').keys;
      // Another process's writer on servers B and C alone: the acquire's first tries are refused there.
      const onB = await open(admin[1]!).lock('tries').acquireWrite();
      const onC = await open(admin[2]!).lock('tries').acquireWrite();
      // Server A grants the first try; its reply, and all after it on A, is held back.
      const heldOnA = proxies[0]!.stallAtReply({ argument: state, reply: ':' });
      const acquiring = locks.lock('tries').acquireWrite({ owner: 'owner-x', waitMs: 20_000 });
      await heldOnA;
      await eventually('the writer to queue on server B', async () => (await admin[1]!.zscore(queue, 'owner-x')) !== null);
      // B is free (its release hands it to this writer): the next try is granted there, and
      // waits for A (C still refuses).
      await onB.release();
      const triesBefore = scriptsSent(proxies[1]!);
      await eventually('a try after B was freed', () => scriptsSent(proxies[1]!) > triesBefore);
      // A answers every try now, in order: the earlier tries' grants (late), then this try's.
      proxies[0]!.resume();
      const lease = await acquiring;
      await Promise.all(through.map((c) => (c as Redis).exists('nothing'))); // behind what the late answers sent
      expect(lease.held).to.equal(true);
      expect(await nodesHolding(lease, state), 'servers holding the granted hold').to.be.at.least(2);
      await onC.release();
      const other = open(admin, { mode: 'redlock' });
      expect(await other.lock('tries').tryAcquireWrite(), 'another writer').to.equal(null);
      await lease.release();
    });
  });
}

suite('ioredis');
suite('node-redis');
