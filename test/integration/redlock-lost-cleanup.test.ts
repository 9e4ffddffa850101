/**
 * `redlock` mode: the clean-up of leases a renewal round judged lost (held
 * by too few nodes) is paced, as hash mode paces the give-backs of leases
 * lost together (src/paced.ts, RELEASE_CALLS_IN_FLIGHT): thousands lost at
 * once must not send thousands of abandons to every node at once, ahead of
 * every other call on the connections. Three independent servers; two of
 * them lose every lock (FLUSHALL), so the next round finds every lease lost.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { NodeBackend } from '../../src/backends/redlock.js';
import { ClientClosedError, type Lease, LockClient } from '../../src/index.js';
import { RELEASE_CALLS_IN_FLIGHT } from '../../src/paced.js';
import { type RedisMastersHandle, startRedisMasters } from '../../src/testing/index.js';
import { selectedTopologies } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';

const LEASES = 2_000;

describe('redlock clean-up of leases judged lost [3 independent servers]', function () {
  this.timeout(60_000);
  if (!selectedTopologies().includes('standalone')) return;
  let masters: RedisMastersHandle;
  before(async () => {
    masters = await startRedisMasters(3);
  });
  after(async () => {
    await masters?.stop();
  });

  /**
   * The abandons each node of `locks` was sent, in flight now, and the most
   * in flight at once; `hold()` keeps every abandon sent to that node from
   * reaching it until `let()` (as a node that answers nothing).
   */
  function countAbandons(locks: LockClient) {
    const nodes = (locks as unknown as { ctx: { backend: { nodes: NodeBackend[] } } }).ctx.backend.nodes;
    return nodes.map((node) => {
      let gate: Promise<void> | undefined;
      let open: () => void = () => undefined;
      const counts = {
        sent: 0,
        inFlight: 0,
        most: 0,
        hold: () => void (gate = new Promise<void>((resolve) => (open = resolve))),
        let: () => open(),
      };
      const abandon = node.abandon.bind(node);
      node.abandon = async (...args) => {
        counts.sent++;
        counts.most = Math.max(counts.most, ++counts.inFlight);
        try {
          await gate;
          return await abandon(...args);
        } finally {
          counts.inFlight--;
        }
      };
      return counts;
    });
  }

  /**
   * The quorum abandons (`RedlockBackend.abandon`, each to every node) of
   * `locks` in flight, now and the most at once: in all, and by the paced
   * stream that sent them (the give-backs of leases that ran out here, in
   * holdings; the clean-ups of leases a renewal or a release found held by
   * too few nodes, in the redlock backend).
   */
  function countQuorumAbandons(locks: LockClient) {
    type Queue = { push(call: () => Promise<void>, optional: boolean): void };
    type Backend = { abandon: NodeBackend['abandon']; lostCleanUps: Queue };
    const { ctx } = locks as unknown as { ctx: { holdings: { giveBacks: Queue }; backend: Backend } };
    const counter = () => ({ inFlight: 0, most: 0 });
    const counts = { all: counter(), giveBacks: counter(), lostCleanUps: counter() };
    let sending: 'giveBacks' | 'lostCleanUps' | undefined;
    for (const [stream, queue] of [
      ['giveBacks', ctx.holdings.giveBacks],
      ['lostCleanUps', ctx.backend.lostCleanUps],
    ] as const) {
      const push = queue.push.bind(queue);
      // A call the queue sends makes its quorum call at once, in the same turn: it is this stream's.
      queue.push = (call, optional) =>
        push(() => {
          sending = stream;
          try {
            return call();
          } finally {
            sending = undefined;
          }
        }, optional);
    }
    const abandon = ctx.backend.abandon.bind(ctx.backend);
    ctx.backend.abandon = (...args) => {
      const mine = sending ? [counts.all, counts[sending]] : [counts.all];
      for (const c of mine) c.most = Math.max(c.most, ++c.inFlight);
      return abandon(...args).finally(() => {
        for (const c of mine) c.inFlight--;
      });
    };
    return counts;
  }

  /**
   * LEASES write leases on `{prefix}:0`, `{prefix}:1`, ...; then two nodes
   * lose every lock, once no node has an acquire call in flight: an acquire
   * returns on a majority's grants, and a node still behind would grant
   * after the flush, holding that lease on a majority again. (A node whose
   * call failed holds nothing: the lease is then held by the third alone, or
   * by none.)
   */
  async function acquireThenLoseOnTwo(
    locks: LockClient,
    clients: readonly Redis[],
    prefix: string,
    { leaseMs, pauseMs }: { leaseMs?: number; pauseMs?: number } = {},
  ): Promise<Lease[]> {
    const nodes = (locks as unknown as { ctx: { backend: { nodes: NodeBackend[] } } }).ctx.backend.nodes;
    let acquiring = 0;
    for (const node of nodes) {
      const acquire = node.acquire.bind(node);
      node.acquire = (...args) => {
        acquiring++;
        return acquire(...args).finally(() => acquiring--);
      };
    }
    const leases: Lease[] = [];
    for (let i = 0; i < LEASES; i += 200) {
      const batch = Array.from({ length: 200 }, (_, k) => locks.lock(`{${prefix}}:${i + k}`).acquireWrite(leaseMs ? { leaseMs } : {}));
      leases.push(...(await Promise.all(batch)));
    }
    await eventually('no node has an acquire in flight', () => acquiring === 0, 20_000);
    // With `pauseMs`, both then answer nothing for that long: in the same transaction as the flush,
    // so that no renewal finds the leases gone before the pause.
    const lose = (c: Redis) => (pauseMs ? c.multi([['flushall'], ['client', 'pause', String(pauseMs), 'all']]).exec() : c.flushall());
    await Promise.all([lose(clients[0]!), lose(clients[1]!)]);
    return leases;
  }

  /** {@link acquireThenLoseOnTwo}, counting the leases lost. */
  async function holdThenLoseOnTwo(locks: LockClient, clients: readonly Redis[], prefix: string, pauseMs?: number): Promise<() => number> {
    let lost = 0;
    locks.on('lost', (_error, leases) => (lost += leases.length));
    await acquireThenLoseOnTwo(locks, clients, prefix, { pauseMs });
    return () => lost;
  }

  /**
   * Acquires LEASES leases on `prefix`, makes two nodes lose every lock (and
   * with `pauseMs` answer nothing for that long), and once every clean-up was
   * answered checks that neither stream of them had more than a few quorum
   * calls in flight at once, nor any node more than a few abandons.
   */
  async function loseEveryLease(prefix: string, paused?: { pauseMs: number; nodeTimeoutMs: number }): Promise<void> {
    const clients = masters.clients();
    const nodeTimeoutMs = paused?.nodeTimeoutMs;
    const locks = new LockClient(clients, { mode: 'redlock', leaseMs: 3_000, ...(nodeTimeoutMs && { redlock: { nodeTimeoutMs } }) });
    try {
      const abandons = countAbandons(locks);
      const quorumCalls = countQuorumAbandons(locks);
      const lost = await holdThenLoseOnTwo(locks, clients, prefix, paused?.pauseMs);
      await eventually('every lease lost', () => lost() === LEASES, 20_000);
      // Each lease cleaned up on every node, by one stream or both; then nothing left in flight.
      await eventually('every abandon sent', () => abandons.every((node) => node.sent >= LEASES), 20_000);
      await eventually('every clean-up answered', () => [...abandons, quorumCalls.all].every((c) => c.inFlight === 0));
      const { giveBacks, lostCleanUps, all } = quorumCalls;
      expect(lostCleanUps.most, "clean-ups of renewal's verdicts in flight at once").to.be.at.most(RELEASE_CALLS_IN_FLIGHT);
      // Leases that ran out here first are given back too (a loaded machine's renewal can come after
      // the lease's end even with no node paused): a second stream, as few at a time.
      expect(giveBacks.most, 'give-backs in flight at once').to.be.at.most(RELEASE_CALLS_IN_FLIGHT);
      if (paused) expect(giveBacks.most, 'give-backs in flight at once, leases run out in the pause').to.be.greaterThan(0);
      expect(all.most, 'quorum abandons in flight at once').to.be.at.most(2 * RELEASE_CALLS_IN_FLIGHT);
      const most = abandons.map((node) => node.most);
      expect(Math.max(...most), `abandons in flight at once, per node: ${most.join(', ')}`).to.be.at.most(RELEASE_CALLS_IN_FLIGHT);
      // Every node answers again (the pause is over), so the next case finds them all serving.
      await Promise.all(clients.map((c) => c.ping()));
    } finally {
      await locks.close();
      for (const c of clients) c.disconnect();
    }
  }

  it(`sends the abandons of ${LEASES} leases lost at once a few at a time per node`, () => loseEveryLease('lost'));

  it(`sends them a few at a time per node when the renewal's answers come after the leases ran out here`, () =>
    // Both nodes that lost the locks answer nothing past the leases' end, and each call waits 5 s for
    // them, longer than redisTimeoutMs (1 s): every lease runs out here (each given back, each
    // give-back's quorum call outliving its bound), and then the renewal's late answers judge each
    // one lost (each cleaned up): two streams of abandons at once, as a loaded machine makes them.
    loseEveryLease('late', { pauseMs: 4_500, nodeTimeoutMs: 5_000 }));

  it(`cleans up after ${LEASES} releases that each found too few nodes holding, a few quorum calls at a time`, async () => {
    const clients = masters.clients();
    const locks = new LockClient(clients, { mode: 'redlock' });
    try {
      const quorumCalls = countQuorumAbandons(locks);
      const leases = await acquireThenLoseOnTwo(locks, clients, 'released', { leaseMs: 30_000 });
      const released = await Promise.allSettled(leases.map((lease) => lease.release()));
      expect(released.filter((r) => r.status === 'rejected').length, 'releases that found the lease lost').to.equal(LEASES);
      // Each leaves the third node's hold to an abandon of its own: they go a few at a time.
      await eventually('the third node freed', async () => (await clients[2]!.dbsize()) === 0, 20_000);
      expect(quorumCalls.lostCleanUps.most, 'quorum abandons in flight at once').to.be.within(1, RELEASE_CALLS_IN_FLIGHT);
      expect(quorumCalls.all.most, 'quorum abandons in flight at once, in all').to.be.at.most(RELEASE_CALLS_IN_FLIGHT);
    } finally {
      await locks.close();
      for (const c of clients) c.disconnect();
    }
  });

  it('sends no clean-up of a lost lease still queued once close() has settled', async () => {
    const clients = masters.clients();
    const locks = new LockClient(clients, { mode: 'redlock', leaseMs: 3_000, redisTimeoutMs: 1_000 });
    // The third node (the one that still holds the leases) answers no abandon until after close().
    const third = countAbandons(locks)[2]!;
    third.hold();
    try {
      const lost = await holdThenLoseOnTwo(locks, clients, 'closing');
      await eventually('every lease lost', () => lost() === LEASES, 20_000);
      await eventually('the third node has its abandons in flight', () => third.inFlight === RELEASE_CALLS_IN_FLIGHT, 5_000);
      await locks.close();
      const sentByClose = third.sent;
      expect(sentByClose, 'abandons sent to the third node by the time close() settled').to.be.below(LEASES);
      // Once the node answers those in flight, a queue that outlived close() would send the rest.
      third.let();
      await eventually('the third node answered the abandons in flight', () => third.inFlight === 0, 20_000);
      expect(third.sent - sentByClose, 'abandons sent after close() settled').to.equal(0);
    } finally {
      third.let();
      await locks.close();
      for (const c of clients) c.disconnect();
    }
  });

  it('gives back a grant that lands after close() settled, however late', async () => {
    const clients = masters.clients();
    const locks = new LockClient(clients, { mode: 'redlock', leaseMs: 20_000, redisTimeoutMs: 300, redlock: { nodeTimeoutMs: 10_000 } });
    const watcher = new LockClient(masters.clients(), { mode: 'redlock' });
    try {
      await (await locks.lock('{late}:warm').acquireWrite()).release(); // the server check and the scripts, done
      // Every node's acquire waits until after close(), then runs: its grant lands with no acquire waiting for it.
      let open: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => (open = resolve));
      let landed = 0;
      const nodes = (locks as unknown as { ctx: { backend: { nodes: NodeBackend[] } } }).ctx.backend.nodes;
      for (const node of nodes) {
        const acquire = node.acquire.bind(node);
        node.acquire = async (r) => {
          await gate;
          const outcome = await acquire(r);
          landed++;
          return outcome;
        };
      }
      const acquiring = locks
        .lock('{late}:x')
        .acquireWrite()
        .catch((error: unknown) => error);
      await locks.close();
      expect(await acquiring).to.be.instanceOf(ClientClosedError);
      open();
      await eventually('every node granted the lock', () => landed === nodes.length, 5_000);
      // Within far less than its 20 s lease: the give-back, not the expiry, frees it.
      await eventually('the late grant given back', async () => (await watcher.inspect('{late}:x')).mode === 'free', 4_000);
    } finally {
      await locks.close();
      await watcher.close();
      for (const c of clients) c.disconnect();
    }
  });
});
