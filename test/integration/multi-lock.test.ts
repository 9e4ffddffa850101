/**
 * Several locks at once: acquireAll / withLocks / withWriteAll take them in
 * one canonical order, so callers asking for overlapping sets in opposite
 * orders never deadlock; the whole set has one waitMs and one signal, and
 * what was taken is released when the rest cannot be had.
 */
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import {
  AcquireAbortedError,
  AcquireTimeoutError,
  InvalidArgumentError,
  type Lease,
  LeaseGroup,
  type LockClient,
  LockLostError,
} from '../../src/index.js';
import { forEachTopology, NODE_REDIS_IN_CI_AND_GLIDE, type TopologyContext } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { suiteLockClients } from '../support/lock-clients.js';
import { totalKeys } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';
import { targetOf } from '../support/targets.js';
import { runWorkerProcess } from '../support/worker-process.js';

const WORKER = fileURLToPath(new URL('../workers/pairs-worker.ts', import.meta.url));

interface PairsResult {
  operations: number;
  violations: number;
  timeouts: number;
  longestWaitMs: number;
  waits: number;
}

function runWorker(ctx: TopologyContext, pairs: string, rounds: number): Promise<PairsResult> {
  return runWorkerProcess(WORKER, { RWLOCK_TARGET: JSON.stringify(targetOf(ctx)), RWLOCK_PAIRS: pairs, RWLOCK_ROUNDS: String(rounds) });
}

forEachTopology('several locks at once', { clients: NODE_REDIS_IN_CI_AND_GLIDE }, (ctx) => {
  const clients = suiteLockClients(ctx, { recheckMs: 50 });
  const open = () => clients.open();

  it('takes every lock in the canonical order whatever the order asked, and returns the leases in the order asked', async () => {
    const locks = open();
    const order: string[] = [];
    locks.on('acquired', (lease) => order.push(lease.resource));
    const requests = [
      { resource: 'acct:3', mode: 'write' },
      { resource: 'acct:1', mode: 'read' },
      { resource: 'acct:2', mode: 'write' },
    ] as const;
    const group = await locks.acquireAll(requests);
    expect(group).to.be.instanceOf(LeaseGroup);
    expect(group.leases.map((l) => [l.resource, l.mode])).to.deep.equal(requests.map((r) => [r.resource, r.mode]));
    expect(order).to.deep.equal([...order].sort((a, b) => (locks.lock(a).keys.state < locks.lock(b).keys.state ? -1 : 1)));
    expect(order).to.have.members(['acct:1', 'acct:2', 'acct:3']);
    expect(group.get('acct:2')?.mode).to.equal('write');
    expect(group.held).to.equal(true);
    expect((await locks.inspect('acct:3')).writer?.owner).to.equal(group.get('acct:3')!.token);
    expect((await locks.inspect('acct:1')).readers).to.have.length(1);
    await group.release();
    expect(group.held).to.equal(false);
    expect(await totalKeys(clients.redis)).to.equal(0);
  });

  it('refuses an empty set, a bad mode, and the same lock twice, before sending anything', async () => {
    const locks = open();
    expect(await rejection(locks.acquireAll([]))).to.be.instanceOf(InvalidArgumentError);
    expect(await rejection(locks.acquireAll([{ resource: 'a', mode: 'exclusive' as 'write' }]))).to.be.instanceOf(InvalidArgumentError);
    const twice = await rejection(
      locks.acquireAll([
        { resource: 'x', mode: 'read' },
        { resource: '{x}', mode: 'write' },
      ]),
    );
    expect(twice).to.be.instanceOf(InvalidArgumentError);
    expect(twice.message).to.include('same lock');
    expect(await totalKeys(clients.redis)).to.equal(0);
  });

  it('bounds the whole set by waitMs, and releases what it took when the rest cannot be had', async () => {
    const locks = open();
    const other = open();
    // The set's lock that comes last in the canonical order is held elsewhere: the others are taken first.
    const [first, last] = ['acct:1', 'acct:2'].sort((a, b) => (locks.lock(a).keys.state < locks.lock(b).keys.state ? -1 : 1));
    const held = await other.lock(last!).acquireWrite();
    const started = performance.now();
    const error = await rejection(locks.withWriteAll([last!, first!], () => 'never', { waitMs: 300 }));
    const took = performance.now() - started;
    expect(error).to.be.instanceOf(AcquireTimeoutError);
    expect(error).to.include({ waitMs: 300, resource: last, mode: 'write' });
    expect(error.message).to.include("after 1 of the set's 2 locks; those were released");
    expect(took)
      .to.be.at.least(290)
      .and.below(300 + 1_000);
    expect((await locks.inspect(first!)).mode).to.equal('free');
    expect(locks.stats()).to.include({ acquires: 1, releases: 1, heldLeases: 0, timeouts: 1 });
    await held.release();
  });

  it('ends the wait on its signal, and when a lock it took meanwhile is lost', async () => {
    const locks = open();
    const other = open();
    const [first, last] = ['job:a', 'job:b'].sort((a, b) => (locks.lock(a).keys.state < locks.lock(b).keys.state ? -1 : 1));
    const held = await other.lock(last!).acquireWrite();
    const controller = new AbortController();
    const aborted = rejection(
      locks.acquireAll(
        [
          { resource: first!, mode: 'write' },
          { resource: last!, mode: 'read' },
        ],
        { signal: controller.signal, waitMs: 20_000 },
      ),
    );
    await eventually('the first lock to be taken', async () => (await locks.inspect(first!)).mode === 'write');
    controller.abort(new Error('shutting down'));
    expect(await aborted).to.be.instanceOf(AcquireAbortedError);
    expect((await locks.inspect(first!)).mode).to.equal('free');

    // Now the first lock is lost while the set waits for the second: the wait ends with the loss.
    const waiting = rejection(
      locks.acquireAll(
        [
          { resource: first!, mode: 'write' },
          { resource: last!, mode: 'write' },
        ],
        { waitMs: 20_000, leaseMs: 400 },
      ),
    );
    await eventually('the first lock to be taken', async () => (await locks.inspect(first!)).mode === 'write');
    const error = await waiting; // its 400 ms lease, not renewed, runs out
    expect(error).to.be.instanceOf(LockLostError);
    expect(error).to.include({ resource: first });
    await held.release();
  });

  it('runs withLocks under every lease, nested calls reuse their owners, and the signal aborts on any loss', async () => {
    const locks = open();
    let inner: Lease | undefined;
    const result = await locks.withLocks(
      [
        { resource: 'doc:1', mode: 'read' },
        { resource: 'doc:2', mode: 'write' },
      ],
      async (group) => {
        expect(group.signal.aborted).to.equal(false);
        inner = await locks.lock('doc:2').acquireWrite({ waitMs: 0 }); // reentrant: same owner
        expect(inner.token).to.equal(group.get('doc:2')!.token);
        await inner.release();
        return 42;
      },
    );
    expect(result).to.equal(42);
    expect(await totalKeys(clients.redis)).to.equal(0);
    const short = await locks.acquireAll(
      [
        { resource: 'doc:1', mode: 'read' },
        { resource: 'doc:2', mode: 'read' },
      ],
      { leaseMs: 200 },
    );
    await eventually('the group signal to abort as its leases run out', () => short.signal.aborted);
    expect(short.signal.reason).to.be.instanceOf(LockLostError);
    expect(short.held).to.equal(false);
    expect(() => short.assertHeld()).to.throw(LockLostError);
  });

  it('a naive nested acquisition in opposite orders deadlocks until timeout; the same pairs with withWriteAll do not', async function () {
    this.timeout(30_000);
    const [a, b] = [open(), open()];
    // Naive: each takes its first lock, then (once both hold one) asks for the other's.
    let holding = 0;
    const bothHold = () => eventually('both to hold their first lock', () => holding === 2);
    const naive = (locks: LockClient, x: string, y: string) =>
      locks.withWrite(x, async () => {
        holding++;
        await bothHold();
        return locks.withWrite(y, () => 'done', { waitMs: 300 });
      });
    const outcomes = await Promise.allSettled([naive(a, 'n:1', 'n:2'), naive(b, 'n:2', 'n:1')]);
    expect(
      outcomes.some((o) => o.status === 'rejected' && o.reason instanceof AcquireTimeoutError),
      'a deadlock broken by a timeout',
    ).to.equal(true);
    const naiveTimeouts = a.stats().timeouts + b.stats().timeouts;

    let done = 0;
    const ordered = (locks: LockClient, x: string, y: string) =>
      Promise.all(Array.from({ length: 50 }, () => locks.withWriteAll([x, y], () => void done++, { waitMs: 10_000 })));
    await Promise.all([ordered(a, 'o:1', 'o:2'), ordered(b, 'o:2', 'o:1')]);
    expect(done).to.equal(100);
    expect(a.stats().timeouts + b.stats().timeouts).to.equal(naiveTimeouts); // none more
  });

  it('processes taking overlapping pairs in opposite orders finish: no deadlock, no violation, no timeout, bounded waits', async function () {
    this.timeout(180_000);
    const ROUNDS = 150;
    // Three resources, every pair in both orders across four processes (on a Cluster: three slots).
    const results = await Promise.all([
      runWorker(ctx, 'a:b,b:c', ROUNDS),
      runWorker(ctx, 'b:a,c:b', ROUNDS),
      runWorker(ctx, 'c:a,a:b', ROUNDS),
      runWorker(ctx, 'a:c,b:a', ROUNDS),
    ]);
    const operations = results.reduce((n, r) => n + r.operations, 0);
    const longest = Math.max(...results.map((r) => r.longestWaitMs));
    expect(
      results.reduce((n, r) => n + r.violations, 0),
      'exclusion violations',
    ).to.equal(0);
    expect(
      results.reduce((n, r) => n + r.timeouts, 0),
      'timeouts (a deadlock would end in them)',
    ).to.equal(0);
    expect(operations).to.equal(4 * 2 * ROUNDS);
    expect(
      results.reduce((n, r) => n + r.waits, 0),
      'contended acquisitions',
    ).to.be.greaterThan(0);
    expect(longest, 'longest wait for one lock, ms').to.be.below(10_000);
    // Each transfer moved one unit: the counters sum to zero, and no update was lost.
    const sum = (await Promise.all(['a', 'b', 'c'].map((r) => clients.redis.get(`data:{${r}}`)))).reduce((n, v) => n + Number(v ?? 0), 0);
    expect(sum).to.equal(0);
    console.log(`      ${operations} transfers in 4 processes, longest wait ${Math.round(longest)} ms, 0 violations, 0 timeouts`);
  });
});
