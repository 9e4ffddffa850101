import { expect } from 'chai';
import sinon from 'sinon';
import type { ExtendRequest, LockBackend } from '../../src/backends/backend.js';
import type { ExtendRound } from '../../src/backends/extend-groups.js';
import { Deadlines } from '../../src/deadlines.js';
import { LockLostError, LockNotHeldError, ServerRefusedError } from '../../src/errors.js';
import { Holdings, type LossEvent } from '../../src/holdings.js';
import { lockKeys } from '../../src/keys/keys.js';
import { RELEASE_CALLS_IN_FLIGHT } from '../../src/paced.js';

// Control flow and timing of renewal and loss, with a scripted backend: the
// behaviour against real Redis is covered by the integration tests.
describe('Holdings (renewal timing and loss)', () => {
  let clock: sinon.SinonFakeTimers;
  let extendCalls: ExtendRequest[][];
  let extendReply: (requests: readonly ExtendRequest[]) => number[];
  let released: string[];
  let losses: LossEvent[];
  let holdings: Holdings;
  let onAbandon: () => void;

  const backend: LockBackend = {
    keysFor: (resource) => lockKeys('p', resource),
    acquire: () => Promise.reject(new Error('unused')),
    release: async (_keys, _mode, owner) => {
      released.push(owner);
      return true;
    },
    extend: async (requests) => {
      extendCalls.push([...requests]);
      return extendReply(requests);
    },
    abandon: async () => onAbandon(),
    keepPlace: () => Promise.reject(new Error('unused')),
    inspect: () => Promise.reject(new Error('unused')),
    handsOver: true,
    abandonEndsByItself: false,
    takeHanded: () => undefined,
  };

  beforeEach(() => {
    clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] });
    extendCalls = [];
    extendReply = (r) => r.map((x) => x.leaseMs);
    released = [];
    losses = [];
    onAbandon = () => undefined;
    holdings = new Holdings(backend, 3000, (e) => losses.push(e), new Deadlines(), 1000);
  });
  afterEach(() => clock.restore());

  const grant = (resource: string, owner: string, autoRenew = true, leaseMs = 3000) =>
    holdings.add(
      {
        resource,
        keys: lockKeys('p', resource),
        owner,
        mode: 'write',
        holdId: `h-${owner}`,
        leaseMs,
        honourIntent: true,
        waitBeatMs: 0,
        fair: false,
      },
      { granted: true, fence: 1, leaseRemainingMs: leaseMs },
      autoRenew,
      performance.now(),
    );

  it('renews every auto-renewed lease in one batched call each lease/3', async () => {
    const leases = Array.from({ length: 50 }, (_, i) => grant(`r${i}`, `o${i}`));
    await clock.tickAsync(999);
    expect(extendCalls).to.have.length(0);
    await clock.tickAsync(1);
    expect(extendCalls).to.have.length(1);
    expect(extendCalls[0]).to.have.length(50);
    await clock.tickAsync(1000 * 30);
    expect(extendCalls).to.have.length(31);
    expect(leases.every((l) => l.held && !l.signal.aborted)).to.equal(true);
    expect(losses).to.have.length(0);
  });

  it('does not renew leases with an explicit lease, and reports them lost when it runs out', async () => {
    const lease = grant('r', 'o', false, 500);
    // Lost 1 ms before sentAt + leaseMs: the server's deadline counts whole ms, so it may end that much sooner.
    await clock.tickAsync(498);
    expect(lease.signal.aborted).to.equal(false);
    await clock.tickAsync(1);
    expect(extendCalls).to.have.length(0);
    expect(lease.signal.aborted).to.equal(true);
    expect(lease.signal.reason).to.be.instanceOf(LockLostError);
    expect(losses).to.have.length(1);
    await lease.release().then(
      () => expect.fail('release of a lost lease must reject'),
      (e) => expect(e).to.be.instanceOf(LockNotHeldError),
    );
    expect(released).to.deep.equal([]); // nothing sent for a lease known to be lost
  });

  it('gives a lease that ran out back to Redis only after its holder was told', async () => {
    // Given back first, another process could be granted the lock at once while this holder's
    // signal still said held: the history check of the fault suite once saw such an overlap.
    const lease = grant('r', 'o', false, 500);
    const seenAtGiveBack: [boolean, number][] = [];
    onAbandon = () => void seenAtGiveBack.push([lease.signal.aborted, losses.length]);
    await clock.tickAsync(499);
    expect(seenAtGiveBack).to.deep.equal([[true, 1]]);
  });

  it('gives back the leases a stall lost together a few at a time, every one of them', async () => {
    const leases = Array.from({ length: 100 }, (_, i) => grant(`r${i}`, `o${i}`, false, 500));
    let inFlight = 0;
    let most = 0;
    const answers: (() => void)[] = [];
    const abandon = backend.abandon;
    backend.abandon = () => {
      most = Math.max(most, ++inFlight);
      return new Promise<void>((resolve) =>
        answers.push(() => {
          inFlight--;
          resolve();
        }),
      );
    };
    try {
      await clock.tickAsync(499);
      expect(leases.every((l) => l.signal.aborted)).to.equal(true);
      expect(inFlight, 'sent at once').to.equal(RELEASE_CALLS_IN_FLIGHT);
      let answered = 0;
      while (answers.length > 0) {
        answers.shift()!();
        answered++;
        await clock.tickAsync(0);
      }
      expect(answered, 'every lease given back').to.equal(100);
      expect(most, 'the most in flight at once').to.equal(RELEASE_CALLS_IN_FLIGHT);
    } finally {
      backend.abandon = abandon;
    }
  });

  it('gives back the leases lost later while earlier give-backs hang: each waits redisTimeoutMs at most', async () => {
    // A node that takes calls but never answers them must not hold up the give-backs of every other lock.
    for (let i = 0; i < RELEASE_CALLS_IN_FLIGHT; i++) grant(`hung${i}`, `h${i}`, false, 500);
    grant('later', 'l', false, 800);
    const sent: string[] = [];
    const abandon = backend.abandon;
    backend.abandon = async (keys) => {
      sent.push(keys.state);
      if (keys.state.includes('hung')) await new Promise(() => undefined);
    };
    try {
      await clock.tickAsync(799);
      expect(losses, 'leases lost').to.have.length(RELEASE_CALLS_IN_FLIGHT + 1);
      expect(sent, 'sent at once').to.have.length(RELEASE_CALLS_IN_FLIGHT);
      await clock.tickAsync(1000); // the hung calls' bound (redisTimeoutMs) passed
      expect(sent).to.include(lockKeys('p', 'later').state);
    } finally {
      backend.abandon = abandon;
    }
  });

  it('keeps a give-back in flight past redisTimeoutMs while a backend that ends its own calls (redlock) has not', async () => {
    // Each quorum call waits nodeTimeoutMs (3 s here) for its nodes: freed at redisTimeoutMs, its place
    // would let another call start while it still runs, 16 more every redisTimeoutMs.
    const reported: number[] = []; // when each give-back's failure was reported
    const observer = { released: () => undefined, renewed: () => undefined, renewalFailed: () => undefined };
    holdings = new Holdings(backend, 3000, (e) => losses.push(e), new Deadlines(), 1000, {
      ...observer,
      backgroundError: () => void reported.push(performance.now()),
    });
    for (let i = 0; i < RELEASE_CALLS_IN_FLIGHT; i++) grant(`slow${i}`, `s${i}`, false, 500);
    grant('later', 'l', false, 800);
    const sent: string[] = [];
    const { abandon } = backend;
    const mutable = backend as { abandonEndsByItself: boolean };
    mutable.abandonEndsByItself = true;
    backend.abandon = async (keys) => {
      sent.push(keys.state);
      if (keys.state.includes('slow')) await new Promise((resolve) => setTimeout(resolve, 3_000));
    };
    try {
      await clock.tickAsync(2_499); // the slow calls' redisTimeoutMs passed at 1500, their own end is at 3500
      expect(sent, 'sent by 2.5 s').to.have.length(RELEASE_CALLS_IN_FLIGHT);
      // Each is still reported at its bound, while it keeps its place.
      expect(reported, 'give-backs reported unanswered by 2.5 s').to.have.length(RELEASE_CALLS_IN_FLIGHT);
      expect(Math.max(...reported), 'reported at redisTimeoutMs').to.be.at.most(1_501);
      await clock.tickAsync(1_001);
      expect(sent, 'sent once the first call ended').to.include(lockKeys('p', 'later').state);
    } finally {
      backend.abandon = abandon;
      mutable.abandonEndsByItself = false;
    }
  });

  it("gives a lease that ran out back even when a 'lost' listener throws", async () => {
    holdings = new Holdings(
      backend,
      3000,
      () => {
        throw new Error('a lost listener that throws');
      },
      new Deadlines(),
      1000,
    );
    const lease = grant('r', 'o', false, 500);
    let givenBack = 0;
    onAbandon = () => void givenBack++;
    const thrown = await clock.tickAsync(499).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((thrown as Error | undefined)?.message).to.equal('a lost listener that throws');
    expect(lease.signal.aborted).to.equal(true);
    expect(givenBack).to.equal(1);
  });

  it('aborts the signal when renewal finds the lock gone', async () => {
    const kept = grant('a', 'o1');
    const gone = grant('b', 'o2');
    extendReply = (r) => r.map((x) => (x.owner === 'o2' ? 0 : x.leaseMs));
    await clock.tickAsync(1000);
    expect(gone.signal.aborted).to.equal(true);
    expect((gone.signal.reason as LockLostError).resource).to.equal('b');
    expect(kept.signal.aborted).to.equal(false);
    await gone.extend().then(
      () => expect.fail('extend of a lost lease must reject'),
      (e) => expect(e).to.be.instanceOf(LockLostError),
    );
  });

  it('keeps renewing the other leases when one node cannot be asked (NaN), and retries that one', async () => {
    const a = grant('a', 'o1');
    const b = grant('b', 'o2');
    let unreachable = true;
    extendReply = (r) => r.map((x) => (x.owner === 'o2' && unreachable ? NaN : x.leaseMs));
    await clock.tickAsync(1000); // a period without an answer for b, within its lease
    expect(a.signal.aborted || b.signal.aborted).to.equal(false);
    unreachable = false;
    await clock.tickAsync(2500); // b was renewed at the next period, so its first deadline passed harmlessly
    expect(b.held && !b.signal.aborted).to.equal(true);
    expect(losses).to.have.length(0);
  });

  it('reports loss when Redis stays unreachable until the lease runs out', async () => {
    const lease = grant('r', 'o');
    extendReply = () => {
      throw new Error('connection refused');
    };
    await clock.tickAsync(2998);
    expect(lease.signal.aborted).to.equal(false);
    await clock.tickAsync(1);
    expect(lease.signal.aborted).to.equal(true);
  });

  it("names the last renewal's failure in the loss it led to, once: a server's refusal is its cause", async () => {
    const lease = grant('r', 'o');
    extendReply = () => {
      throw new Error('BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.');
    };
    await clock.tickAsync(3000);
    const lost = lease.signal.reason as LockLostError;
    expect(lost).to.be.instanceOf(LockLostError);
    expect(lost.cause).to.be.instanceOf(ServerRefusedError);
    expect(lost.message).to.match(
      /^lost the lock on "r": its lease ran out without renewal \(its last renewal: renewing 1 lease holding\(s\) was refused: the Redis server is running another client's script/,
    );
    expect(lost.message.split('BUSY Redis is busy').length, 'the reply, once').to.equal(2);
  });

  it('retries a round Redis did not answer soon after, backing off, not a period later', async () => {
    const lease = grant('r', 'o');
    let down = true;
    const sent: number[] = [];
    extendReply = (r) => {
      sent.push(performance.now());
      if (down) throw new Error('no answer');
      return r.map((x) => x.leaseMs);
    };
    await clock.tickAsync(1000); // the period's round fails
    await clock.tickAsync(25 + 50 + 100);
    expect(sent, 'the first retries, each after twice the wait of the one before').to.deep.equal([1000, 1025, 1075, 1175]);
    down = false;
    await clock.tickAsync(200);
    expect(sent.at(-1), 'retried while the period is far').to.equal(1375);
    expect(lease.held).to.equal(true);
    await clock.tickAsync(1000 - 375 - 1);
    expect(sent, 'no retry once renewed').to.have.length(5);
    await clock.tickAsync(1);
    expect(sent.at(-1), 'the next period').to.equal(2000);
  });

  it('backs off to redisTimeoutMs at most, and retries before the first missed lease runs out', async () => {
    const lease = grant('r', 'o');
    const sent: number[] = [];
    extendReply = () => {
      sent.push(performance.now());
      throw new Error('no answer');
    };
    await clock.tickAsync(2998);
    const gaps = sent.slice(1).map((at, i) => at - sent[i]!);
    expect(Math.max(...gaps), 'the longest wait between two tries').to.be.at.most(1000);
    expect(sent.at(-1), 'the last try before the deadline').to.be.above(2900);
    expect(lease.held).to.equal(true);
    await clock.tickAsync(1);
    expect(lease.signal.aborted).to.equal(true);
  });

  it('renews first the leases the last round did not reach, and retries only those', async () => {
    const leases = ['a', 'b', 'c'].map((r, i) => grant(r, `o${i}`));
    let missing = new Set(['o1', 'o2']);
    extendReply = (r) => r.map((x) => (missing.has(x.owner) ? NaN : x.leaseMs));
    await clock.tickAsync(1000);
    await clock.tickAsync(25);
    expect(extendCalls.map((c) => c.map((x) => x.owner))).to.deep.equal([
      ['o0', 'o1', 'o2'],
      ['o1', 'o2'],
    ]);
    missing = new Set(['o2']);
    await clock.tickAsync(50);
    expect(extendCalls[2]!.map((x) => x.owner)).to.deep.equal(['o1', 'o2']);
    await clock.tickAsync(1000 - 75 - 1); // o2's retries keep failing
    missing = new Set();
    await clock.tickAsync(1);
    expect(
      extendCalls.at(-1)!.map((x) => x.owner),
      'the period’s round, the missed first',
    ).to.deep.equal(['o2', 'o0', 'o1']);
    expect(leases.every((l) => l.held)).to.equal(true);
  });

  it('reports an event-loop stall longer than the lease as loss instead of renewing', async () => {
    const lease = grant('r', 'o');
    // A blocked event loop: time jumps, and each overdue timer fires once, late.
    clock.jump(5000);
    await clock.tickAsync(0);
    expect(lease.signal.aborted).to.equal(true);
    expect(losses).to.have.length(1);
    expect(extendCalls).to.have.length(0);
  });

  it('leaves a lease whose release is in flight, or granted after the call was sent, out of a renewal that found the lock gone', async () => {
    // The release went out before the renewal, which then found the lock empty: it is the release's
    // answer, not the renewal's, that settles the lease (issue 36: released leases reported lost).
    const { release, extend } = backend;
    try {
      const releasing = grant('r', 'o');
      let answerRelease!: (held: boolean) => void;
      backend.release = () => new Promise<boolean>((resolve) => (answerRelease = resolve));
      let answerRenewal!: (left: number[]) => void;
      backend.extend = (requests) => {
        extendCalls.push([...requests]);
        return new Promise((resolve) => (answerRenewal = resolve));
      };
      await clock.tickAsync(1000); // the round is on the wire
      const released = releasing.release();
      await clock.tickAsync(1);
      const later = grant('r', 'o'); // the same owner again, granted after the round's call was sent
      answerRenewal([0]);
      await clock.tickAsync(0);
      expect(losses, 'nothing reported lost').to.have.length(0);
      expect(later.held).to.equal(true);
      answerRelease(true);
      await released;
      expect(releasing.state).to.equal('released');
      expect(releasing.signal.aborted).to.equal(false);
    } finally {
      Object.assign(backend, { release, extend });
    }
  });

  it('stops the renewal timer when the last auto-renewed lease is released', async () => {
    const lease = grant('r', 'o');
    await lease.release();
    await lease.release(); // a second release is a no-op
    expect(released).to.deep.equal(['o']);
    await clock.tickAsync(10_000);
    expect(extendCalls).to.have.length(0);
    expect(clock.countTimers()).to.equal(0);
  });

  it('renews a lease granted after the last one went a third of its lease after its grant, on the same timer', async () => {
    // One lease at a time (1 in flight): the idle renewal timer is restarted, not made anew.
    const first = grant('r', 'o1');
    await clock.tickAsync(600);
    await first.release();
    await clock.tickAsync(300);
    const second = grant('r', 'o2');
    await clock.tickAsync(999);
    expect(extendCalls, 'no round at the first lease period').to.have.length(0);
    await clock.tickAsync(1);
    expect(extendCalls).to.have.length(1);
    expect(extendCalls[0]!.map((r) => r.owner)).to.deep.equal(['o2']);
    expect(clock.countTimers(), 'the renewal and deadline timers').to.equal(2);
    await second.release();
    await clock.tickAsync(1000);
    expect(extendCalls, 'no round once idle').to.have.length(1);
    await clock.tickAsync(3000);
    expect(clock.countTimers(), 'the idle renewal timer cleared at its next tick, the deadline timer at its deadline').to.equal(0);
  });

  it('does not start a renewal round while the previous one is still running', async () => {
    grant('r', 'o');
    let finish!: () => void;
    backend.extend = (requests) => {
      extendCalls.push([...requests]);
      return new Promise((resolve) => (finish = () => resolve(requests.map((x) => x.leaseMs))));
    };
    await clock.tickAsync(1000);
    await clock.tickAsync(1000);
    expect(extendCalls).to.have.length(1);
    finish();
  });

  it('takes each lease’s new deadline as its call is answered, not at the end of a long round', async () => {
    // A round of many leases is many calls: one that ends after the old deadlines must not
    // lose the leases its first calls renewed long before.
    const early = grant('early', 'o1');
    const late = grant('late', 'o2');
    backend.extend = (requests, round) => {
      extendCalls.push([...requests]);
      const sentAt = performance.now();
      setTimeout(() => round?.answered?.([0], [3000], sentAt), 100);
      return new Promise((resolve) => setTimeout(() => resolve(requests.map((r) => r.leaseMs)), 2_500));
    };
    await clock.tickAsync(1000); // the round starts
    await clock.tickAsync(2100); // past both old deadlines (3000 ms after the grant), before the round ends
    expect(early.held, 'renewed by the first call, at 1100 ms').to.equal(true);
    expect(late.signal.aborted, 'its call answered only at 3500 ms').to.equal(true);
    expect(losses.map((l) => l.leases.map((x) => x.resource))).to.deep.equal([['late']]);
    await clock.tickAsync(500); // the round ends: the late lease stays lost, the early one held
    expect(early.held).to.equal(true);
    expect(losses).to.have.length(1);
  });

  it('bounds each call of a round by redisTimeoutMs, and cancels the rest of the round on close()', async () => {
    grant('r', 'o');
    let round: ExtendRound | undefined;
    backend.extend = (_requests, r) => {
      round = r;
      return new Promise(() => undefined); // Redis never answers
    };
    await clock.tickAsync(1000);
    const call = round!.bound!(new Promise<number[]>(() => undefined));
    const rejected = call.then(
      () => undefined,
      (e: Error) => e,
    );
    await clock.tickAsync(1000);
    expect((await rejected)?.message).to.match(/within 1000 ms/);
    expect(round!.cancelled).to.equal(undefined);
    const closing = holdings.close();
    expect(round!.cancelled, 'the calls not sent yet are not sent').to.equal(true);
    await clock.tickAsync(1000);
    await closing;
  });
});
