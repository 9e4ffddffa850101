/**
 * `redlock` mode: the tries of one acquire share its hold id, so a node's
 * late answer to an earlier try names the same hold as a later try's grant.
 * The clean-up of that late answer must not drop the hold a later try was
 * granted. Three independent servers, each behind a fault proxy.
 */
import { expect } from 'chai';
import type { FaultProxy } from '../../src/testing/index.js';
import type { ClientKind } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { proxiedMasters } from '../support/proxied-masters.js';

const N = 3;

function suite(clientKind: ClientKind): void {
  describe(`redlock tries of one acquire [${N} independent servers, ${clientKind}]`, function () {
    this.timeout(60_000);
    const m = proxiedMasters(N, clientKind);
    const { open, nodesHolding } = m;
    const scriptsSent = (proxy: FaultProxy) => (proxy.stats.commands.evalsha ?? 0) + (proxy.stats.commands.eval ?? 0);

    it("a server's late grant to an earlier try is not undone once a later try of the same acquire was granted", async () => {
      const locks = open(m.through, { mode: 'redlock', redlock: { nodeTimeoutMs: 400 } });
      await (await locks.lock('warm').acquireWrite()).release(); // the scripts are loaded on every server
      const { state, queue } = locks.lock('tries').keys;
      // Another process's writer on servers B and C alone: the acquire's first tries are refused there.
      const onB = await open(m.admin[1]!).lock('tries').acquireWrite();
      const onC = await open(m.admin[2]!).lock('tries').acquireWrite();
      // Server A grants the first try; its reply, and all after it on A, is held back.
      const heldOnA = m.proxies[0]!.stallAtReply({ argument: state, reply: ':' });
      const acquiring = locks.lock('tries').acquireWrite({ owner: 'owner-x', waitMs: 20_000 });
      await heldOnA;
      await eventually('the writer to queue on server B', async () => (await m.admin[1]!.zscore(queue, 'owner-x')) !== null);
      // B is free (its release hands it to this writer): the next try is granted there, and
      // waits for A (C still refuses).
      await onB.release();
      const triesBefore = scriptsSent(m.proxies[1]!);
      await eventually('a try after B was freed', () => scriptsSent(m.proxies[1]!) > triesBefore);
      // A answers every try now, in order: the earlier tries' grants (late), then this try's.
      m.proxies[0]!.resume();
      const lease = await acquiring;
      await m.behindEverySent(); // behind what the late answers sent
      expect(lease.held).to.equal(true);
      expect(await nodesHolding(lease, state), 'servers holding the granted hold').to.be.at.least(2);
      await onC.release();
      const other = open(m.admin, { mode: 'redlock' });
      expect(await other.lock('tries').tryAcquireWrite(), 'another writer').to.equal(null);
      await lease.release();
    });
  });
}

suite('ioredis');
suite('node-redis');
