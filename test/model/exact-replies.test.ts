// The scripts' exact replies and deadlines, on a virtual clock (the model
// checker's build of the scripts: keys expire by that clock, as in the
// checker), where a real clock cannot stand still on a millisecond.
//
// A hold is over at its deadline's millisecond, in every script: an owner
// whose read lease ends at `now` acquires afresh, never as a holder, so it
// queues behind a waiting writer as a new reader does (a holder would not:
// that would deadlock a downgrade); a writer whose lease ends at `now`
// refuses no reader, and a reader whose lease ends then refuses no writer.
// Only a clock that stands on the deadline tells `<=` from `<`. It takes
// more expired owners than one call prunes (PRUNE_BATCH): the deadline's
// owner is still in the leases when the next acquire reads its deadline.
//
// Then the queue and the replies: no waiting writer of a fair queue takes a
// freed lock ahead of the queue's head, where without fairness one that
// waited since before the free may, at most twice in a row per head; an
// upgrader waits for the other reader, not for its own lease; a shorter
// grant keeps a longer lease.
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

describe("the scripts' exact replies (virtual clock)", () => {
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

  it("an upgrading reader is told to wait until the other reader's lease ends, not its own", async () => {
    const start = 6_000_000;
    await at(start);
    expect(granted(await read('up', 'up.1')), 'the upgrader reads').to.equal(true);
    await at(start + 100);
    expect(granted(await read('other', 'other.1')), 'another reader').to.equal(true);
    await at(start + 200);
    // Its own lease ends first (start + 3,000); the other reader's at start + 3,100.
    expect(await write('up', 'up.2'), 'the upgrade').to.deep.equal([0, LEASE_MS + 100 - 200, 'read']);
  });

  it("a grant of a shorter lease keeps the owner's longer one", async () => {
    const start = 7_000_000;
    const readFor = (leaseMs: number, owner: string, id: string) => run('acquireRead', [leaseMs, holderArg('read', id, owner), '1']);
    await at(start);
    expect(granted(await read('other', 'other.1')), 'another reader').to.equal(true);
    expect(granted(await readFor(10_000, 'r', 'r.1')), 'the long lease').to.equal(true);
    await at(start + 100);
    // A grant of exactly its leaseMs replies with the bare fence; a longer lease kept, with [1, fence, left].
    const again = await readFor(1_000, 'r', 'r.2');
    expect(Array.isArray(again) ? again[2] : `the bare fence ${again}`, 'the shorter grant: the lease left').to.equal(9_900);
    expect(Number(await redis.zscore(k.leases, 'r')), "the owner's deadline").to.equal(start + 10_000);
  });

  // Without hand-over ('0', not '0h'): a release that frees the lock hands it to a queued writer that
  // accepts it, so only then may another writer pass the head.
  it('an unfair queue passes over its head at most twice in a row, and a new head as often again', async () => {
    const start = 8_000_000;
    const tryWrite = (owner: string, id: string) => run('acquireWrite', [LEASE_MS, holderArg('write', id, owner), 2 * LEASE_MS, '0']);
    const release = (owner: string, id: string) => run('release', [holderArg('write', id, owner)]);
    await at(start);
    expect(granted(await tryWrite('holder', 'h.1')), 'the holder').to.equal(true);
    for (const [i, owner] of ['a', 'b', 'c', 'd', 'e', 'f', 'g'].entries()) {
      await at(start + 10 * (i + 1));
      expect(await tryWrite(owner, `${owner}.1`), `${owner} queues`).to.deep.include.members([0, 'write']);
    }
    let t = start + 100;
    const passAndRelease = async (owner: string, what: string) => {
      await at((t += 10));
      expect(granted(await tryWrite(owner, `${owner}.2`)), what).to.equal(true);
      await at((t += 10));
      await release(owner, `${owner}.2`);
    };
    await at((t += 10));
    await release('holder', 'h.1');
    await passAndRelease('b', 'b passes the head a');
    await passAndRelease('c', 'c passes the head a');
    await at((t += 10));
    expect(await tryWrite('e', 'e.2'), 'a third pass: e waits behind the head a').to.deep.include.members([0, 'queue']);
    await passAndRelease('a', 'the head a');
    await passAndRelease('e', 'e passes the new head d');
    await passAndRelease('f', 'f passes the head d');
    await at((t += 10));
    expect(await tryWrite('g', 'g.2'), 'a third pass of the new head: g waits behind d').to.deep.include.members([0, 'queue']);
    await passAndRelease('d', 'the head d');
  });

  describe('legacy mode', () => {
    const legacy = [...keys, 'mc:{edge}:read', 'mc:{edge}:write', 'mc:{edge}:readers'];
    const [readKey, , readersKey] = legacy.slice(3);
    const runLegacy = (script: string, args: readonly (string | number)[]) =>
      redis.evalsha(shas.get(script)!, legacy.length, ...legacy, ...args.map(String));
    const legacyRead = (owner: string, leaseMs: number) =>
      runLegacy('legacyAcquireRead', [leaseMs, holderArg('read', `${owner}.1`, owner), '1']);
    beforeEach(async () => redis.del(...legacy));

    it("the read key holds '1' once the library readers left are gone, not the name of one whose lease ran out", async () => {
      const start = 9_000_000;
      await at(start);
      // An old process reads, until start + 20 s.
      await redis.set(readKey!, '1', 'PXAT', OFFSET_MS + start + 20_000);
      for (let i = 0; i < EXPIRED; i++) expect(granted(await legacyRead(`lapsed-${i}`, 300)), `reader lapsed-${i}`).to.equal(true);
      expect(granted(await legacyRead('staying', 30_000)), 'the staying reader').to.equal(true);
      await at(start + 1_000);
      await runLegacy('legacyRelease', [holderArg('read', 'staying.1', 'staying'), '']);
      expect(Number(await redis.zcard(readersKey!)), 'the old reader is listed').to.be.above(0);
      expect(await redis.get(readKey!), 'the old reader holds on, as an old process left the key').to.equal('1');
    });

    it('an extension finds a reader whose lease ran out lost, even while it is still listed', async () => {
      const start = 10_000_000;
      await at(start);
      expect(granted(await legacyRead('live', 30_000)), 'a live reader').to.equal(true);
      expect(granted(await legacyRead('r', 3_000)), 'the reader').to.equal(true);
      await at(start + 3_010);
      await stillListed('r', start + 3_000);
      const [, , left] = (await runLegacy('legacyExtend', [1_000_000, 'r', 3_000])) as number[];
      expect(left, 'the lease left after the extension').to.equal(0);
      expect(await redis.zscore(k.leases, 'r'), 'the reader, forgotten').to.equal(null);
    });
  });
});
