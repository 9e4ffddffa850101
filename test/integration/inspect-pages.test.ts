/**
 * What inspecting a big lock costs the server. Redis runs one command at a
 * time, and one inspect call that read a lock of 10,000 readers whole ran for
 * 17-26 ms: each call now reads for INSPECT_BUDGET_US of server time and
 * replies with a cursor (lua/includes/inspect-page.lua). Here: inspect, and
 * the CLI's `top` (and `list`, which reads each lock alike), of a lock with
 * 10,000 readers put no library command in any master's SLOWLOG at 1 ms, and
 * still read every reader once; in bridge mode the two-key layout's readers
 * too.
 */
import { expect } from 'chai';
import { runScript } from '../../src/backends/scripts.js';
import { ioredisCli, withBounds } from '../../src/cli/cli-redis.js';
import { look } from '../../src/cli/commands/top.js';
import { driverFor } from '../../src/clients/index.js';
import { type Lease, LockClient, lockKeys } from '../../src/index.js';
import { forEachTopology } from '../setup/topologies.js';
import { taggedLegacyKeys } from '../support/old-scripts.js';
import { commandCalls, masters } from '../support/redis-stats.js';
import { restoreSlowlog, runControl, slowAllowed, slowCommands, watchSlowlog } from '../support/slowlog.js';

/** `count` readers of `resource`, each its own owner, on leases that are not renewed. */
async function readers(locks: LockClient, resource: string, count: number): Promise<Lease[]> {
  const leases: Lease[] = [];
  for (let i = 0; i < count; i += 200) {
    const batch = Array.from({ length: Math.min(200, count - i) }, (_, k) =>
      locks.lock(resource).acquireRead({ owner: `reader-${i + k}`, leaseMs: 60_000 }),
    );
    leases.push(...(await Promise.all(batch)));
  }
  return leases;
}

forEachTopology('inspect in pages', (ctx) => {
  it('reads a lock whose every part fits one step in one call, even with no time left (a slow or loaded server)', async () => {
    const redis = ctx.client();
    const locks = new LockClient(redis);
    try {
      const leases = await readers(locks, 'few', 5);
      const keys = lockKeys('rwlock', 'few');
      // A budget of 0 µs: the clock says stop after every step, as on a server that was descheduled.
      const page = await runScript(driverFor(redis), 'inspect', [keys.state, keys.leases, keys.queue], ['0', 0, 1], keys);
      expect(page[1], 'the cursor after one call').to.equal('0');
      expect(page[2].filter((_, i) => i % 2 === 0 && page[2][i]!.startsWith('r:'))).to.have.length(5);
      await Promise.all(leases.map((lease) => lease.release()));
    } finally {
      await locks.close();
    }
  });

  it('reads a lock of 10,000 readers with no library command over 1 ms on any master', async function () {
    this.timeout(60_000);
    const READERS = 10_000;
    const redis = ctx.client();
    const nodes = await masters(redis);
    const locks = new LockClient(redis);
    let control: ReturnType<typeof runControl> | undefined;
    try {
      await readers(locks, 'crowd', READERS);
      await watchSlowlog(nodes);
      const before = await commandCalls(redis, ['evalsha', 'scan']);
      // The control beside the reads, on the master they read, the one with keys (elsewhere it would only load the machine).
      const sizes = await Promise.all(nodes.map((node) => node.dbsize()));
      control = runControl(nodes.filter((_, i) => sizes[i]! > 0));
      const infos = [];
      for (let i = 0; i < 5; i++) infos.push(await locks.inspect('crowd'));
      const snapshot = await look(withBounds(ioredisCli(redis), 5_000), 'rwlock', 10);
      await control.stop();
      const libraryCalls = (await commandCalls(redis, ['evalsha', 'scan'])) - before;
      const slow = await slowCommands(nodes);
      // Read whole, each of the six reads (one call each) is listed; in pages, none but what the machine's
      // stalls list: as often as they list the control, and (stalls come in bursts the control may miss)
      // three more and one call in a hundred.
      expect(
        slow.library.length,
        `library commands over 1 ms: ${slow.library.length} of ${libraryCalls} (${slow.library.join(', ')}); control: ${slow.control} of ${control.calls}`,
      ).to.be.at.most(slowAllowed(slow, control.calls, libraryCalls, 3 + libraryCalls / 100));

      for (const info of infos) {
        expect(info.mode).to.equal('read');
        expect(new Set(info.readers.map((r) => r.owner)).size, 'every reader, once').to.equal(READERS);
        expect(info.readers, 'each with its lease').to.have.length(READERS);
        expect(info.readers.every((r) => r.holds === 1 && r.ttlMs > 0 && r.ttlMs <= 60_000)).to.equal(true);
      }
      expect(snapshot.locks.map((l) => [l.resource, l.readers.length])).to.deep.equal([['crowd', READERS]]);
      expect(libraryCalls, 'read in many calls').to.be.above(6 * 10);
    } finally {
      await control?.stop();
      await restoreSlowlog(nodes);
      await locks.close();
    }
  });

  it('bridge mode: reads every reader of the hash state and of the two-key layout over several calls', async function () {
    this.timeout(30_000);
    const READERS = 2_000;
    const redis = ctx.client();
    const locks = new LockClient(redis, { mode: 'bridge', ...(ctx.kind === 'cluster' ? { legacyKeys: taggedLegacyKeys } : {}) });
    try {
      await readers(locks, 'report:7', READERS);
      const before = await commandCalls(redis, ['evalsha']);
      const info = await locks.inspect('report:7');
      expect((await commandCalls(redis, ['evalsha'])) - before, 'calls').to.be.above(1);
      expect(info.mode).to.equal('read');
      expect(new Set(info.readers.map((r) => r.owner)).size).to.equal(READERS);
      expect(new Set(info.legacy?.readers.map((r) => r.owner)).size).to.equal(READERS);
      expect(info.legacy?.read.value).to.be.a('string');
      expect(info.legacy?.oldReadersTtlMs).to.equal(0);
    } finally {
      await locks.close();
    }
  });
});
