/**
 * `redlock` mode: a renewal or extension that finds a lease gone lets go of
 * that lease's holds alone. One that overlaps the owner's release finds
 * nothing on any node; the same owner may be granted the lock again before
 * its verdict, and that new grant must stay held on every node. Three
 * independent servers, each behind a fault proxy, on ioredis, node-redis and
 * GLIDE.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { LockRedisClient } from '../../src/clients/index.js';
import { type Lease, type LockClient, type LockClientOptions, LockLostError } from '../../src/index.js';
import { type ClientKind, NODE_REDIS_IN_CI_AND_GLIDE, selectedClients } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { proxiedMasters } from '../support/proxied-masters.js';

const N = 3;
const QUORUM = 2;

function suite(clientKind: ClientKind): void {
  describe(`redlock renewal racing a release [${N} independent servers, ${clientKind}]`, function () {
    this.timeout(60_000);
    const m = proxiedMasters(N, clientKind);
    const open = (clients: readonly LockRedisClient[], options: LockClientOptions = {}) => m.open(clients, { mode: 'redlock', ...options });
    const nodesHolding = (locks: LockClient, lease: Lease) => m.nodesHolding(lease, locks.lock(lease.resource).keys.state);

    it('an extension that finds the lease released drops no hold the same owner was granted since: nobody else gets in', async () => {
      const locks = open(m.through);
      const others = open(m.admin);
      const lock = locks.lock('again');
      const first = await lock.acquireWrite({ owner: 'owner-x' });
      // All three on the wire together, in this order on every server: the release frees the
      // lock, the extension finds nothing there (a verdict of lost), and the acquire is granted.
      const releasing = first.release();
      const extending = first.extend().catch((error: unknown) => error);
      const acquiring = lock.acquireWrite({ owner: 'owner-x' });
      await releasing;
      expect(await extending).to.be.instanceOf(LockLostError);
      const second = await acquiring;
      await m.behindEverySent(); // whatever the extension's verdict sent has run
      expect(second.held).to.equal(true);
      expect(await nodesHolding(locks, second), 'servers holding the new grant').to.equal(N);
      expect(await others.lock('again').tryAcquireWrite(), 'another writer').to.equal(null);
      await second.release();
    });

    it('a lease lost by renewal gives back its own holds on every server, and the lock is free at once', async () => {
      const locks = open(m.through);
      const others = open(m.admin);
      const { state } = locks.lock('gone').keys;
      // The grant resolves with a majority. A client's first script waits for its server check
      // (COMMAND INFO), so the third server's acquire may not even be written yet: held back here
      // at that check's reply, as a loaded machine sometimes did by itself. A command sent now
      // would run before it, so the test waits for the grant on every server, not behind a command.
      const checking = m.proxies[2]!.stallAtReply({ command: 'command' });
      const acquiring = locks.lock('gone').acquireWrite({ leaseMs: 3_000 });
      await checking;
      const lease = await acquiring;
      expect(m.proxies[2]!.stats.commands, "the third server's acquire, not sent yet").to.not.have.any.keys('eval', 'evalsha');
      m.proxies[2]!.resume();
      await eventually('the grant on every server', async () => (await m.nodesHolding(lease, state)) === N);
      // Gone on a majority (as after their data was lost), still held on the third server.
      await Promise.all(m.admin.slice(0, QUORUM).map((a) => a.del(state)));
      expect(await rejectionOf(lease.extend())).to.be.instanceOf(LockLostError);
      await m.behindEverySent();
      expect(await nodesHolding(locks, lease), 'servers still holding the lost hold').to.equal(0);
      const next = await others.lock('gone').tryAcquireWrite();
      expect(next, 'another writer once the lost lease was given back').to.not.equal(null);
      await next!.release();
    });

    it('one owner in an acquire/release loop, 5 ms per server, renewal every 100 ms: every lease held is held by a majority', async () => {
      const locks = open(m.through, { leaseMs: 300 });
      const lock = locks.lock('loop');
      for (const proxy of m.proxies) proxy.delay(5); // each way
      let cycles = 0;
      const short: number[] = [];
      const until = performance.now() + 8_000;
      while (cycles < 50 && performance.now() < until) {
        const lease = await lock.acquireWrite({ owner: 'owner-loop', waitMs: 5_000 });
        // Released about when the first renewal round (100 ms after the grant) starts.
        await sleep(85 + (cycles % 20));
        await m.behindEverySent(); // a verdict's clean-up sent before this grant was answered has run
        const holding = await nodesHolding(locks, lease);
        // Read after the servers: a lease still held by its local deadline then was held by a majority.
        if (holding < QUORUM && lease.held) short.push(cycles);
        // A lease the machine's load let run out is lost, and its release says so: not what this counts.
        await lease.release().catch(() => undefined);
        cycles++;
      }
      for (const proxy of m.proxies) proxy.delay(0);
      expect(cycles, 'cycles run').to.be.at.least(20);
      expect(short, `cycles held by the client but by no majority, of ${cycles}`).to.deep.equal([]);
    });
  });
}

/** The error `promise` rejects with, or undefined. */
function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (error: unknown) => error,
  );
}

// node-redis and GLIDE in `npm run test:clients`: its loop test takes seconds.
for (const kind of selectedClients(NODE_REDIS_IN_CI_AND_GLIDE)) suite(kind);
