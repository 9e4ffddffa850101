import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { holderArg, runScript } from '../../src/backends/scripts.js';
import { driverFor } from '../../src/clients/index.js';
import {
  AcquireAbortedError,
  AcquireTimeoutError,
  type Lease,
  LockClient,
  type LockClientOptions,
  RedisUnavailableError,
} from '../../src/index.js';
import { handedChannel } from '../../src/keys/keys.js';
import type { RedisClient } from '../../src/redis.js';
import { disconnect, forEachTopology, NODE_REDIS_IN_CI_AND_GLIDE } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { queueWriters } from '../support/queued-writers.js';
import { killSubscribers, masters, scriptCalls, totalKeys } from '../support/redis-stats.js';

forEachTopology('liveness', { clients: NODE_REDIS_IN_CI_AND_GLIDE }, (ctx) => {
  let redis: RedisClient; // the test's own look at Redis
  const opened: LockClient[] = [];
  /** A LockClient on a connection of its own (a client of the suite's library), as a separate process would have. */
  const open = async (options?: LockClientOptions) => {
    const locks = new LockClient(await ctx.lockRedis(), options);
    opened.push(locks);
    return locks;
  };

  beforeEach(() => {
    redis = ctx.client();
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((l) => l.close()));
  });

  it('strands no waiter when every pub/sub connection is killed before the release', async () => {
    // Leases of a minute and waits of 10 s: only a re-check can rescue the waiters.
    const holder = await open({ leaseMs: 60_000 });
    const waiters = await open({ leaseMs: 60_000, recheckMs: 300 });
    const reader = await holder.lock('stranded').acquireRead();
    const granted: string[] = [];
    const waiting = ['w1', 'w2', 'w3'].map(async (owner) => {
      const lease = await waiters.lock('stranded').acquireWrite({ owner, waitMs: 10_000 });
      granted.push(owner);
      await sleep(20);
      await lease.release();
    });
    let killed = 0;
    await eventually('the waiters to subscribe, to kill their connection', async () => {
      for (const node of await masters(redis)) killed += await killSubscribers(node as Redis);
      return killed > 0;
    });
    await reader.release(); // its wake-up message goes nowhere
    await Promise.all(waiting);
    expect(granted.sort()).to.deep.equal(['w1', 'w2', 'w3']);
  });

  it('never spins: a wait costs at most one script call per re-check or wake-up', async () => {
    const holder = await open();
    const waiter = await open({ recheckMs: 200 });
    const w = await holder.lock('patient').acquireWrite();
    const before = await scriptCalls(redis);
    const error = await waiter
      .lock('patient')
      .acquireRead({ waitMs: 2_000 })
      .then(
        () => undefined,
        (e) => e,
      );
    expect(error).to.be.instanceOf(AcquireTimeoutError);
    const calls = (await scriptCalls(redis)) - before;
    // 2 s / 200 ms re-checks = 10, plus the first try and the try right after subscribing.
    expect(calls).to.be.within(2, 13);
    await w.release();
  });

  it('wakes only the writer that may get in next: no call of its own per handoff, no herd', async () => {
    const start = await scriptCalls(redis);
    const holder = await open();
    const held = await holder.lock('herd').acquireWrite();
    const owners = ['w1', 'w2', 'w3', 'w4'];
    // Re-checks every 5 s: within this test a waiter tries again only when a release wakes it.
    const waiters = await Promise.all(owners.map(() => open({ recheckMs: 5_000 })));
    let inspects = 0;
    const { order, done } = await queueWriters('herd', owners, waiters, async (count) => {
      inspects++;
      return (await holder.inspect('herd')).queue.length === count;
    });
    // Until now: the holder's acquire, per waiter its first try and its try right after
    // subscribing, and our inspects. Wait for those, so that what follows counts alone.
    const before = start + 1 + 2 * owners.length + inspects;
    await eventually('each waiter to try again after subscribing', async () => (await scriptCalls(redis)) === before);
    await held.release();
    await done;
    expect(order).to.deep.equal(owners);
    // The holder's release, then per waiter its release: each release handed the lock to the next
    // waiter (the message is the grant), and each hold ended before a third of its hand-over time
    // (10.1 s), so none was extended.
    expect((await scriptCalls(redis)) - before).to.equal(1 + owners.length);
    // Each handing-over message went to the writer it named alone, not to every waiting client: each
    // client heard its own, and the last release's (the lock freed with nobody queued).
    expect(waiters.map((w) => w.stats().wakeups)).to.deep.equal(owners.map(() => 2));
  });

  it('watches before its first try on a lock it already hears: a short handed hold costs one try and the release', async () => {
    const holder = await open();
    const waiter = await open({ recheckMs: 5_000 });
    // A first wait leaves the waiter's client subscribed to the lock's channel (for 5 s after it).
    const first = await holder.lock('warm').acquireWrite();
    const earlier = waiter.lock('warm').acquireWrite({ waitMs: 10_000 });
    await eventually('the first writer to queue', async () => (await holder.inspect('warm')).queue.length === 1);
    await first.release();
    await (await earlier).release();

    const held = await holder.lock('warm').acquireWrite();
    const before = await scriptCalls(redis);
    const waiting = waiter.lock('warm').acquireWrite({ waitMs: 10_000 });
    await eventually('its try', async () => (await scriptCalls(redis)) === before + 1);
    await held.release();
    const lease = await waiting;
    await lease.release(); // long before a third of its hand-over time (10.1 s): no extension
    // The holder's release; the writer's one try and its release.
    expect((await scriptCalls(redis)) - before).to.equal(3);
  });

  it('extends a handed hold to its lease once a third of its hand-over time passed, and keeps it past that time', async () => {
    const holder = await open();
    // Hand-over time 2 x 1000 + 100 = 2.1 s: extended after 0.7 s, with 1.4 s to spare on a loaded machine.
    const waiter = await open({ recheckMs: 1_000 });
    const held = await holder.lock('handed-kept').acquireWrite();
    const waiting = waiter.lock('handed-kept').acquireWrite({ waitMs: 10_000, leaseMs: 60_000 });
    await eventually('the writer to queue', async () => (await holder.inspect('handed-kept')).queue.length === 1);
    await held.release();
    const lease = await waiting;
    await eventually('the extension to its lease', async () => ((await holder.inspect('handed-kept')).writer?.ttlMs ?? 0) > 10_000);
    await sleep(2_100); // past the hand-over time: the client counts the extended lease, not the handed one
    expect(lease.held, 'held past its hand-over time').to.equal(true);
    await lease.release();
  });

  it('extends a handed hold its next try found (with replicaAck it takes no message), and keeps it past the handed time', async () => {
    const holder = await open();
    // Hand-over time 2 x 1000 + 100 = 2.1 s; replicaAck makes the woken writer confirm with a try.
    const waiter = await open({ recheckMs: 1_000, replicaAck: { replicas: 1, timeoutMs: 50, onShortfall: 'accept' } });
    const held = await holder.lock('handed-found').acquireWrite();
    const waiting = waiter.lock('handed-found').acquireWrite({ waitMs: 10_000 });
    await eventually('the writer to queue', async () => (await holder.inspect('handed-found')).queue.length === 1);
    await held.release();
    const lease = await waiting;
    await eventually('the extension to its lease', async () => ((await holder.inspect('handed-found')).writer?.ttlMs ?? 0) > 10_000);
    await sleep(2_100); // past the hand-over time
    expect(lease.held, 'held past its hand-over time').to.equal(true);
    await lease.release();
  });

  it('lets a waiting writer in through a continuous stream of overlapping readers', async function () {
    this.timeout(20_000);
    const readers = await open();
    const writers = await open();
    let stop = false;
    let reads = 0;
    const loops = Array.from({ length: 6 }, async (_, i) => {
      await sleep(i * 17); // staggered, so that some reader always holds the lock
      while (!stop) {
        await readers.withRead('hot', () => sleep(100));
        reads++;
      }
    });
    await sleep(300);
    const readsBefore = reads;
    const w = await writers.lock('hot').acquireWrite({ waitMs: 3_000 });
    await w.release();
    expect(reads).to.be.greaterThan(readsBefore); // readers kept coming while it waited
    stop = true;
    await Promise.all(loops);
  });

  it('without writer preference lets readers pass a waiting writer, which may then starve', async function () {
    this.timeout(20_000);
    const readers = await open({ writerPreference: false });
    const writers = await open({ writerPreference: false });
    // A baton of readers: each new reader (a new owner) gets in while the writer waits, before the
    // one it relieves leaves, so a reader holds the lock the whole time and the writer starves.
    let held = await readers.lock('hot').acquireRead();
    let settled = false;
    const writing = writers
      .lock('hot')
      .acquireWrite({ waitMs: 1_500 })
      .then(
        (lease) => lease.release(),
        (e: unknown) => e,
      )
      .finally(() => (settled = true));
    await eventually('the writer to wait', async () => (await readers.inspect('hot')).queue.length === 1);
    let passed = 0;
    while (!settled) {
      const next = await readers.lock('hot').tryAcquireRead();
      expect(next, 'a new reader passes the waiting writer').to.not.equal(null);
      await held.release();
      held = next!;
      passed++;
      await sleep(20);
    }
    await held.release();
    expect(await writing).to.be.instanceOf(AcquireTimeoutError);
    expect(passed).to.be.greaterThan(10);
  });

  it('releases what an acquire may have taken when its outcome is unknown', async () => {
    // ioredis times the command out itself (commandTimeout); node-redis' timeout covers only
    // commands not yet sent, so there the LockClient's own bound (redisTimeoutMs) ends the acquire.
    const impatient =
      ctx.clientKind === 'ioredis'
        ? new LockClient(await ctx.lockRedis({ commandTimeoutMs: 100 }))
        : new LockClient(await ctx.lockRedis(), { redisTimeoutMs: 100 });
    opened.push(impatient);
    // Writes are held back for 400 ms: the acquire is sent but its reply comes too late.
    for (const node of await masters(redis)) await node.call('CLIENT', 'PAUSE', 400, 'WRITE');
    const error = await impatient
      .lock('unknown')
      .acquireWrite({ waitMs: 0 })
      .then(
        () => undefined,
        (e) => e,
      );
    expect(error).to.be.instanceOf(RedisUnavailableError);
    // Once the pause is over the acquire runs, granting, and the best-effort release right after it.
    // (An inspect queues behind the paused acquire on the same connection; one that times out reads as not yet free.)
    const free = () =>
      impatient.inspect('unknown').then(
        (info) => info.mode === 'free',
        () => false,
      );
    await eventually('the late grant given back', async () => (await free()) && (await totalKeys(redis)) === 0, 5_000);
    const other = await (await open()).lock('unknown').tryAcquireWrite();
    expect(other).to.not.equal(null); // no orphan lock to wait out
    await other!.release();
  });

  it('does not hand a contended lock straight back to its releaser', async function () {
    this.timeout(30_000);
    const names = ['a', 'b', 'c', 'd'];
    const grants: string[] = [];
    let stop = false;
    const loops = names.map(async (name) => {
      const locks = await open();
      while (!stop) {
        const lease = await locks.lock('race').acquireWrite({ owner: name, waitMs: 10_000 });
        grants.push(name);
        await sleep(2);
        await lease.release(); // and queue again at once
      }
    });
    while (grants.length < 200) await sleep(20);
    stop = true;
    await Promise.all(loops);
    let repeats = 0;
    for (let i = 1; i < grants.length; i++) if (grants[i] === grants[i - 1]) repeats++;
    const share = repeats / (grants.length - 1);
    expect(share, `share of grants to the previous holder`).to.be.below(0.5);
    // The longest wait, in grants to others between two grants of one writer: with 3 others
    // ahead and each first waiter passed over at most twice, at most (3 + 1) * 3.
    for (const name of names) {
      const mine = grants.flatMap((g, i) => (g === name ? [i] : []));
      const gaps = mine.slice(1).map((at, k) => at - mine[k]! - 1);
      expect(Math.max(...gaps), `longest wait of ${name}, in grants`).to.be.at.most(12);
    }
  });

  it('lets no writer that was not waiting pass a waiting one, not even the one that just released', async () => {
    const releaser = await open();
    const newcomer = await open();
    const held = await releaser.lock('order').acquireWrite({ owner: 'releaser' });
    const waiter = (await open()).lock('order').acquireWrite({ owner: 'waiter', waitMs: 10_000 });
    await eventually('the writer to wait', async () => (await releaser.inspect('order')).queue.length === 1);
    await held.release();
    // Right after the release, before or after the waiter's grant: both must be refused.
    expect(await releaser.lock('order').tryAcquireWrite({ owner: 'releaser' }), 'the releaser again').to.equal(null);
    expect(await newcomer.lock('order').tryAcquireWrite({ owner: 'newcomer' }), 'a newcomer').to.equal(null);
    const lease = await waiter;
    expect(lease.token).to.equal('waiter');
    await lease.release();
  });

  it('grants waiting writers in arrival order with fair: true', async () => {
    const locks = await open({ fair: true });
    const holder = await locks.lock('fifo').acquireWrite();
    const order: string[] = [];
    const arrivals = ['first', 'second', 'third', 'fourth'];
    const waiting: Promise<void>[] = [];
    const queued = async () => (await locks.inspect('fifo')).queue.map((w) => w.owner);
    for (const [i, owner] of arrivals.entries()) {
      // Each on a connection of its own, arriving once the one before it is queued.
      const own = await open({ fair: true });
      waiting.push(
        own
          .lock('fifo')
          .acquireWrite({ owner, waitMs: 10_000 })
          .then(async (lease: Lease) => {
            order.push(owner);
            await sleep(10);
            await lease.release();
          }),
      );
      await eventually(`${owner} to queue`, async () => (await queued()).length === i + 1);
    }
    expect(await queued()).to.deep.equal(arrivals);
    await holder.release();
    await Promise.all(waiting);
    expect(order).to.deep.equal(arrivals);
  });

  it('skips a waiter that stopped re-trying, so a dead waiter never blocks the queue', async () => {
    const locks = await open({ fair: true });
    const holder = await locks.lock('dead-waiter').acquireWrite();
    const keys = locks.lock('dead-waiter').keys;
    // A waiter that queues once (heartbeat 300 ms) and is never heard from again.
    await runScript(
      driverFor(redis),
      'acquireWrite',
      [keys.state, keys.leases, keys.queue],
      [1000, holderArg('write', 'ghost-hold', 'ghost'), 300, '1h'],
    );
    expect((await locks.inspect('dead-waiter')).queue.map((w) => w.owner)).to.deep.equal(['ghost']);
    const next = (await open({ fair: true })).lock('dead-waiter').acquireWrite({ owner: 'alive', waitMs: 5_000 });
    await sleep(50);
    await holder.release();
    const lease = await next;
    expect(lease.token).to.equal('alive');
    expect((await locks.inspect('dead-waiter')).queue).to.deep.equal([]);
    await lease.release();
  });

  it('hands a freed lock to a writer that died while queued, and frees it when its place would have lapsed', async () => {
    const locks = await open();
    const holder = await locks.lock('handed-ghost').acquireWrite();
    const keys = locks.lock('handed-ghost').keys;
    // A writer that queues once (heartbeat 400 ms, lease 60 s) and is never heard from again.
    await runScript(
      driverFor(redis),
      'acquireWrite',
      [keys.state, keys.leases, keys.queue],
      [60_000, holderArg('write', 'ghost-hold', 'ghost'), 400, '0h'],
    );
    await holder.release();
    const handed = await locks.inspect('handed-ghost');
    expect(handed.writer?.owner).to.equal('ghost');
    expect(handed.writer!.ttlMs).to.be.at.most(400); // its queue heartbeat, not its 60 s lease
    expect(handed.queue).to.deep.equal([]);
    await eventually('the handed hold to lapse', async () => (await locks.inspect('handed-ghost')).mode === 'free', 2_000);
    const next = await (await open()).lock('handed-ghost').tryAcquireWrite();
    expect(next).to.not.equal(null);
    await next!.release();
  });

  it("runs a handed hold the writer's next try finds for the writer's lease from that try (no extension needed), also when run twice", async () => {
    const locks = await open();
    const holder = await locks.lock('handed-tried').acquireWrite();
    const keys = locks.lock('handed-tried').keys;
    // The writer's try, as its acquire sends it each time: one hold id, heartbeat 10 s, lease 60 s.
    const tryWrite = () =>
      runScript(
        driverFor(redis),
        'acquireWrite',
        [keys.state, keys.leases, keys.queue],
        [60_000, holderArg('write', 'w.1', 'w'), 10_000, '0h'],
      );
    expect(await tryWrite(), 'refused: it queues').to.have.property('0', 0);
    await holder.release(); // hands the lock to the writer, for its heartbeat (its message goes unread)
    expect((await locks.inspect('handed-tried')).writer!.ttlMs).to.be.at.most(10_000);
    const fence = await tryWrite();
    expect(fence, 'granted for exactly its lease: the bare fence').to.be.a('number');
    const found = await locks.inspect('handed-tried');
    expect(found.writer?.owner).to.equal('w');
    expect(found.writer!.ttlMs, 'its lease, not what was left of the heartbeat').to.be.above(50_000);
    expect(await tryWrite(), 'run twice: the same grant').to.equal(fence);
    expect((await locks.inspect('handed-tried')).fence).to.equal(fence);
    await runScript(driverFor(redis), 'release', [keys.state, keys.leases, keys.queue], [holderArg('write', 'w.1', 'w')]);
    expect((await locks.inspect('handed-tried')).mode).to.equal('free');
  });

  it('takes no handed grant that names an earlier try of the writer (a late message)', async () => {
    const holder = await open({ leaseMs: 60_000 });
    const waiter = await open({ recheckMs: 200 });
    const held = await holder.lock('late-message').acquireWrite();
    const { keys } = holder.lock('late-message');
    let settled = false;
    const waiting = waiter
      .lock('late-message')
      .acquireWrite({ owner: 'w', waitMs: 20_000 })
      .finally(() => (settled = true));
    const place = async () => {
      const [registered, beat] = (await redis.hmget(keys.state, 'g:w', 'q:w')) as [string | null, string | null];
      return { holdId: registered?.split(' ')[0] ?? null, beat };
    };
    await eventually('the writer to queue', async () => (await place()).holdId !== null);
    const first = await place();
    await eventually('its next try', async () => (await place()).beat !== first.beat);
    // A grant naming its earlier place, as a message delayed past the writer's next try would.
    const heard = waiter.stats().wakeups;
    await redis.spublish(handedChannel(keys.channel, first.holdId!.split('.')[0]!), `handed ${first.holdId} ${first.beat} 1 w`);
    await eventually('the writer to hear it', async () => waiter.stats().wakeups === heard + 1);
    // Two more tries: the message came in before the second began.
    for (const step of ['one', 'two']) {
      const last = (await place()).beat;
      await eventually(`try ${step} after the message`, async () => settled || (await place()).beat !== last);
      expect(settled, 'the writer took the late grant').to.equal(false);
    }
    expect((await holder.inspect('late-message')).writer?.owner).to.equal(held.token);
    await held.release();
    const lease = await waiting;
    expect(lease.fence).to.be.above(held.fence);
    await lease.release();
  });

  it('gives back the hold a release handed to a writer that gave up meanwhile', async () => {
    const holder = await open();
    const waiter = await open({ recheckMs: 5_000 }); // a hold handed to it would last 10.1 s
    const held = await holder.lock('given-up').acquireWrite();
    const controller = new AbortController();
    const waiting = waiter
      .lock('given-up')
      .acquireWrite({ waitMs: 20_000, signal: controller.signal })
      .catch((error: unknown) => error);
    await eventually('the writer to queue', async () => (await holder.inspect('given-up')).queue.length === 1);
    // The release is written first and hands the lock over; the writer gives up before it
    // can read the message, and leaves the queue naming its hold.
    const releasing = held.release();
    controller.abort();
    await releasing;
    expect(await waiting).to.be.instanceOf(AcquireAbortedError);
    await eventually('the lock to be free', async () => (await holder.inspect('given-up')).mode === 'free', 1_000);
  });

  it('keeps a waiting writer queued 2 × recheckMs + 100 ms past its last try, and drops it once it stops trying', async () => {
    const locks = await open();
    const holder = await locks.lock('beat').acquireWrite();
    const recheckMs = 1_000;
    const own = await ctx.lockRedis(); // its own connection, cut below as when its process dies
    const waiter = new LockClient(own, { recheckMs });
    const askedAt = performance.now();
    const waiting = waiter
      .lock('beat')
      .acquireWrite({ waitMs: 20_000 })
      .catch((error: unknown) => error);
    await eventually('the writer to queue', async () => (await locks.inspect('beat')).queue.length === 1);
    const [entry] = (await locks.inspect('beat')).queue;
    const since = performance.now() - askedAt; // its last try was at most this long ago
    expect(entry!.ttlMs)
      .to.be.at.most(2 * recheckMs + 100)
      .and.at.least(2 * recheckMs + 100 - since - 2);
    // It dies: no more tries, no clean-up. Its place lapses at its deadline, server time.
    disconnect(own);
    const [left] = (await locks.inspect('beat')).queue;
    await eventually(
      'the dead waiter to drop out of the queue',
      async () => (await locks.inspect('beat')).queue.length === 0,
      left!.ttlMs + 2_000,
    );
    await waiting;
    await waiter.close();
    await holder.release();
  });

  it('renews thousands of held leases, many per script call, and keeps every one', async function () {
    this.timeout(30_000);
    const count = 3_000;
    const locks = await open({ leaseMs: 3_000 }); // renewed every second
    const leases = await Promise.all(Array.from({ length: count }, (_, i) => locks.lock(`held:${i}`).acquireWrite()));
    await sleep(200);
    const before = await scriptCalls(redis);
    await sleep(2_000); // two renewal periods
    const calls = (await scriptCalls(redis)) - before;
    // Calls stop after 250 µs of server time (renewal-batches.test.ts reads SLOWLOG): many leases
    // each, even on a loaded machine; not one call per lease.
    expect(calls).to.be.within(2, (2 * count) / 4);
    expect(leases.every((l) => l.held && !l.signal.aborted)).to.equal(true);
    await Promise.all(leases.map((l) => l.release()));
    expect(await totalKeys(redis)).to.equal(0);
  });
});
