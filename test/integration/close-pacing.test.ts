/**
 * What `close()` of many leases costs the server's other clients. Sent all at
 * once, 2,000 releases queued ahead of a neighbour's commands (MONITOR showed
 * them all run back to back); sent RELEASE_CALLS_IN_FLIGHT at a time, the
 * neighbour's commands run between them. And `close()` stays bounded by
 * `redisTimeoutMs` when Redis does not answer, however many leases it has left
 * to release.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { type Lease, LockClient } from '../../src/index.js';
import { RELEASE_CALLS_IN_FLIGHT } from '../../src/paced.js';
import { forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { masters } from '../support/redis-stats.js';

/** `count` write leases, every lock in one slot (one master). */
async function hold(locks: LockClient, count: number): Promise<Lease[]> {
  const leases: Lease[] = [];
  for (let i = 0; i < count; i += 250) {
    leases.push(
      ...(await Promise.all(Array.from({ length: Math.min(250, count - i) }, (_, k) => locks.lock(`{close}:${i + k}`).acquireWrite()))),
    );
  }
  return leases;
}

/** The master the locks live on: the one with keys. */
async function lockMaster(nodes: readonly Redis[]): Promise<Redis> {
  const sizes = await Promise.all(nodes.map((node) => node.dbsize()));
  return nodes[sizes.findIndex((size) => size > 0)]!;
}

forEachTopology('close() of many leases', (ctx) => {
  it(`sends ${RELEASE_CALLS_IN_FLIGHT} releases at a time: a neighbour's commands run between them`, async function () {
    this.timeout(30_000);
    const LEASES = 2_000;
    const redis = ctx.client();
    const locks = new LockClient(redis);
    const leases = await hold(locks, LEASES);
    const master = await lockMaster(await masters(redis));
    const neighbour = master.duplicate();
    const monitor = await master.monitor();
    // What the master runs, in order: the library's scripts and the neighbour's GETs.
    const ran: string[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => ran.push(String(args[0]).toLowerCase()));
    let closing = true;
    try {
      await neighbour.set('{close}:neighbour', 'v');
      await eventually('MONITOR streaming', () => ran.includes('set'));
      const gets = (async () => {
        while (closing) await neighbour.get('{close}:neighbour');
      })();
      await locks.close();
      closing = false;
      await gets;
      await eventually('MONITOR showing every release', () => ran.filter((c) => c === 'evalsha' || c === 'eval').length >= LEASES);

      expect(
        leases.every((l) => l.state === 'released'),
        'every lease released',
      ).to.equal(true);
      expect(await master.dbsize(), 'nothing left but the neighbour key').to.equal(1);
      // The longest run of releases between two of the neighbour's GETs: all of them, sent at once.
      let run = 0;
      let longest = 0;
      let between = 0;
      let released = 0;
      for (const command of ran) {
        if (command === 'evalsha' || command === 'eval') {
          run++;
          released++;
        } else if (command === 'get') {
          if (released > 0 && released < LEASES) between++;
          longest = Math.max(longest, run);
          run = 0;
        }
      }
      longest = Math.max(longest, run);
      // Each of the neighbour's GETs waits for the releases in flight; a few rounds of them may run
      // while its reply comes back and the next GET goes out.
      expect(longest, `longest run of releases between two GETs (${between} GETs between releases)`).to.be.at.most(
        8 * RELEASE_CALLS_IN_FLIGHT,
      );
    } finally {
      closing = false;
      monitor.disconnect();
      neighbour.disconnect();
    }
  });

  it('settles within redisTimeoutMs while Redis does not answer, leases left to release or not', async function () {
    // The pause outlasts this test's timeout: close() must settle without Redis.
    this.timeout(10_000);
    const redis = ctx.client();
    const locks = new LockClient(redis, { redisTimeoutMs: 500 });
    const leases = await hold(locks, 20 * RELEASE_CALLS_IN_FLIGHT);
    const master = await lockMaster(await masters(redis));
    const admin = master.duplicate();
    try {
      // Scripts that may write wait while writes are paused.
      await admin.call('CLIENT', 'PAUSE', '30000', 'WRITE');
      await locks.close();
      expect(
        leases.every((l) => l.state === 'held'),
        'nothing released: Redis answered nothing',
      ).to.equal(true);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
      admin.disconnect();
    }
  });
});
