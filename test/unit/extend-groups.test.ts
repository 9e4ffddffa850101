import { expect } from 'chai';
import {
  EXTEND_BUDGET_US,
  EXTEND_CALLS_IN_FLIGHT,
  EXTEND_GROUPS_IN_FLIGHT,
  EXTEND_MAX_LEASES,
  type ExtendRound,
  extendByGroup,
  extendInChunks,
} from '../../src/backends/extend-groups.js';
import { lockKeys } from '../../src/keys/keys.js';

describe('extendByGroup', () => {
  it('fills the answers of the groups that succeeded and leaves NaN for a failed one', async () => {
    const results = await extendByGroup(4, [[0, 1], [2], [3]], async (indexes, out) => {
      if (indexes[0] === 2) throw new Error('node down');
      for (const i of indexes) out[i] = 100 + i;
    });
    expect(results.slice(0, 2)).to.deep.equal([100, 101]);
    expect(Number.isNaN(results[2])).to.equal(true);
    expect(results[3]).to.equal(103);
  });

  it('runs at most EXTEND_GROUPS_IN_FLIGHT groups at once, and every group', async () => {
    let running = 0;
    let most = 0;
    const groups = Array.from({ length: 1_000 }, (_, i) => [i]);
    const results = await extendByGroup(groups.length, groups, async (indexes, out) => {
      most = Math.max(most, ++running);
      await new Promise((resolve) => setImmediate(resolve));
      running--;
      for (const i of indexes) out[i] = 1;
    });
    expect(most).to.equal(EXTEND_GROUPS_IN_FLIGHT);
    expect(results.every((left) => left === 1)).to.equal(true);
  });

  it('throws the first error when every group failed', async () => {
    const error = await extendByGroup(2, [[0], [1]], async () => {
      throw new Error('all down');
    }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(error?.message).to.equal('all down');
  });
});

describe('extendInChunks', () => {
  const keysOf = (i: number) => lockKeys('rwlock', `r${i}`);
  const requests = Array.from({ length: 1_000 }, (_, i) => ({ keys: keysOf(i), owner: `o${i}`, leaseMs: 5_000, holdIds: [`h${i}`] }));
  const all = requests.map((_, i) => i);
  const names = (k: ReturnType<typeof keysOf>) => [k.state, k.leases, k.queue] as const;
  /** The owners a call carries, from its ARGV (budget, then owner and lease length per lease). */
  const ownersOf = (args: (string | number)[]) => args.filter((_, k) => k % 2 === 1) as string[];

  it('sends the leases a call did not reach first in the next, and sizes calls by what the budget reached', async () => {
    const sent: string[][] = [];
    const round = { calls: 0 };
    const results = new Array<number>(requests.length).fill(NaN);
    // A server whose budget reaches 10 leases a call.
    await extendInChunks(
      requests,
      all,
      results,
      names,
      async (keys, args) => {
        expect(args[0]).to.equal(EXTEND_BUDGET_US);
        const owners = ownersOf(args);
        // Every lease's lock's keys are declared, in the order of its owner and lease length.
        expect(keys).to.deep.equal(owners.flatMap((o) => names(keysOf(Number(o.slice(1))))));
        sent.push(owners);
        // A clock that moves: the call ran for 250 µs.
        return [0, 250, ...owners.slice(0, 10).map(() => 5_000)];
      },
      round,
    );
    expect(
      results.every((left) => left === 5_000),
      'every lease renewed once',
    ).to.equal(true);
    expect(round.calls).to.equal(sent.length);
    expect(Math.max(...sent.map((s) => s.length))).to.be.at.most(EXTEND_MAX_LEASES);
    // Each lease was renewed by exactly one call: what a call did not reach went out again.
    const reached = sent.flatMap((owners) => owners.slice(0, 10));
    expect(new Set(reached).size).to.equal(requests.length);
    expect(reached).to.have.length(requests.length);
    // Once the first replies are in, calls carry about what fits: never the first calls' size again.
    expect(sent.slice(EXTEND_CALLS_IN_FLIGHT).every((s) => s.length <= 13)).to.equal(true);
    expect(round.calls).to.be.within(100, 110);
  });

  it('where the clock stands still, sizes calls by what they cost: none over the budget once measured', async () => {
    // A server that runs the calls one after the other, 20 µs a lease, whose clock stands still in a script
    // (it replies 0 for the time a call ran): the gap between two calls' starts is what the first cost.
    const COST_US = 20;
    let serverUs = 1_000_000;
    const costs: number[] = [];
    const results = new Array<number>(requests.length).fill(NaN);
    await extendInChunks(requests, all, results, names, async (_keys, args) => {
      const owners = ownersOf(args);
      const startUs = serverUs;
      serverUs += owners.length * COST_US;
      costs.push(owners.length * COST_US);
      return [startUs, 0, ...owners.map(() => 5_000)];
    });
    expect(results.every((left) => left === 5_000)).to.equal(true);
    expect(Math.max(...costs), 'the first calls, before any was measured').to.be.at.most(1_000);
    const measured = costs.slice(2 * EXTEND_CALLS_IN_FLIGHT);
    expect(Math.max(...measured), 'once measured').to.be.at.most(EXTEND_BUDGET_US);
    expect(Math.min(...measured.slice(0, -1)), 'and not much smaller').to.be.at.least(EXTEND_BUDGET_US - 2 * COST_US);
  });

  it('grows calls up to the most leases one carries while the budget reaches them all', async () => {
    const sizes: number[] = [];
    const many = Array.from({ length: 5_000 }, (_, i) => ({ keys: keysOf(i), owner: `o${i}`, leaseMs: 5_000, holdIds: [`h${i}`] }));
    await extendInChunks(many, [...many.keys()], new Array<number>(many.length).fill(NaN), names, async (_keys, args) => {
      sizes.push(ownersOf(args).length);
      return [0, 100, ...ownersOf(args).map(() => 5_000)];
    });
    expect(Math.max(...sizes)).to.equal(EXTEND_MAX_LEASES);
    expect(sizes.reduce((a, b) => a + b, 0)).to.equal(many.length);
  });

  it('a failed call does not stop the others: every other lease is renewed, its own stay NaN, and it is thrown', async () => {
    const results = new Array<number>(requests.length).fill(NaN);
    let calls = 0;
    let unanswered: string[] = [];
    const error = await extendInChunks(requests, all, results, names, async (_keys, args) => {
      if (++calls === 3) {
        unanswered = ownersOf(args);
        throw new Error('no answer within redisTimeoutMs');
      }
      return [0, 100, ...ownersOf(args).map(() => 5_000)];
    }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(error?.message).to.equal('no answer within redisTimeoutMs');
    expect(unanswered.length).to.be.above(0);
    expect(requests.filter((_, i) => Number.isNaN(results[i])).map((r) => r.owner)).to.deep.equal(unanswered);
    expect(results.filter((left) => left === 5_000)).to.have.length(requests.length - unanswered.length);
  });

  it('stops sending once as many calls in a row failed as are in flight (the node down), and throws', async () => {
    const results = new Array<number>(requests.length).fill(NaN);
    let calls = 0;
    const error = await extendInChunks(requests, all, results, names, async () => {
      calls++;
      throw new Error('node down');
    }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(error?.message).to.equal('node down');
    expect(calls).to.be.within(EXTEND_CALLS_IN_FLIGHT, 2 * EXTEND_CALLS_IN_FLIGHT - 1);
    expect(results.every((left) => Number.isNaN(left))).to.equal(true);
  });

  it('throws the error `decides` picks (a refusal the caller renews another way after), not the first', async () => {
    const results = new Array<number>(requests.length).fill(NaN);
    let calls = 0;
    const error = await extendInChunks(
      requests,
      all,
      results,
      names,
      async () => {
        throw new Error(++calls === 1 ? 'no answer within redisTimeoutMs' : "CROSSSLOT Keys in request don't hash to the same slot");
      },
      undefined,
      undefined,
      false,
      (e) => String(e).includes('CROSSSLOT'),
    ).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(error?.message).to.match(/^CROSSSLOT/);
  });

  it('sends no more calls once the round is cancelled (the client closed)', async () => {
    const round: ExtendRound = { calls: 0 };
    const results = new Array<number>(requests.length).fill(NaN);
    await extendInChunks(
      requests,
      all,
      results,
      names,
      async (_keys, args) => {
        await Promise.resolve(); // every worker sends its first call before the first reply
        round.cancelled = true;
        return [0, 100, ...ownersOf(args).map(() => 5_000)];
      },
      round,
    );
    expect(round.calls, 'the calls already in flight').to.equal(EXTEND_CALLS_IN_FLIGHT);
    expect(results.filter((left) => Number.isNaN(left)).length).to.be.above(0);
  });

  it('bounds each call with the round’s bound', async () => {
    let bounded = 0;
    let calls = 0;
    await extendInChunks(
      requests.slice(0, 40),
      all.slice(0, 40),
      new Array<number>(40).fill(NaN),
      names,
      async (_keys, args) => {
        calls++;
        return [0, 100, ...ownersOf(args).map(() => 5_000)];
      },
      {
        calls: 0,
        bound: (call) => {
          bounded++;
          return call;
        },
      },
    );
    expect(calls).to.be.above(1);
    expect(bounded).to.equal(calls);
  });
});
