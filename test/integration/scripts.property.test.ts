// Property test of the Lua state machine against a small in-memory model.
//
// Unlike the other unit tests this one needs a Redis server: the point is to
// run the real scripts. Random sequences of acquireRead / acquireWrite (a try,
// or a waiter that queues) / release / extend / abandon / expiry for a few
// owners run against Redis and against the model below, and every reply and
// the state read back by the inspect script must agree after each step.
// Every acquire names its hold with an id; releases and abandons name one of
// the ids the owner was ever given (also ones already released), and a
// `repeat` step sends the last acquire again, as ioredis does after a lost
// reply: a repeated command must change nothing.
//
// Leases and waiter heartbeats are long (minutes), so nothing expires by
// itself during a run; expiry is modelled only by an explicit step that moves
// one owner's deadline into the past (ZADD XX <past>), exactly what the scripts
// see when a lease ran out. Time is then a logical clock: the order of steps.
import { expect } from 'chai';
import fc from 'fast-check';
import { EXTEND_BUDGET_US } from '../../src/backends/extend-groups.js';
import { hashLayout } from '../../src/backends/layouts.js';
import { parseAcquireReply } from '../../src/backends/replies.js';
import { ScriptedBackend } from '../../src/backends/scripted.js';
import { holderArg, runScript } from '../../src/backends/scripts.js';
import { driverFor } from '../../src/clients/index.js';
import { type LockKeys, lockKeys } from '../../src/keys/keys.js';
import type { RedisClient } from '../../src/redis.js';
import { forEachTopology } from '../setup/topologies.js';

const OWNERS = ['A', 'B', 'C', 'D'] as const;
type Owner = (typeof OWNERS)[number];
const LEASE_MS = 120_000;
const BEAT_MS = 600_000;
const MAX_SKIPS = 2;

type Mode = 'read' | 'write';
type Step =
  | { op: 'read'; owner: Owner }
  | { op: 'write'; owner: Owner; wait: boolean }
  | { op: 'repeat' }
  | { op: 'release'; owner: Owner; mode: Mode; pick: number }
  | { op: 'extend'; owner: Owner }
  | { op: 'abandon'; owner: Owner; drop: 'withdraw' | 'all' | number }
  | { op: 'expire'; owner: Owner };

/** A step with the hold id it names resolved (acquires: their own new id). */
type Resolved =
  | { op: 'read'; owner: Owner; id: string }
  | { op: 'write'; owner: Owner; wait: boolean; id: string }
  | { op: 'release'; owner: Owner; mode: Mode; id: string }
  | { op: 'extend'; owner: Owner }
  | { op: 'abandon'; owner: Owner; drop: string }
  | { op: 'expire'; owner: Owner };

/** Turns steps into resolved ones: new ids for acquires, picks among the ids an owner was given. */
class Ids {
  private next = 0;
  private last: Resolved | undefined;
  private readonly given = new Map<string, string[]>();

  resolve(s: Step): Resolved | undefined {
    switch (s.op) {
      case 'read':
      case 'write': {
        const id = `h${this.next++}`;
        const key = `${s.owner}:${s.op}`;
        this.given.set(key, [...(this.given.get(key) ?? []), id]);
        return (this.last = { ...s, id });
      }
      case 'repeat':
        return this.last;
      case 'release':
        return { op: 'release', owner: s.owner, mode: s.mode, id: this.pick(`${s.owner}:${s.mode}`, s.pick) };
      case 'abandon': {
        const drop = s.drop === 'withdraw' ? '' : s.drop === 'all' ? '*' : this.pick(`${s.owner}:${s.drop % 2 ? 'read' : 'write'}`, s.drop);
        return { op: 'abandon', owner: s.owner, drop };
      }
      default:
        return s;
    }
  }

  private pick(key: string, n: number): string {
    const ids = this.given.get(key) ?? [];
    if (ids.length === 0) return 'none';
    return n < 0 ? ids[ids.length - 1]! : ids[n % ids.length]!; // n < 0: the latest
  }
}

interface Config {
  fair: boolean;
  writerPreference: boolean;
  /** Waiting writers accept a lock a release hands them (off in redlock mode). */
  handOver: boolean;
}

/** What the scripts should do, as plainly as it can be said. */
class Model {
  writer: Owner | null = null;
  /** The writer's hold ids. */
  wc: string[] = [];
  /** Each reader's hold ids. */
  readers = new Map<Owner, string[]>();
  /** Whether the last grant started a holding (a new fence) or joined one (its fence again). */
  lastGrant: 'new' | 'same' = 'new';
  /** The writer the last step's release handed the lock to (a new holding, with a new fence), if any. */
  handedTo: Owner | null = null;
  /** Waiting writers, first come first, with their arrival step. */
  queue: Owner[] = [];
  arrival = new Map<Owner, number>();
  /** Each waiting writer's hold id, from its latest try: a release hands it the lock under that id. */
  queuedIds = new Map<Owner, string>();
  /** A reader waiting to upgrade (stays until granted or abandoned). */
  upgrader: Owner | null = null;
  /** Step at which a release last freed the lock of every holder, if the state survived since. */
  freedAt: number | null = null;
  /** Times the longest waiter was passed over. */
  skips = 0;
  /** Owners whose deadline passed and that no script pruned yet. */
  zombies = new Set<Owner>();
  step = 0;

  constructor(private readonly config: Config) {}

  holds(o: Owner): boolean {
    return this.writer === o || this.readers.has(o);
  }
  live(): Owner[] {
    return OWNERS.filter((o) => this.holds(o));
  }
  otherUpgrader(o: Owner): Owner | null {
    const u = this.upgrader;
    return u !== null && u !== o && this.readers.has(u) ? u : null;
  }
  private removeHolds(o: Owner): void {
    if (this.writer === o) {
      this.writer = null;
      this.wc = [];
    }
    this.readers.delete(o);
  }
  private pruneAll(): void {
    this.zombies.clear(); // fewer zombies than one call's prune batch
  }
  private dequeue(o: Owner): void {
    this.queue = this.queue.filter((q) => q !== o);
    this.arrival.delete(o);
    this.queuedIds.delete(o);
  }
  /** refreshExpiry: every key is deleted when nothing is held and nobody waits. */
  private refresh(): void {
    if (this.live().length === 0 && this.queue.length === 0 && this.upgrader === null) {
      this.freedAt = null;
      this.skips = 0;
      this.upgrader = null;
      this.zombies.clear(); // deleted with the keys
    }
  }

  /** The expected reply of one step; compared with Redis' (fences and times left out). */
  apply(s: Resolved): unknown {
    this.step++;
    this.handedTo = null;
    switch (s.op) {
      case 'read':
        return this.read(s.owner, s.id);
      case 'write':
        return this.write(s.owner, s.wait, s.id);
      case 'release':
        return this.release(s.owner, s.mode, s.id);
      case 'extend': {
        const held = this.holds(s.owner);
        const zombie = this.zombies.delete(s.owner);
        if (held || zombie) this.refresh();
        return held ? 'extended' : 'not held';
      }
      case 'abandon': {
        let changed = false;
        // A place registered under another hold id is a newer try's: it stays.
        const registered = this.queuedIds.get(s.owner);
        const ownPlace = registered === undefined || s.drop === '' || s.drop === '*' || registered === s.drop;
        if (ownPlace && this.queue.includes(s.owner)) {
          this.dequeue(s.owner);
          changed = true;
        }
        if (this.upgrader === s.owner) {
          this.upgrader = null;
          changed = true;
        }
        if (s.drop === '*' && (this.holds(s.owner) || this.zombies.has(s.owner))) {
          this.removeHolds(s.owner);
          this.zombies.delete(s.owner);
          changed = true;
        } else if (s.drop !== '' && s.drop !== '*') {
          this.zombies.delete(s.owner); // an expired owner's leftovers are pruned on the way
          if (this.writer === s.owner && this.wc.includes(s.drop)) {
            this.wc = this.wc.filter((id) => id !== s.drop);
            if (this.wc.length === 0) this.writer = null;
            changed = true;
          } else if (this.readers.get(s.owner)?.includes(s.drop)) {
            const left = this.readers.get(s.owner)!.filter((id) => id !== s.drop);
            if (left.length === 0) this.readers.delete(s.owner);
            else this.readers.set(s.owner, left);
            changed = true;
          }
        }
        if (changed) this.refresh();
        return changed ? 1 : 0;
      }
      case 'expire':
        if (this.holds(s.owner)) {
          this.removeHolds(s.owner);
          this.zombies.add(s.owner);
        }
        return null;
    }
  }

  /** A repeated acquire of a live hold: granted again, nothing changes. */
  private repeated(o: Owner, mode: Mode, id: string): boolean {
    const ids = mode === 'write' ? (this.writer === o ? this.wc : []) : (this.readers.get(o) ?? []);
    if (!ids.includes(id)) return false;
    this.lastGrant = 'same';
    return true;
  }

  private read(o: Owner, id: string): unknown {
    this.pruneAll();
    if (this.repeated(o, 'read', id)) return 'granted';
    const mine = this.holds(o);
    if (this.writer !== null && this.writer !== o) return 'refused:write';
    if (this.config.writerPreference && !mine) {
      const head = this.queue[0];
      if (this.otherUpgrader(o) !== null || (head !== undefined && head !== o)) return 'refused:intent';
    }
    this.lastGrant = this.readers.has(o) ? 'same' : 'new';
    this.readers.set(o, [...(this.readers.get(o) ?? []), id]);
    return 'granted';
  }

  private write(o: Owner, wait: boolean, id: string): unknown {
    this.pruneAll();
    if (this.repeated(o, 'write', id)) return 'granted';
    const mine = this.holds(o);
    const refuse = (reason: string) => {
      if (wait) {
        if (mine) {
          if (this.otherUpgrader(o) === null) this.upgrader = o;
        } else {
          if (!this.queue.includes(o)) {
            this.queue.push(o);
            this.arrival.set(o, this.step);
          }
          if (this.config.handOver) this.queuedIds.set(o, id);
        }
        this.refresh();
      }
      return `refused:${reason}`;
    };
    if (this.writer === o) {
      this.wc.push(id);
      this.lastGrant = 'same';
      return 'granted';
    }
    if (this.writer !== null) return refuse('write');
    const others = this.live().length - (mine ? 1 : 0);
    if (others > 0) {
      if (mine && this.otherUpgrader(o) !== null) return 'refused:upgrade';
      return refuse('read');
    }
    if (!mine) {
      const head = this.queue[0];
      if (head === o) {
        this.skips = 0;
      } else if (head !== undefined) {
        const arrived = this.arrival.get(o);
        const mayPass =
          !this.config.fair && arrived !== undefined && this.freedAt !== null && arrived < this.freedAt && this.skips < MAX_SKIPS;
        if (!mayPass) return refuse('queue');
        this.skips++;
      }
    }
    this.dequeue(o);
    if (this.upgrader === o) this.upgrader = null;
    this.writer = o;
    this.wc = [id];
    this.lastGrant = 'new';
    return 'granted';
  }

  private release(o: Owner, mode: Mode, id: string): unknown {
    // The only holder releasing its only hold, with nobody queued (expired owners count as holders
    // here, as they are not pruned yet): the whole state goes at once, a stale upgrade intent with it.
    const only = (ids: string[] | undefined) => ids !== undefined && ids.length === 1 && ids[0] === id;
    const onlyHold =
      mode === 'write' ? this.writer === o && only(this.wc) && !this.readers.has(o) : only(this.readers.get(o)) && this.writer === null;
    if (onlyHold && this.live().length === 1 && this.zombies.size === 0 && this.queue.length === 0) {
      this.writer = null;
      this.wc = [];
      this.readers.clear();
      this.upgrader = null;
      this.freedAt = null;
      this.skips = 0;
      return 'released:0';
    }
    this.pruneAll();
    if (!this.holds(o)) {
      // The acquire whose hold this is waits no more (in redlock mode it may still queue on a node
      // whose release of the writer before comes after this one).
      if (this.queuedIds.get(o) === id) this.dequeue(o);
      return 'not held';
    }
    let left: number;
    if (mode === 'write') {
      if (this.writer !== o) return 'not held';
      // A repeat of a release that already ran: the other holds stay.
      if (!this.wc.includes(id)) return `released:${this.wc.length}`;
      this.wc = this.wc.filter((x) => x !== id);
      left = this.wc.length;
      if (left === 0) this.writer = null;
    } else {
      const ids = this.readers.get(o);
      if (!ids) return 'not held';
      if (!ids.includes(id)) return `released:${ids.length}`;
      left = ids.length - 1;
      if (left === 0) this.readers.delete(o);
      else
        this.readers.set(
          o,
          ids.filter((x) => x !== id),
        );
    }
    if (left > 0) return `released:${left}`;
    const head = this.queue[0];
    if (this.live().length === 0 && head !== undefined && this.queuedIds.has(head)) {
      // Handed to the longest-waiting writer, under the hold id of its latest try.
      const handed = this.queuedIds.get(head)!;
      this.dequeue(head);
      this.skips = 0;
      this.writer = head;
      this.wc = [handed];
      this.handedTo = head;
      return 'released:0';
    }
    if (this.live().length === 0) this.freedAt = this.step;
    this.refresh();
    return 'released:0';
  }

  /** The state as the inspect script should report it. */
  view() {
    const u = this.upgrader !== null && this.readers.has(this.upgrader) ? this.upgrader : null;
    return {
      writer: this.writer === null ? null : { owner: this.writer, holds: this.wc.length },
      readers: [...this.readers].map(([owner, ids]) => ({ owner, holds: ids.length })).sort((a, b) => a.owner.localeCompare(b.owner)),
      queue: [...this.queue],
      waitingWriter: u ?? this.queue[0] ?? null,
    };
  }
}

/** Runs one step on Redis with the real scripts; the reply in the model's terms, and the fence of a grant. */
async function run(redis: RedisClient, keys: LockKeys, config: Config, s: Resolved): Promise<{ reply: unknown; fence?: number }> {
  const names = [keys.state, keys.leases, keys.queue] as const;
  switch (s.op) {
    case 'read':
    case 'write': {
      const reply =
        s.op === 'read'
          ? await runScript(driverFor(redis), 'acquireRead', names, [
              LEASE_MS,
              holderArg('read', s.id, s.owner),
              config.writerPreference ? '1' : '0',
            ])
          : await runScript(driverFor(redis), 'acquireWrite', names, [
              LEASE_MS,
              holderArg('write', s.id, s.owner),
              s.wait ? BEAT_MS : 0,
              `${config.fair ? '1' : '0'}${config.handOver ? 'h' : ''}`,
            ]);
      const outcome = parseAcquireReply(reply, LEASE_MS);
      if (!outcome.granted) return { reply: `refused:${outcome.reason}` };
      expect(outcome.leaseRemainingMs).to.be.within(1, LEASE_MS);
      return { reply: 'granted', fence: outcome.fence };
    }
    case 'release': {
      const left = await runScript(driverFor(redis), 'release', names, [holderArg(s.mode, s.id, s.owner)]);
      return { reply: left >= 0 ? `released:${left}` : 'not held' };
    }
    case 'extend': {
      const [, , left] = await runScript(driverFor(redis), 'extend', names, [EXTEND_BUDGET_US, s.owner, LEASE_MS]);
      return { reply: left! > 0 ? 'extended' : 'not held' };
    }
    case 'abandon':
      return { reply: await runScript(driverFor(redis), 'abandon', names, [s.owner, s.drop]) };
    case 'expire': {
      // The owner's deadline passes while its stale fields stay (they are pruned lazily, as the model's zombies).
      // A sole holder kept in the hash alone (o) is first moved into the leases zset, as any other script would.
      const [sole, fence] = await redis.hmget(keys.state, 'o', 'f');
      const [m, holdId, soleOwner] = /^([wr]) (\S+) (.*)$/.exec(sole ?? '')?.slice(1) ?? [];
      if (soleOwner === s.owner) {
        const at = await redis.pexpiretime(keys.state);
        const holds = `${fence} ${holdId}`;
        const fields: Record<string, string> = m === 'w' ? { w: s.owner, wc: holds } : { [`r:${s.owner}`]: holds };
        await redis.multi().zadd(keys.leases, at, s.owner).pexpireat(keys.leases, at).hset(keys.state, fields).hdel(keys.state, 'o').exec();
      }
      await redis.zadd(keys.leases, 'XX', 1, s.owner);
      return { reply: null };
    }
  }
}

async function inspect(redis: RedisClient, keys: LockKeys) {
  const info = await new ScriptedBackend(driverFor(redis), hashLayout('sm')).inspect('sm', keys);
  return {
    writer: info.writer && { owner: info.writer.owner, holds: info.writer.holds },
    readers: info.readers.map((r) => ({ owner: r.owner, holds: r.holds })).sort((a, b) => a.owner.localeCompare(b.owner)),
    queue: info.queue.map((w) => w.owner),
    waitingWriter: info.waitingWriter?.owner ?? null,
  };
}

const owner = fc.constantFrom(...OWNERS);
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: owner.map((o) => ({ op: 'read', owner: o }) as Step) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('write' as const), owner, wait: fc.boolean() }) },
  { weight: 2, arbitrary: fc.constant({ op: 'repeat' } as Step) },
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('release' as const),
      owner,
      mode: fc.constantFrom('read' as const, 'write' as const),
      pick: fc.nat(7),
    }),
  },
  { weight: 1, arbitrary: owner.map((o) => ({ op: 'extend', owner: o }) as Step) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('abandon' as const),
      owner,
      drop: fc.oneof(fc.constantFrom('withdraw' as const, 'all' as const), fc.nat(7)),
    }),
  },
  { weight: 1, arbitrary: owner.map((o) => ({ op: 'expire', owner: o }) as Step) },
);
const config = fc.record({ fair: fc.boolean(), writerPreference: fc.boolean(), handOver: fc.boolean() });
/** Writers that queue and take turns among three owners: reaches the pass-over rules of the default (non-fair) queue. */
const writerOwner = fc.constantFrom<Owner>(...OWNERS);
/** One writer holds, the three others queue behind it. */
const QUEUED: Step[] = [
  { op: 'write', owner: 'A', wait: true },
  { op: 'write', owner: 'B', wait: true },
  { op: 'write', owner: 'C', wait: true },
  { op: 'write', owner: 'D', wait: true },
];
const writerStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: writerOwner.map((o) => ({ op: 'write', owner: o, wait: true }) as Step) },
  { weight: 4, arbitrary: writerOwner.map((o) => ({ op: 'release', owner: o, mode: 'write', pick: -1 }) as Step) },
  { weight: 1, arbitrary: writerOwner.map((o) => ({ op: 'read', owner: o }) as Step) },
  { weight: 1, arbitrary: writerOwner.map((o) => ({ op: 'release', owner: o, mode: 'read', pick: -1 }) as Step) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('abandon' as const), owner: writerOwner, drop: fc.constant('withdraw' as const) }) },
);

/** Sequences these properties once failed on, run first every time. */
const FOUND: [Config, Step[]][] = [
  // A writer queued under h1 whose read expired releases h1: it holds nothing, so its queued acquire goes.
  [
    { fair: false, writerPreference: false, handOver: true },
    [
      { op: 'read', owner: 'A' },
      { op: 'write', owner: 'B', wait: true },
      { op: 'read', owner: 'B' },
      { op: 'expire', owner: 'B' },
      { op: 'release', owner: 'B', mode: 'write', pick: 0 },
      { op: 'release', owner: 'A', mode: 'read', pick: 0 },
    ],
  ],
  // The last waiter leaves while the only holder's lease has expired: every key goes, the expired holder's
  // fields with them, so its abandon finds nothing.
  [
    { fair: false, writerPreference: false, handOver: false },
    [
      { op: 'write', owner: 'C', wait: false },
      { op: 'write', owner: 'D', wait: true },
      { op: 'expire', owner: 'C' },
      { op: 'abandon', owner: 'D', drop: 'withdraw' },
      { op: 'abandon', owner: 'C', drop: 'all' },
    ],
  ],
];

forEachTopology('lock scripts against a model (properties)', (ctx) => {
  const check = async (
    what: string,
    configs: fc.Arbitrary<Config>,
    steps: fc.Arbitrary<Step>,
    numRuns: number,
    prelude: Step[] = [],
    examples: [Config, Step[]][] = [],
  ) => {
    const redis = ctx.client();
    let runNo = 0;
    let checked = 0;
    await fc.assert(
      fc.asyncProperty(configs, fc.array(steps, { minLength: 5, maxLength: 80, size: 'max' }), async (cfg, sequence) => {
        const keys = lockKeys('sm', `${what}-${runNo++}`);
        const model = new Model(cfg);
        const ids = new Ids();
        let lastFence = 0;
        const fences = new Map<string, number>();
        try {
          for (const [i, step] of [...prelude, ...sequence].entries()) {
            const s = ids.resolve(step);
            if (s === undefined) continue; // a repeat before any acquire
            const expected = model.apply(s);
            const { reply, fence } = await run(redis, keys, cfg, s);
            const where = `step ${i} ${JSON.stringify(s)} with ${JSON.stringify(cfg)}`;
            expect(reply, where).to.deep.equal(expected);
            if (model.handedTo !== null) {
              // The handed holding's fence, as the release's message names it: from the hold list.
              const handedFence = Number((await redis.hget(keys.state, 'wc'))!.split(' ')[0]);
              expect(handedFence, `handed fence at ${where}`).to.be.greaterThan(lastFence);
              lastFence = handedFence;
              fences.set(`${model.handedTo}:write`, handedFence);
            }
            if (fence !== undefined && (s.op === 'read' || s.op === 'write')) {
              // A new holding gets a larger fence; a reentrant or repeated grant its holding's fence again.
              const holding = `${s.owner}:${s.op}`;
              if (model.lastGrant === 'new') {
                expect(fence, `fence at ${where}`).to.be.greaterThan(lastFence);
                lastFence = fence;
                fences.set(holding, fence);
              } else {
                expect(fence, `fence at ${where}`).to.equal(fences.get(holding));
              }
            }
            expect(await inspect(redis, keys), `state after ${where}`).to.deep.equal(model.view());
            checked++;
          }
        } finally {
          await redis.del(keys.state, keys.leases, keys.queue);
        }
      }),
      { numRuns, examples },
    );
    console.log(`      (${runNo} runs, ${checked} steps checked)`);
    expect(checked).to.be.greaterThan(numRuns);
  };
  const runs = (standalone: number) => Number(process.env.SM_RUNS ?? (ctx.kind === 'standalone' ? standalone : standalone / 3));

  it('agree with the model on every reply and every state, for random sequences of steps', async function () {
    this.timeout(120_000);
    await check('any', config, step, runs(300), [], FOUND);
  });

  it("agree with the model on the writers' queue and its pass-over rules", async function () {
    this.timeout(120_000);
    await check(
      'queue',
      fc.record({ fair: fc.constant(false), writerPreference: fc.boolean(), handOver: fc.boolean() }),
      writerStep,
      runs(300),
      QUEUED,
    );
  });
});
