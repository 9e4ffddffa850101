// A hold is over at its deadline's millisecond, in every script: an owner
// whose read lease ends at `now` acquires afresh, never as a holder, so it
// queues behind a waiting writer as a new reader does (a holder would not:
// that would deadlock a downgrade); a writer whose lease ends at `now`
// refuses no reader, and a reader whose lease ends then refuses no writer.
// Only a clock that stands on the deadline tells `<=` from `<`, so this runs
// the scripts of the model checker's build (virtual clock), and keys expire
// by that clock as in the checker. It takes more expired owners than one
// call prunes (PRUNE_BATCH): the deadline's owner is still in the leases
// when the next acquire reads its deadline. Last, a fair queue: no waiting
// writer takes a freed lock ahead of the queue's head, where without
// fairness one that waited since before the free may.
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { holderArg } from '../../src/backends/scripts.js';
import { lockKeys } from '../../src/keys/keys.js';
import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';
import { type ModelServer, startModelServer } from './server.js';
import { NOW_KEY, OFFSET_MS, TICK_KEY, virtualClockScripts } from './virtual-clock.js';

const LEASE_MS = 3_000;
/** Expired owners one call forgets at most (lua/includes/state.lua). */
const PRUNE_BATCH = Number(/local PRUNE_BATCH = (\d+)/.exec(LUA_SOURCES.acquireRead)?.[1]);
/** Two calls' prune batches of expired readers, so that the third call still finds the deadline's owner. */
const EXPIRED = 2 * PRUNE_BATCH;

describe('a hold ends at its deadline (virtual clock)', () => {
  let model: ModelServer;
  let redis: Redis;
  const shas = new Map<string, string>();
  const k = lockKeys('mc', 'edge');
  const keys = [k.state, k.leases, k.queue];

  before(async () => {
    model = await startModelServer(1);
    redis = model.redis[0]!;
    for (const [name, source] of Object.entries(virtualClockScripts())) shas.set(name, (await redis.script('LOAD', source)) as string);
  });
  after(async () => model?.close());

  /** The clock moves to `ms`: keys whose deadline is before it are gone, as on Redis (a key lives through its deadline's ms). */
  const at = async (ms: number) => {
    for (const key of keys) {
      const expiry = (await redis.call('PEXPIRETIME', key)) as number;
      if (expiry > 0 && expiry - OFFSET_MS < ms) await redis.del(key);
    }
    await redis.set(NOW_KEY, ms);
    await redis.set(TICK_KEY, 0);
  };
  beforeEach(async () => {
    expect(PRUNE_BATCH, 'PRUNE_BATCH in lua/includes/state.lua').to.be.above(0);
    await redis.del(...keys);
  });
  /** The precondition of each case: `owner` is still in the leases, with its deadline, when the last call reads them. */
  const stillListed = async (owner: string, deadline: number) =>
    expect(Number(await redis.zscore(k.leases, owner)), `${owner} still in the leases`).to.equal(deadline);
  const run = (script: string, args: readonly (string | number)[]) =>
    redis.evalsha(shas.get(script)!, keys.length, ...keys, ...args.map(String));
  const read = (owner: string, id: string) => run('acquireRead', [LEASE_MS, holderArg('read', id, owner), '1']);
  /** A waiting writer's try: it takes a place in the queue when refused. */
  const write = (owner: string, id: string) => run('acquireWrite', [LEASE_MS, holderArg('write', id, owner), 2 * LEASE_MS, '0h']);
  /** A grant's reply is its fence; a refusal is `[0, retryAfterMs, reason, ...]`. */
  const granted = (reply: unknown) => !(Array.isArray(reply) && reply[0] === 0);

  it('an owner reading again on the millisecond its lease ends queues behind a waiting writer, as a new reader does', async () => {
    const start = 1_000_000;
    await at(start);
    for (let i = 0; i < EXPIRED; i++) expect(granted(await read(`old-${i}`, `old-${i}.1`)), `reader old-${i}`).to.equal(true);
    await at(start + 10);
    expect(granted(await read('edge', 'edge.1'))).to.equal(true);
    await at(start + 20);
    expect(granted(await read('live', 'live.1'))).to.equal(true);
    // The edge reader's deadline, to the millisecond: the old readers lapsed 10 ms ago, the live one holds on.
    await at(start + 10 + LEASE_MS);
    expect(await write('w', 'w.1'), 'the writer waits for the live reader').to.deep.include.members([0, 'read']);
    await stillListed('edge', start + 10 + LEASE_MS);
    expect(await read('edge', 'edge.2'), 'the edge reader again: behind the waiting writer').to.deep.include.members([0, 'intent']);
  });

  /** EXPIRED readers granted at `start`: their leases lapse together, more than one call prunes. */
  const lapsedReaders = async (start: number) => {
    await at(start);
    for (let i = 0; i < EXPIRED; i++) expect(granted(await read(`old-${i}`, `old-${i}.1`)), `reader old-${i}`).to.equal(true);
  };

  it('a writer whose lease ends on this millisecond refuses no reader', async () => {
    const start = 2_000_000;
    await lapsedReaders(start);
    // On the old readers' last millisecond their keys still live: the writer gets in, and one call prunes only some of them.
    await at(start + LEASE_MS);
    expect(granted(await write('w', 'w.1')), 'the writer, once the readers lapsed').to.equal(true);
    await at(start + 2 * LEASE_MS);
    await stillListed('w', start + 2 * LEASE_MS);
    expect(granted(await read('r', 'r.1')), "a reader on the writer's last millisecond").to.equal(true);
  });

  it('a reader whose lease ends on this millisecond refuses no writer', async () => {
    const start = 3_000_000;
    await lapsedReaders(start);
    await at(start + 10);
    expect(granted(await read('edge', 'edge.1'))).to.equal(true);
    await at(start + 10 + LEASE_MS);
    await stillListed('edge', start + 10 + LEASE_MS);
    expect(granted(await write('w', 'w.1')), "a writer on the last reader's last millisecond").to.equal(true);
  });

  it('a fair queue lets no waiting writer pass its head when the lock is freed; an unfair one lets one that waited', async () => {
    for (const fair of [true, false]) {
      await redis.del(...keys);
      const start = fair ? 4_000_000 : 5_000_000;
      const tryWrite = (owner: string, id: string) =>
        run('acquireWrite', [LEASE_MS, holderArg('write', id, owner), 2 * LEASE_MS, fair ? '1' : '0']);
      await at(start);
      expect(granted(await tryWrite('holder', 'h.1')), 'the holder').to.equal(true);
      await at(start + 10);
      expect(await tryWrite('head', 'a.1'), 'the head queues').to.deep.include.members([0, 'write']);
      await at(start + 20);
      expect(await tryWrite('second', 'b.1'), 'the second queues').to.deep.include.members([0, 'write']);
      await at(start + 30);
      await run('release', [holderArg('write', 'h.1', 'holder')]);
      await at(start + 40);
      const second = await tryWrite('second', 'b.2');
      if (fair) expect(second, 'fair: the second, before the head').to.deep.include.members([0, 'queue']);
      else expect(granted(second), 'unfair: the second, which waited since before the free').to.equal(true);
    }
  });
});
