/**
 * RedlockBackend's majority logic over stub nodes, no server: validity and
 * drift, the fence, clean-up of failed attempts (also of nodes that answer
 * late), renewal verdicts, refusal reasons, per-node errors, grants that
 * the releases of a majority handed over.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import {
  type AcquireOutcome,
  type AcquireRequest,
  ALL_HOLDS,
  type BlockReason,
  type ExtendRequest,
  type LockInfo,
} from '../../src/backends/backend.js';
import { type NodeBackend, RedlockBackend } from '../../src/backends/redlock.js';
import { Cleanups } from '../../src/cleanups.js';
import type { Driver } from '../../src/clients/driver.js';
import { type LockMode, QuorumError, ServerOutOfMemoryError } from '../../src/errors.js';
import { type LockKeys, lockKeys } from '../../src/keys/keys.js';

type Answer<T> = T | Error | 'hang' | { delayMs: number; value: T | Error };

/** A node whose answers the test scripts, and which records the calls it got. */
class StubNode implements NodeBackend {
  calls: string[] = [];
  acquireAnswer: Answer<AcquireOutcome> = { granted: true, fence: 1, leaseRemainingMs: 1_000 };
  releaseAnswer: Answer<boolean> = true;
  extendAnswer: Answer<number[]> = [];

  private answer<T>(a: Answer<T>): Promise<T> {
    if (a === 'hang') return new Promise(() => undefined);
    if (a instanceof Error) return Promise.reject(a);
    if (typeof a === 'object' && a !== null && 'delayMs' in a) {
      return sleep(a.delayMs).then(() => (a.value instanceof Error ? Promise.reject(a.value) : a.value));
    }
    return Promise.resolve(a);
  }
  places: (number | undefined)[] = [];
  acquire(r: AcquireRequest): Promise<AcquireOutcome> {
    this.calls.push(`acquire ${r.mode}`);
    this.places.push(r.queuePlaceUs);
    return this.answer(this.acquireAnswer);
  }
  release(_keys: LockKeys, mode: LockMode): Promise<boolean> {
    this.calls.push(`release ${mode}`);
    return this.answer(this.releaseAnswer);
  }
  extend(requests: readonly ExtendRequest[]): Promise<number[]> {
    this.calls.push(`extend ${requests.length}`);
    return this.answer(this.extendAnswer);
  }
  abandon(_keys: LockKeys, _owner: string, drop = ''): Promise<void> {
    this.calls.push(`abandon ${drop === ALL_HOLDS ? 'all' : drop === '' ? 'withdraw' : `hold ${drop}`}`);
    return Promise.resolve();
  }
  keepPlaceAnswer: Answer<readonly (number | undefined)[]> = [];
  keepPlace(): Promise<readonly (number | undefined)[]> {
    this.calls.push('keepPlace');
    return this.answer(this.keepPlaceAnswer);
  }
  inspect(): Promise<LockInfo> {
    return Promise.reject(new Error('not stubbed'));
  }
}

const granted = (fence: number, leaseRemainingMs = 1_000): AcquireOutcome => ({ granted: true, fence, leaseRemainingMs });
const refused = (reason: BlockReason, retryAfterMs = 100): AcquireOutcome => ({ granted: false, retryAfterMs, reason });

const fakeClients = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ cluster: false, addresses: () => [`127.0.0.1:${7000 + i}`] }) as unknown as Driver);

function setup(n: number, nodeTimeoutMs = 100) {
  const nodes = Array.from({ length: n }, () => new StubNode());
  const backend = new RedlockBackend(fakeClients(n), nodes, 'rwlock', { driftFactor: 0.01, driftMs: 2, nodeTimeoutMs }, new Cleanups());
  return { nodes, backend };
}

const keys = lockKeys('rwlock', 'r');
const request = (mode: LockMode = 'write', extra: Partial<AcquireRequest> = {}): AcquireRequest => ({
  resource: 'r',
  keys,
  mode,
  owner: 'me',
  holdId: 'h1',
  leaseMs: 1_000,
  honourIntent: true,
  waitBeatMs: 0,
  fair: false,
  ...extra,
});

describe('RedlockBackend (majority logic, stub nodes)', () => {
  it("grants on a majority: lease left = the majority's shortest, less the drift; fence = the highest", async () => {
    const { nodes, backend } = setup(5);
    const answers = [granted(10, 1_000), granted(30, 990), granted(20, 980), refused('write'), new Error('down')];
    nodes.forEach((node, i) => (node.acquireAnswer = answers[i]!));
    const outcome = await backend.acquire(request());
    // Sorted lease left: 1000, 990, 980 -> the third (quorum) is 980; drift = ceil(1000 * 0.01) + 2 = 12.
    expect(outcome).to.deep.equal({ granted: true, fence: 30, leaseRemainingMs: 968 });
    expect(backend.driftOf(30_000)).to.equal(302);
  });

  it('returns as soon as a majority granted, without waiting for a hung node', async () => {
    const { nodes, backend } = setup(3, 5_000);
    nodes[2]!.acquireAnswer = 'hang';
    const started = performance.now();
    expect((await backend.acquire(request())).granted).to.equal(true);
    expect(performance.now() - started).to.be.below(100);
  });

  it('takes back what a failed attempt took: releases the grants, and a late grant when it comes', async () => {
    const { nodes, backend } = setup(3, 50);
    nodes[0]!.acquireAnswer = granted(1);
    nodes[1]!.acquireAnswer = refused('write', 70);
    nodes[2]!.acquireAnswer = { delayMs: 120, value: granted(2) }; // answers after the node timeout
    const outcome = await backend.acquire(request());
    expect(outcome).to.deep.equal({ granted: false, retryAfterMs: 70, reason: 'write' });
    expect(nodes[0]!.calls).to.deep.equal(['acquire write', 'release write']);
    expect(nodes[1]!.calls).to.deep.equal(['acquire write']);
    await sleep(150);
    expect(nodes[2]!.calls).to.deep.equal(['acquire write', 'release write']);
  });

  it("drops only the attempt's own hold on a node whose outcome is unknown (a reentrant owner keeps its others)", async () => {
    const { nodes, backend } = setup(3);
    nodes[0]!.acquireAnswer = refused('read');
    nodes[1]!.acquireAnswer = refused('read');
    nodes[2]!.acquireAnswer = new Error('connection reset');
    await backend.acquire(request());
    expect(nodes[2]!.calls).to.deep.equal(['acquire write', 'abandon hold h1']);
  });

  it("rejects with the servers' refusal when every node that did not answer refused out of memory, and undoes nothing there", async () => {
    const { nodes, backend } = setup(3);
    const oom = () => new Error("OOM command not allowed when used memory > 'maxmemory'.");
    nodes[0]!.acquireAnswer = granted(1);
    nodes[1]!.acquireAnswer = oom();
    nodes[2]!.acquireAnswer = oom();
    const error = await backend.acquire(request('write', { waitBeatMs: 1_100 })).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ServerOutOfMemoryError);
    expect((error as Error).message).to.match(
      /^acquiring the write lock on "r" on node 1 \(127\.0\.0\.1:7001\) was refused: the Redis server is out of memory/,
    );
    // The grant is given back; the nodes that refused ran nothing, and keep the writer's place there.
    expect(nodes.map((n) => n.calls)).to.deep.equal([['acquire write', 'release write'], ['acquire write'], ['acquire write']]);
  });

  it('a node out of memory among a majority that decides counts for nothing more', async () => {
    const { nodes, backend } = setup(3);
    nodes[0]!.acquireAnswer = refused('write', 50);
    nodes[1]!.acquireAnswer = refused('write', 60);
    nodes[2]!.acquireAnswer = new Error("OOM command not allowed when used memory > 'maxmemory'.");
    expect(await backend.acquire(request())).to.deep.equal({ granted: false, retryAfterMs: 50, reason: 'write' });
    expect(nodes[2]!.calls).to.deep.equal(['acquire write']);
  });

  it("keeps a waiting writer's place on every node, each node's heartbeat as it answered", async () => {
    const { nodes, backend } = setup(3, 30);
    nodes[0]!.keepPlaceAnswer = [1_000];
    nodes[1]!.keepPlaceAnswer = new Error('down');
    nodes[2]!.keepPlaceAnswer = [undefined];
    expect(await backend.keepPlace(request('write', { waitBeatMs: 1_100 }))).to.deep.equal([1_000, undefined, undefined]);
  });

  it('fails with a QuorumError naming each node when too many did not answer, after undoing the grants', async () => {
    const { nodes, backend } = setup(3, 30);
    nodes[0]!.acquireAnswer = granted(1);
    nodes[1]!.acquireAnswer = new Error('ECONNREFUSED');
    nodes[2]!.acquireAnswer = 'hang';
    const error = (await backend.acquire(request()).catch((e: unknown) => e)) as QuorumError;
    expect(error).to.be.instanceOf(QuorumError);
    expect(error.nodes.map((n) => [n.address, n.outcome])).to.deep.equal([
      ['127.0.0.1:7000', 'ok'],
      ['127.0.0.1:7001', 'error'],
      ['127.0.0.1:7002', 'timeout'],
    ]);
    expect(error.message).to.include('needs a majority, 2 of 3 Redis nodes, but 2 did not answer').and.to.include('ECONNREFUSED');
    expect(nodes[0]!.calls).to.deep.equal(['acquire write', 'release write']);
  });

  it('refuses a majority grant that took longer than its validity, and gives it back', async () => {
    const { nodes, backend } = setup(3, 1_000);
    // The servers say 50 ms are left of the 1 s lease; 50 ms went by: 50 - 50 - drift (1 + 2) < 0. (The
    // nodes' bound is the lease, 1 s: a loaded machine's late answers still come within it.)
    for (const node of nodes) node.acquireAnswer = { delayMs: 50, value: granted(1, 50) };
    const error = (await backend.acquire(request('write', { leaseMs: 1_000 })).catch((e: unknown) => e)) as Error;
    expect(error).to.be.instanceOf(QuorumError);
    expect(error.message).to.match(/left no validity of the 1000 ms lease/);
    await sleep(100);
    for (const node of nodes) expect(node.calls).to.include('release write');
  });

  it('withdraws a writer from the queue of the nodes that refused it, once it got the lock', async () => {
    const { nodes, backend } = setup(3);
    nodes[2]!.acquireAnswer = refused('queue');
    const outcome = await backend.acquire(request('write', { waitBeatMs: 1_000 }));
    expect(outcome.granted).to.equal(true);
    await sleep(10);
    // By its hold id: a newer acquire of the same owner keeps its place there.
    expect(nodes[2]!.calls).to.deep.equal(['acquire write', 'abandon hold h1']);
  });

  it("reports 'upgrade' (give up now) only when upgrade conflicts bar every majority", async () => {
    const { nodes, backend } = setup(3);
    nodes[0]!.acquireAnswer = refused('read');
    nodes[1]!.acquireAnswer = refused('read');
    nodes[2]!.acquireAnswer = refused('upgrade');
    expect(await backend.acquire(request())).to.include({ reason: 'read' });
    nodes[1]!.acquireAnswer = refused('upgrade');
    expect(await backend.acquire(request())).to.include({ reason: 'upgrade' });
  });

  it('keeps a lease while a majority renews it; reports it lost (0) once fewer do; undecided ones (NaN) on their own', async () => {
    const { nodes, backend } = setup(3, 30);
    const requests: ExtendRequest[] = [
      { keys, owner: 'a', leaseMs: 1_000, holdIds: ['a1', 'a2'] },
      { keys, owner: 'b', leaseMs: 1_000, holdIds: ['b1'] },
    ];
    nodes[0]!.extendAnswer = [1_000, 0];
    nodes[1]!.extendAnswer = [1_000, 1_000];
    nodes[2]!.extendAnswer = [0, 0];
    expect(await backend.extend(requests)).to.deep.equal([988, 0]);
    await sleep(10);
    // b's leftover on node 1 goes too: its own hold, by id, never every hold of its owner.
    expect(nodes[1]!.calls.filter((c) => c.startsWith('abandon'))).to.deep.equal(['abandon hold b1']);
    nodes[2]!.extendAnswer = 'hang';
    nodes[0]!.extendAnswer = [1_000, 0];
    nodes[1]!.extendAnswer = [0, 1_000];
    // a and b each renewed on one node; the hung node could make either a majority: nothing decided.
    expect(await backend.extend(requests).catch((e: unknown) => e)).to.be.instanceOf(QuorumError);
    // A lease a majority renewed stays held while another is undecided (NaN: asked again next period).
    nodes[1]!.extendAnswer = [1_000, 1_000];
    expect(await backend.extend(requests)).to.deep.equal([988, Number.NaN]);
  });

  it('releases when a majority released; not held when a majority did not hold it', async () => {
    const { nodes, backend } = setup(3);
    nodes[2]!.releaseAnswer = false;
    expect(await backend.release(keys, 'write', 'me', 'h1')).to.equal(true);
    nodes[1]!.releaseAnswer = false;
    expect(await backend.release(keys, 'write', 'me', 'h1')).to.equal(false);
    nodes[1]!.releaseAnswer = new Error('down');
    expect(await backend.release(keys, 'write', 'me', 'h1').catch((e: unknown) => e)).to.be.instanceOf(QuorumError);
  });

  it("queues a waiting writer at one place on every node from its second try: the median of the nodes' own places", async () => {
    const { nodes, backend } = setup(3);
    // Each node placed the first try by its own clock; one node's clock runs far ahead.
    const queuedAt = (us: number): AcquireOutcome => ({
      granted: false,
      retryAfterMs: 100,
      reason: 'write',
      queuedUntil: [1],
      queuedAtUs: [us],
    });
    [5_000, 60_005_000, 4_990].forEach((us, i) => (nodes[i]!.acquireAnswer = queuedAt(us)));
    const first = request('write', { waitBeatMs: 1_100 });
    await backend.acquire(first);
    await backend.acquire(first);
    [6_000, 60_006_000, 5_990].forEach((us, i) => (nodes[i]!.acquireAnswer = queuedAt(us)));
    const later = request('write', { waitBeatMs: 1_100, holdId: 'h2' });
    await backend.acquire(later);
    await backend.acquire(later);
    // The first try of each has no place (the nodes' clocks give it); then the median, never a client's clock.
    for (const node of nodes) expect(node.places).to.deep.equal([undefined, 5_000, undefined, 6_000]);
    // A read, and a write that does not wait, do not queue: no place.
    await backend.acquire(request('read'));
    await backend.acquire(request('write'));
    for (const node of nodes) expect(node.places.slice(4)).to.deep.equal([undefined, undefined]);
  });

  it("a release a majority no longer holds drops this hold alone on every node, never the owner's others", async () => {
    const { nodes, backend } = setup(3);
    for (const node of nodes) node.releaseAnswer = false; // released already, by a call whose outcome was unknown
    expect(await backend.release(keys, 'read', 'me', 'h7')).to.equal(false);
    await sleep(1);
    for (const node of nodes) expect(node.calls).to.deep.equal(['release read', 'abandon hold h7']);
  });

  it('names a node the others decided without as not waited for, not as timed out', async () => {
    const { nodes, backend } = setup(3, 5_000);
    // A majority granted, but too little of its lease was left: the grant fails; the third node was not awaited.
    nodes[0]!.acquireAnswer = granted(1, 2);
    nodes[1]!.acquireAnswer = granted(2, 2);
    nodes[2]!.acquireAnswer = 'hang';
    const error = (await backend.acquire(request()).catch((e: unknown) => e)) as QuorumError;
    expect(error).to.be.instanceOf(QuorumError);
    expect(error.nodes[2]).to.include({ outcome: 'pending' });
    expect(error.message).to.not.match(/no answer within/);
  });

  it("reports where a refused writer queued, by node, so that the nodes' releases can hand it the lock", async () => {
    const { nodes, backend } = setup(3);
    nodes[0]!.acquireAnswer = { granted: false, retryAfterMs: 50, reason: 'write', queuedUntil: [9_000] };
    nodes[1]!.acquireAnswer = refused('write', 40); // a node that did not queue it
    nodes[2]!.acquireAnswer = { granted: false, retryAfterMs: 60, reason: 'write', queuedUntil: [9_001] };
    expect(await backend.acquire(request('write', { waitBeatMs: 1_100 }))).to.deep.equal({
      granted: false,
      retryAfterMs: 40,
      reason: 'write',
      queuedUntil: [9_000, undefined, 9_001],
    });
  });

  it('takes a grant the releases of a majority handed over: fence the highest, validity the handed length less the drift', () => {
    const { nodes, backend } = setup(3);
    const r = request('write', { waitBeatMs: 1_100, leaseMs: 30_000 });
    const until = [9_000, 9_001, 9_002];
    const mine = (i: number, fence: number) => ({ holdId: 'h1', queuedUntil: until[i]!, fence });
    // One node so far: the others' messages may still come.
    expect(backend.takeHanded(r, until, [mine(0, 7)], 5)).to.equal('wait');
    // Another writer's hold, and one of an earlier try of this writer (another heartbeat), do not count.
    expect(backend.takeHanded(r, until, [mine(0, 7), { holdId: 'h0', queuedUntil: 9_001, fence: 8 }], 5)).to.equal('wait');
    expect(backend.takeHanded(r, until, [mine(0, 7), { holdId: 'h1', queuedUntil: 8_000, fence: 8 }], 5)).to.equal('wait');
    expect(backend.takeHanded(r, until, [undefined, { holdId: 'h0', queuedUntil: 9_001, fence: 8 }], 5)).to.equal(undefined);
    // A majority: 1,100 ms handed (the heartbeat, shorter than the lease) less the drift of what was
    // handed (13 ms), not of the 30 s lease (302 ms), nor of a 120 s one (1,202 ms: nothing left).
    expect(backend.takeHanded(r, until, [mine(0, 7), undefined, mine(2, 9)], 5)).to.deep.equal({ fence: 9, leaseRemainingMs: 1_087 });
    const long = request('write', { waitBeatMs: 1_100, leaseMs: 120_000 });
    expect(backend.takeHanded(long, until, [mine(0, 7), undefined, mine(2, 9)], 5)).to.deep.equal({ fence: 9, leaseRemainingMs: 1_087 });
    // Too late: less than a quarter of the handed length left after the drift; the next try finds the holds.
    expect(backend.takeHanded(r, until, [mine(0, 7), undefined, mine(2, 9)], 820)).to.equal(undefined);
    expect(nodes.every((n) => n.calls.length === 0)).to.equal(true); // nothing sent
  });
});
