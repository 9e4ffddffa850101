/**
 * Every script call declares every key it touches, and renewal
 * holds on where the server refuses keys of several slots in one script.
 *
 * - The declared-keys guard (test/support/declared-keys.ts) knows where every
 *   command the scripts run takes its keys, and refuses a key not in KEYS.
 *   `npm test` runs the script suites under it (TEST_DECLARED_KEYS=1).
 * - On a Cluster that refuses a script reaching keys of several slots (here
 *   Redis itself: the across-slots renewal script without its
 *   `allow-cross-slot-keys` flag), and on one server behind a proxy that
 *   refuses keys of several slots in one call (CROSSSLOT, emulated in front
 *   of the driver), every lease is renewed in the same round, the rest of
 *   the round's calls carry one slot each, and so do the next rounds.
 * - Behind a proxy that runs each script on the server of its first key,
 *   without refusing the others (two real servers, the routing emulated in
 *   front of the driver), renewal loses no lease it holds.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import calculateSlot from 'cluster-key-slot';
import type { ExtendRequest } from '../../src/backends/backend.js';
import { hashLayout } from '../../src/backends/layouts.js';
import { ScriptedBackend } from '../../src/backends/scripted.js';
import type { ScriptName } from '../../src/backends/scripts.js';
import type { Driver, ScriptArg } from '../../src/clients/driver.js';
import { driverFor } from '../../src/clients/index.js';
import { CrossSlotError, LockClient, type LockKeys, lockKeys, type RenewTraceContext, TRACING_CHANNELS } from '../../src/index.js';
import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';
import { startRedisMasters } from '../../src/testing/index.js';
import { forEachTopology } from '../setup/topologies.js';
import { commandsOf, guardedSource, KEY_POSITIONS, UNDECLARED, violations } from '../support/declared-keys.js';
import { eventually } from '../support/eventually.js';

const LUA = join(import.meta.dirname, '..', '..', 'lua');

describe('the declared-keys guard', () => {
  it('knows where every command the scripts run takes its keys', () => {
    const files = [
      ...readdirSync(LUA).filter((f) => f.endsWith('.lua')),
      ...readdirSync(join(LUA, 'includes')).map((f) => join('includes', f)),
    ];
    const commands = new Set(files.flatMap((f) => commandsOf(readFileSync(join(LUA, f), 'utf8'))));
    expect(commands.size).to.be.above(20);
    expect([...commands].filter((c) => KEY_POSITIONS[c] === undefined)).to.deep.equal([]);
  });

  // Registered only where it can mean something: a skipped test would read as a pass.
  if (process.env.TEST_DECLARED_KEYS === '1')
    it('is on under TEST_DECLARED_KEYS=1: the drivers send every script guarded, but the one exempt by design', () => {
      const unguarded = Object.entries(LUA_SOURCES)
        .filter(([, source]) => !source.includes('guardedCall'))
        .map(([name]) => name);
      expect(unguarded).to.deep.equal(['extendAcrossSlots']);
    });
});

forEachTopology('declared keys', (ctx) => {
  // One server: any keys may be declared together.
  if (ctx.kind === 'standalone')
    it('the guard refuses a key the script did not declare, naming it, and lets declared ones through', async () => {
      const redis = ctx.client();
      const script = guardedSource("local rcall = redis.call\nrcall('SET', KEYS[1], '1')\nreturn redis.pcall('DEL', KEYS[1], ARGV[1])");
      expect(await redis.eval(script, 2, 'dk:a', 'dk:b', 'dk:b')).to.equal(1);
      const error = await redis.eval(script, 1, 'dk:a', 'dk:b').then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).to.contain(`${UNDECLARED} dk:b (DEL) is not in KEYS`);
      // Nothing ran past the refused command: the key it did declare stays.
      expect(await redis.exists('dk:a')).to.equal(1);
    });

  if (process.env.TEST_DECLARED_KEYS === '1' && ctx.kind === 'standalone')
    it('under TEST_DECLARED_KEYS=1, a library script that reaches a key it did not declare is refused', async () => {
      // abandon with only its state key declared: its queue key (KEYS[3]) is not there when it looks at the queue.
      const error = await driverFor(ctx.client())
        .script('abandon', [1, 'dk:{guard-on}', 'someone', '*'])
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(String(error)).to.contain(UNDECLARED);
      violations.splice(0); // this test's own, on purpose: not a finding of the run
    });

  // A Cluster client refuses such legacy keys before any call.
  if (ctx.kind === 'standalone')
    it('an acquire refused for keys of several slots (legacy keys without a hash tag, behind a key-routing proxy) fails typed, saying what to do', async () => {
      const redis = ctx.client();
      const driver = driverFor(redis);
      const base: Driver = Object.create(driver);
      base.script = driver.script.bind(driver);
      driver.script = refusingSeveralSlots(base, false).driver.script;
      const locks = new LockClient(redis, { mode: 'legacy' });
      try {
        const error = await locks
          .lock('declared:legacy')
          .acquireWrite({ waitMs: 0 })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(error, String(error)).to.be.instanceOf(CrossSlotError);
        expect((error as Error).message).to.match(/legacyKeys/);
        expect((error as Error).message).to.not.match(/may be retried/);
      } finally {
        await locks.close();
      }
    });

  // Only a Cluster client sends lua/extend-across-slots.lua.
  if (ctx.kind === 'cluster')
    it("renews every lease where the server refuses the across-slots script's flag (Dragonfly as a Cluster), then one slot per call", async function () {
      this.timeout(60_000);
      const redis = ctx.client();
      const locks = new LockClient(redis);
      try {
        const { requests } = await heldForRenewal(locks, 'declared:flag', 60);
        const driver = driverFor(redis);
        const dragonfly: Driver = Object.create(driver);
        let refused = 0;
        dragonfly.script = async (name: ScriptName, args: readonly (string | number)[], lock?) => {
          if (name === 'extendAcrossSlots') {
            refused++;
            // Dragonfly's answer to a script flag it does not know (src/server/script_mgr.cc, ScriptParams::ApplyFlags).
            throw new Error('ERR Invalid flag: allow-cross-slot-keys');
          }
          return driver.script(name, args, lock);
        };
        const backend = new ScriptedBackend(dragonfly, hashLayout('rwlock'));
        const first = await backend.extend(requests, { calls: 0 });
        expect(refused, 'the across-slots script was sent, and refused').to.be.above(0);
        expect(
          first.filter((left) => !(left > 29_000)),
          'no lease lost or left unrenewed in the refused round',
        ).to.deep.equal([]);
        refused = 0;
        const second = await backend.extend(requests);
        expect(second.every((left) => left > 29_000)).to.equal(true);
        expect(refused, 'the next round: one slot per call from the start').to.equal(0);
      } finally {
        await locks.close();
      }
    });

  // The client sees one server; a sharding proxy in front of two runs each script where its first key lives.
  if (ctx.kind === 'standalone')
    it('loses no lease behind a proxy that runs each script on the server of its first key (two servers)', async function () {
      this.timeout(60_000);
      const LEASES = 40;
      const shards = await startRedisMasters(2);
      const [first, second] = shards.clients();
      const driver = driverFor(first!);
      const toFirst = driver.script.bind(driver);
      const toSecond = driverFor(second!);
      const secondOf = (args: readonly ScriptArg[]) => Number(args[0]) > 0 && calculateSlot(String(args[1])) % 2 === 1;
      driver.script = (name, args, lock) => (secondOf(args) ? toSecond.script(name, args, lock) : toFirst(name, args, lock));
      // A third of the lease is the renewal period: a round every 500 ms.
      const locks = new LockClient(first!, { leaseMs: 1_500 });
      const lost: string[] = [];
      locks.on('lost', (_error, leases) => lost.push(...leases.map((l) => l.resource)));
      const rounds: RenewTraceContext[] = [];
      const onEnd = (context: unknown) => rounds.push(context as RenewTraceContext);
      const ended = `tracing:${TRACING_CHANNELS.renew}:asyncEnd`;
      subscribe(ended, onEnd);
      try {
        const leases = await Promise.all(Array.from({ length: LEASES }, (_, i) => locks.lock(`routed:${i}`).acquireWrite()));
        expect(await first!.dbsize(), 'locks on the first server').to.be.above(0);
        expect(await second!.dbsize(), 'locks on the second server').to.be.above(0);
        await eventually('three renewal rounds', () => rounds.length >= 3, 20_000);
        expect(lost, 'leases reported lost').to.deep.equal([]);
        for (const lease of leases) expect(lease.state, lease.resource).to.equal('held');
        expect(rounds.map((r) => `${r.renewed} of ${r.holdings}`)).to.deep.equal(rounds.map(() => `${LEASES} of ${LEASES}`));
      } finally {
        unsubscribe(ended, onEnd);
        await locks.close();
        first!.disconnect();
        second!.disconnect();
        await shards.stop();
      }
    });

  it('renews every lease where the server refuses keys of several slots in one script, then one slot per call', async function () {
    this.timeout(60_000);
    const redis = ctx.client();
    const locks = new LockClient(redis);
    const LEASES = 300;
    try {
      const { leases, requests } = await heldForRenewal(locks, 'declared', LEASES);
      const slots = new Set(requests.map((r) => r.keys.slot));
      expect(slots.size, 'the leases lie in many slots').to.be.above(LEASES / 2);
      const { driver, calls } = refusingSeveralSlots(driverFor(redis), ctx.kind === 'cluster');
      const backend = new ScriptedBackend(driver, hashLayout('rwlock'));

      const round = { calls: 0 };
      const first = await backend.extend(requests, round);
      expect(
        first.filter((left) => !(left > 29_000)),
        'no lease lost or left unrenewed in the refused round',
      ).to.deep.equal([]);
      const refused = calls.filter((c) => c.refused);
      expect(refused.length, 'a call was refused').to.be.above(0);
      const after = calls.slice(calls.indexOf(refused[refused.length - 1]!) + 1);
      expect(
        after.every((c) => c.name === 'extend' && c.slots === 1),
        'after the refusal, one slot per call, every key declared',
      ).to.equal(true);

      await nextRoundBySlot(backend, requests, calls);
      expect(calls.length, 'a call per slot').to.equal(slots.size);
      for (const lease of leases) expect(lease.state).to.equal('held');
    } finally {
      await locks.close();
    }
  });

  // Calls in flight fail in any order: a call that timed out may come back before the refusals.
  it('falls back to one slot per call when a refusal of several slots is not the first error of the round', async function () {
    this.timeout(60_000);
    const redis = ctx.client();
    const locks = new LockClient(redis);
    try {
      const { requests } = await heldForRenewal(locks, 'declared:late', 100);
      const { driver, calls } = refusingSeveralSlots(driverFor(redis), ctx.kind === 'cluster', new Error('Command timed out'));
      const backend = new ScriptedBackend(driver, hashLayout('rwlock'));
      const first = await backend.extend(requests, { calls: 0 }).catch((error: unknown) => error);
      expect(first, String(first)).to.be.an('array');
      expect(calls.filter((c) => c.refused).length, 'calls refused after the one that failed').to.be.above(0);
      expect(
        (first as number[]).filter((left) => !(left > 29_000)),
        'no lease lost or left unrenewed in the round',
      ).to.deep.equal([]);
      await nextRoundBySlot(backend, requests, calls);
    } finally {
      await locks.close();
    }
  });
});

/** `count` write leases of 60 s held by `locks` on `<prefix>:<n>`, and a renewal request of each (30 s). */
async function heldForRenewal(locks: LockClient, prefix: string, count: number) {
  const leases = await Promise.all(Array.from({ length: count }, (_, i) => locks.lock(`${prefix}:${i}`).acquireWrite({ leaseMs: 60_000 })));
  const requests = leases.map((lease) => ({ keys: lockKeys('rwlock', lease.resource), owner: lease.token, leaseMs: 30_000, holdIds: [] }));
  return { leases, requests };
}

/** `backend`'s next round renews every one of `requests`, one slot per call from the start, every key declared (in `calls`). */
async function nextRoundBySlot(backend: ScriptedBackend<LockKeys>, requests: readonly ExtendRequest[], calls: Call[]): Promise<void> {
  calls.length = 0;
  const next = await backend.extend(requests);
  expect(next.every((left) => left > 29_000)).to.equal(true);
  expect(
    calls.every((c) => !c.refused && c.name === 'extend' && c.slots === 1),
    'the next round: one slot per call from the start',
  ).to.equal(true);
}

interface Call {
  readonly name: ScriptName;
  /** The slots of the keys the call reaches (declared, or for the across-slots script, named in ARGV). */
  readonly slots: number;
  readonly refused: boolean;
}

/**
 * `driver`, refusing script calls that reach keys of several slots, as the
 * servers the library must renew on do. On a Cluster, Redis refuses: the
 * across-slots renewal script goes without its `allow-cross-slot-keys` flag
 * (sent with EVAL, so that no cached copy of the flagged one answers). On
 * one server, a key-routing proxy: a call whose declared keys lie in several
 * slots gets CROSSSLOT, as such a proxy answers. With `firstFails`, the
 * first renewal call fails with it instead, before any refusal.
 */
function refusingSeveralSlots(driver: Driver, cluster: boolean, firstFails?: Error): { driver: Driver; calls: Call[] } {
  const calls: Call[] = [];
  let failFirst = firstFails !== undefined;
  const withoutFlag = LUA_SOURCES.extendAcrossSlots.replace(/^#!lua flags=allow-cross-slot-keys,/, '#!lua flags=');
  const wrapped: Driver = Object.create(driver);
  wrapped.script = async (name: ScriptName, args: readonly (string | number)[], lock?) => {
    const keyCount = Number(args[0]);
    const keys = args.slice(1, 1 + keyCount).map(String);
    const reached = name === 'extendAcrossSlots' ? args.slice(2 + keyCount).filter((_, i) => i % 5 < 3) : keys;
    const slots = new Set(reached.map((k) => calculateSlot(String(k)))).size;
    if (failFirst && name.startsWith('extend')) {
      failFirst = false;
      calls.push({ name, slots, refused: false });
      throw firstFails;
    }
    if (cluster && name === 'extendAcrossSlots') {
      expect(withoutFlag).to.not.equal(LUA_SOURCES.extendAcrossSlots);
      try {
        const reply = await driver.command(['EVAL', withoutFlag, ...args.map(String)]);
        calls.push({ name, slots, refused: false });
        return reply;
      } catch (error) {
        calls.push({ name, slots, refused: true });
        throw error;
      }
    }
    if (!cluster && slots > 1) {
      calls.push({ name, slots, refused: true });
      throw new Error("CROSSSLOT Keys in request don't hash to the same slot");
    }
    calls.push({ name, slots, refused: false });
    return driver.script(name, args, lock);
  };
  return { driver: wrapped, calls };
}
