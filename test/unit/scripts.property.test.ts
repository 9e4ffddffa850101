// Property test of the Lua state machine against a small in-memory model.
//
// Unlike the other unit tests this one needs a Redis server: the point is to
// run the real scripts. Random sequences of acquireRead / acquireWrite (a try,
// or a waiter that queues) / release / extend / abandon / expiry for a few
// owners run against Redis and against the model below, and every reply and
// the state read back by the inspect script must agree after each step.
//
// Leases and waiter heartbeats are long (minutes), so nothing expires by
// itself during a run; expiry is modelled only by an explicit step that moves
// one owner's deadline into the past (ZADD XX <past>), exactly what the scripts
// see when a lease ran out. Time is then a logical clock: the order of steps.
import { expect } from 'chai';
import fc from 'fast-check';
import { describeState, parseAcquireReply } from '../../src/hash-backend.js';
import { lockKeys, type LockKeys } from '../../src/keys.js';
import type { RedisClient } from '../../src/redis.js';
import { defineScripts, runScript } from '../../src/scripts.js';
import { forEachTopology } from '../setup/topologies.js';

const OWNERS = ['A', 'B', 'C', 'D'] as const;
type Owner = (typeof OWNERS)[number];
const LEASE_MS = 120_000;
const BEAT_MS = 600_000;
const MAX_SKIPS = 2;

type Step =
  | { op: 'read'; owner: Owner }
  | { op: 'write'; owner: Owner; wait: boolean }
  | { op: 'release'; owner: Owner; mode: 'read' | 'write' }
  | { op: 'extend'; owner: Owner }
  | { op: 'abandon'; owner: Owner; dropHolds: boolean }
  | { op: 'expire'; owner: Owner };

interface Config {
  fair: boolean;
  writerPreference: boolean;
}

/** What the scripts should do, as plainly as it can be said. */
class Model {
  writer: Owner | null = null;
  wc = 0;
  readers = new Map<Owner, number>();
  /** Waiting writers, first come first, with their arrival step. */
  queue: Owner[] = [];
  arrival = new Map<Owner, number>();
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
      this.wc = 0;
    }
    this.readers.delete(o);
  }
  private pruneAll(): void {
    this.zombies.clear(); // fewer zombies than one call's prune batch
  }
  private dequeue(o: Owner): void {
    this.queue = this.queue.filter((q) => q !== o);
    this.arrival.delete(o);
  }
  /** refreshExpiry: every key is deleted when nothing is held and nobody waits. */
  private refresh(): void {
    if (this.live().length === 0 && this.queue.length === 0 && this.upgrader === null) {
      this.freedAt = null;
      this.skips = 0;
      this.upgrader = null;
    }
  }

  /** The expected reply of one step; compared with Redis' (fences and times left out). */
  apply(s: Step): unknown {
    this.step++;
    switch (s.op) {
      case 'read':
        return this.read(s.owner);
      case 'write':
        return this.write(s.owner, s.wait);
      case 'release':
        return this.release(s.owner, s.mode);
      case 'extend': {
        const held = this.holds(s.owner);
        const zombie = this.zombies.delete(s.owner);
        if (held || zombie) this.refresh();
        return held ? 'extended' : 'not held';
      }
      case 'abandon': {
        let changed = false;
        if (this.queue.includes(s.owner)) {
          this.dequeue(s.owner);
          changed = true;
        }
        if (this.upgrader === s.owner) {
          this.upgrader = null;
          changed = true;
        }
        if (s.dropHolds && (this.holds(s.owner) || this.zombies.has(s.owner))) {
          this.removeHolds(s.owner);
          this.zombies.delete(s.owner);
          changed = true;
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

  private read(o: Owner): unknown {
    this.pruneAll();
    const mine = this.holds(o);
    if (this.writer !== null && this.writer !== o) return 'refused:write';
    if (this.config.writerPreference && !mine) {
      const head = this.queue[0];
      if (this.otherUpgrader(o) !== null || (head !== undefined && head !== o)) return 'refused:intent';
    }
    this.readers.set(o, (this.readers.get(o) ?? 0) + 1);
    return 'granted';
  }

  private write(o: Owner, wait: boolean): unknown {
    this.pruneAll();
    const mine = this.holds(o);
    const refuse = (reason: string) => {
      if (wait) {
        if (mine) {
          if (this.otherUpgrader(o) === null) this.upgrader = o;
        } else if (!this.queue.includes(o)) {
          this.queue.push(o);
          this.arrival.set(o, this.step);
        }
        this.refresh();
      }
      return `refused:${reason}`;
    };
    if (this.writer === o) {
      this.wc++;
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
    this.wc = 1;
    return 'granted';
  }

  private release(o: Owner, mode: 'read' | 'write'): unknown {
    // The only holder releasing its only hold, with nobody queued (expired owners count as holders
    // here, as they are not pruned yet): the whole state goes at once, a stale upgrade intent with it.
    const onlyHold =
      mode === 'write' ? this.writer === o && this.wc === 1 && !this.readers.has(o) : this.readers.get(o) === 1 && this.writer === null;
    if (onlyHold && this.live().length === 1 && this.zombies.size === 0 && this.queue.length === 0) {
      this.writer = null;
      this.wc = 0;
      this.readers.clear();
      this.upgrader = null;
      this.freedAt = null;
      this.skips = 0;
      return 'released:0';
    }
    this.pruneAll();
    if (!this.holds(o)) return 'not held';
    let left: number;
    if (mode === 'write') {
      if (this.writer !== o) return 'not held';
      left = --this.wc;
      if (left === 0) this.writer = null;
    } else {
      if (!this.readers.has(o)) return 'not held';
      left = this.readers.get(o)! - 1;
      if (left === 0) this.readers.delete(o);
      else this.readers.set(o, left);
    }
    if (left > 0) return `released:${left}`;
    if (this.live().length === 0) this.freedAt = this.step;
    this.refresh();
    return 'released:0';
  }

  /** The state as the inspect script should report it. */
  view() {
    const u = this.upgrader !== null && this.readers.has(this.upgrader) ? this.upgrader : null;
    return {
      writer: this.writer === null ? null : { owner: this.writer, holds: this.wc },
      readers: [...this.readers].map(([owner, holds]) => ({ owner, holds })).sort((a, b) => a.owner.localeCompare(b.owner)),
      queue: [...this.queue],
      waitingWriter: u ?? this.queue[0] ?? null,
    };
  }
}

/** Runs one step on Redis with the real scripts; the reply in the model's terms, and the fence of a grant. */
async function run(redis: RedisClient, keys: LockKeys, config: Config, s: Step): Promise<{ reply: unknown; fence?: number }> {
  const names = [keys.state, keys.leases, keys.queue];
  switch (s.op) {
    case 'read':
    case 'write': {
      const args =
        s.op === 'read'
          ? [...names, s.owner, LEASE_MS, config.writerPreference ? '1' : '0']
          : [...names, s.owner, LEASE_MS, s.wait ? BEAT_MS : 0, config.fair ? '1' : '0'];
      const outcome = parseAcquireReply((await runScript(redis, s.op === 'read' ? 'acquireRead' : 'acquireWrite', args)) as never, LEASE_MS);
      if (!outcome.granted) return { reply: `refused:${outcome.reason}` };
      expect(outcome.leaseRemainingMs).to.be.within(1, LEASE_MS);
      return { reply: 'granted', fence: outcome.fence };
    }
    case 'release': {
      const left = (await runScript(redis, 'release', [...names, s.owner, s.mode, keys.channel])) as number;
      return { reply: left >= 0 ? `released:${left}` : 'not held' };
    }
    case 'extend': {
      const [left] = (await runScript(redis, 'extend', [3, ...names, ...names, s.owner, LEASE_MS])) as [number];
      return { reply: left > 0 ? 'extended' : 'not held' };
    }
    case 'abandon':
      return { reply: await runScript(redis, 'abandon', [...names, s.owner, s.dropHolds ? '1' : '0', keys.channel]) };
    case 'expire':
      // The owner's deadline passes while its stale fields stay (they are pruned lazily, as the model's zombies).
      // A sole holder kept in the hash alone (o) is first moved into the leases zset, as any other script would.
      if ((await redis.hget(keys.state, 'o')) === s.owner) {
        const at = await redis.pexpiretime(keys.state);
        await redis.multi().zadd(keys.leases, at, s.owner).pexpireat(keys.leases, at).hdel(keys.state, 'o').exec();
      }
      await redis.zadd(keys.leases, 'XX', 1, s.owner);
      return { reply: null };
  }
}

async function inspect(redis: RedisClient, keys: LockKeys) {
  const [now, fields, leases, queue] = (await runScript(redis, 'inspect', [keys.state, keys.leases, keys.queue])) as [
    number,
    string[],
    string[],
    string[],
  ];
  const pairs = (flat: string[]) => new Map(flat.flatMap((v, i) => (i % 2 === 0 ? [[v, flat[i + 1]!] as const] : [])));
  const info = describeState('sm', keys.state, now, pairs(fields), pairs(leases), queue);
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
  { weight: 5, arbitrary: fc.record({ op: fc.constant('release' as const), owner, mode: fc.constantFrom('read' as const, 'write' as const) }) },
  { weight: 1, arbitrary: owner.map((o) => ({ op: 'extend', owner: o }) as Step) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('abandon' as const), owner, dropHolds: fc.boolean() }) },
  { weight: 1, arbitrary: owner.map((o) => ({ op: 'expire', owner: o }) as Step) },
);
const config = fc.record({ fair: fc.boolean(), writerPreference: fc.boolean() });
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
  { weight: 4, arbitrary: writerOwner.map((o) => ({ op: 'release', owner: o, mode: 'write' }) as Step) },
  { weight: 1, arbitrary: writerOwner.map((o) => ({ op: 'read', owner: o }) as Step) },
  { weight: 1, arbitrary: writerOwner.map((o) => ({ op: 'release', owner: o, mode: 'read' }) as Step) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('abandon' as const), owner: writerOwner, dropHolds: fc.constant(false) }) },
);

forEachTopology('lock scripts against a model (properties)', (ctx) => {
  const check = async (what: string, configs: fc.Arbitrary<Config>, steps: fc.Arbitrary<Step>, numRuns: number, prelude: Step[] = []) => {
    const redis = ctx.client();
    defineScripts(redis);
    let runNo = 0;
    let checked = 0;
    await fc.assert(
      fc.asyncProperty(configs, fc.array(steps, { minLength: 5, maxLength: 80, size: 'max' }), async (cfg, sequence) => {
        const keys = lockKeys('sm', `${what}-${runNo++}`);
        const model = new Model(cfg);
        let lastFence = 0;
        try {
          for (const [i, s] of [...prelude, ...sequence].entries()) {
            const expected = model.apply(s);
            const { reply, fence } = await run(redis, keys, cfg, s);
            const where = `step ${i} ${JSON.stringify(s)} with ${JSON.stringify(cfg)}`;
            expect(reply, where).to.deep.equal(expected);
            if (fence !== undefined) {
              expect(fence, `fence at ${where}`).to.be.greaterThan(lastFence);
              lastFence = fence;
            }
            expect(await inspect(redis, keys), `state after ${where}`).to.deep.equal(model.view());
            checked++;
          }
        } finally {
          await redis.del(keys.state, keys.leases, keys.queue);
        }
      }),
      { numRuns },
    );
    console.log(`      (${runNo} runs, ${checked} steps checked)`);
    expect(checked).to.be.greaterThan(numRuns);
  };
  const runs = (standalone: number) => Number(process.env['SM_RUNS'] ?? (ctx.kind === 'standalone' ? standalone : standalone / 3));

  it('agree with the model on every reply and every state, for random sequences of steps', async function () {
    this.timeout(120_000);
    await check('any', config, step, runs(300));
  });

  it('agree with the model on the writers\' queue and its pass-over rules', async function () {
    this.timeout(120_000);
    await check('queue', fc.record({ fair: fc.constant(false), writerPreference: fc.boolean() }), writerStep, runs(300), QUEUED);
  });
});
