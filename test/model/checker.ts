/**
 * A bounded model checker of the lock protocol: from the first state of a
 * configuration (world.ts) it explores, breadth first, every interleaving of
 * the owners' steps and the environment's events, running each step's real
 * script (the virtual-clock build of lua/) on a real server, and checks the
 * invariants in every state it reaches and on every step; then liveness on
 * the finite graph. Breadth first, the first violation found comes with a
 * shortest path to it, printed as a trace and replayable (replay()).
 */
import type { Redis } from 'ioredis';
import { holderArg } from '../../src/backends/scripts.js';
import { Executor, type Ran, type ScriptCall } from './executor.js';
import {
  advanceClock,
  BEAT_MS,
  type Call,
  type Config,
  canonical,
  EXTEND_BUDGET_US,
  GUARDED_FENCE_KEY,
  GUARDED_KEY,
  initialWorld,
  LEASE_MS,
  liveHolds,
  type Mode,
  nextDeadline,
  type OwnerState,
  ownerKeys,
  RECHECK_MS,
  type ServerHold,
  START_MS,
  summary,
  usNow,
  type World,
  worldKeys,
} from './world.js';

export interface Violation {
  /** Which invariant. */
  readonly kind: string;
  readonly message: string;
  /** The steps from the first state, as their labels (replay() takes them). */
  readonly path: readonly string[];
  /** The steps, readably. */
  readonly trace: readonly string[];
}

export interface CheckResult {
  readonly config: string;
  readonly states: number;
  readonly transitions: number;
  readonly depth: number;
  readonly seconds: number;
  /** The state bound was reached before the graph was explored. */
  readonly bounded: boolean;
  /** When bounded: a deepest path found, readably (what made the graph so large). */
  readonly deepest?: readonly string[];
  readonly violation?: Violation;
}

/** One step from a state. */
interface Step {
  label: string;
  /** What happened, for the trace. */
  text: string;
  world: World;
  /** A step taken also once holders stop (clock, waiters' tries, resends): the liveness graph. */
  continues: boolean;
  /** The owner whose call this was, if any. */
  caller?: number;
  /** Invariants this step broke. */
  broken: { kind: string; message: string }[];
  /** A message of this step was meant for a stalled waiter. */
  stalled?: boolean;
}

const TOKEN = (config: Config, i: number) => config.owners[i]!.name;

/** The script call of an owner's call, by its layout. */
function scriptCall(config: Config, i: number, c: Call): ScriptCall {
  const spec = config.owners[i]!;
  const owner = spec.name;
  const k = ownerKeys(owner, spec.layout);
  const legacy = spec.layout !== 'hash';
  const peer = k.peerChannel ?? '';
  switch (c.kind) {
    case 'acquire':
      if (c.mode === 'read')
        return {
          script: legacy ? 'legacyAcquireRead' : 'acquireRead',
          keys: k.names,
          args: [LEASE_MS, holderArg('read', c.id, owner), '1'],
        };
      return {
        script: legacy ? 'legacyAcquireWrite' : 'acquireWrite',
        keys: k.names,
        args: [
          LEASE_MS,
          holderArg('write', c.id, owner),
          c.wait ? BEAT_MS : 0,
          `${config.fair ? '1' : '0'}${legacy || config.handOver === false ? '' : 'h'}`,
        ],
      };
    case 'release':
      return {
        script: legacy ? 'legacyRelease' : 'release',
        keys: k.names,
        args: legacy ? [holderArg(c.mode, c.id, owner), peer] : [holderArg(c.mode, c.id, owner)],
      };
    case 'extend':
      if (legacy) return { script: 'legacyExtend', keys: k.names, args: [EXTEND_BUDGET_US, owner, LEASE_MS] };
      if (config.acrossSlots) return { script: 'extendAcrossSlots', keys: k.names, args: [EXTEND_BUDGET_US, ...k.names, owner, LEASE_MS] };
      return { script: 'extend', keys: k.names, args: [EXTEND_BUDGET_US, owner, LEASE_MS] };
    case 'abandon':
      return { script: legacy ? 'legacyAbandon' : 'abandon', keys: k.names, args: legacy ? [owner, c.id, peer] : [owner, c.id] };
    case 'fencedGet':
      return { script: 'fencedGet', keys: [GUARDED_KEY, GUARDED_FENCE_KEY], args: [c.fence] };
    case 'fencedSet':
      return { script: 'fencedSet', keys: [GUARDED_KEY, GUARDED_FENCE_KEY], args: [c.id, c.fence, 0] };
  }
}

/** Times and fences as the trace prints them: ms since the start, us since the start. */
const at = (ms: number) => `t+${ms - START_MS}`;
const fenceText = (f: number) => `fence ${f - START_MS * 1000}`;

function callText(c: Call): string {
  switch (c.kind) {
    case 'acquire':
      return `${c.wait ? 'acquire' : 'try'} ${c.mode} (${c.id})`;
    case 'release':
      return `release ${c.mode} (${c.id})`;
    case 'extend':
      return 'extend';
    case 'abandon':
      return `abandon (${c.id})`;
    case 'fencedGet':
      return `fencedGet with ${fenceText(c.fence)}`;
    case 'fencedSet':
      return `fencedSet with ${fenceText(c.fence)}`;
  }
}

function replyText(reply: unknown): string {
  if (reply instanceof Error) return `error ${reply.message}`;
  return JSON.stringify(reply);
}

type Acquired = { granted: true; fence: number; remaining: number } | { granted: false; retry: number; reason: string; beat?: number };

function acquireOutcome(reply: unknown): Acquired {
  if (typeof reply === 'number') return { granted: true, fence: reply, remaining: LEASE_MS };
  const r = reply as (number | string)[];
  if (r[0] === 1) return { granted: true, fence: Number(r[1]), remaining: Number(r[2]) };
  const refused: Acquired = { granted: false, retry: Number(r[1]), reason: String(r[2]) };
  if (r[3] !== undefined) refused.beat = Number(r[3]);
  return refused;
}

function cloneOwners(owners: readonly OwnerState[]): OwnerState[] {
  return owners.map((o) => ({ ...o, holds: o.holds.map((h) => ({ ...h })), wait: o.wait && { ...o.wait } }));
}

/** The waiters of a state that sleep: not woken, their sleep not over. */
function sleeping(w: World, i: number): boolean {
  const o = w.owners[i]!;
  return !o.crashed && o.wait !== undefined && o.pending === undefined && !o.wait.woken && w.now < o.wait.retryAt;
}

function waiting(w: World, i: number): boolean {
  const o = w.owners[i]!;
  return !o.crashed && (o.wait !== undefined || o.pending !== undefined || o.followUp !== undefined);
}

export class Checker {
  private readonly executor: Executor;
  private readonly kinds;

  constructor(
    readonly config: Config,
    redis: Redis,
    scripts: Readonly<Record<string, string>>,
  ) {
    this.kinds = worldKeys(config);
    this.executor = new Executor(redis, scripts, this.kinds);
  }

  load(): Promise<void> {
    return this.executor.load();
  }

  /** Every step from `w`. */
  async steps(w: World): Promise<Step[]> {
    const out: Step[] = [];
    const { config } = this;
    for (let i = 0; i < config.owners.length; i++) {
      const o = w.owners[i]!;
      if (o.crashed) continue;
      const name = TOKEN(config, i);
      if (o.pending) {
        out.push(...(await this.callSteps(w, i, o.pending, 'resend', true)));
        if (o.pending.kind === 'acquire') {
          out.push(...(await this.callSteps(w, i, { kind: 'abandon', id: o.pending.id }, 'abandon', true, { pending: undefined })));
        }
      } else if (o.followUp) {
        out.push(...(await this.callSteps(w, i, o.followUp, 'gives up', true, { followUp: undefined })));
      } else if (o.wait) {
        const c: Call = { kind: 'acquire', mode: o.wait.mode, id: o.wait.id, wait: true };
        if (o.wait.woken || w.now >= o.wait.retryAt) {
          out.push(...(await this.callSteps(w, i, c, o.wait.woken ? 'woken, tries again' : 'wakes by its timer, tries again', true)));
          if (w.pauses > 0) {
            // Paused (a stalled process): it sleeps through its timer and any message, until its queue heartbeat lapsed.
            const owners = cloneOwners(w.owners);
            const until = Math.max(o.wait.queuedUntil ?? w.now, w.now) + 1;
            owners[i]!.wait = { ...o.wait, woken: false, retryAt: until, paused: true };
            const text = `${name} pauses until ${at(until)}`;
            out.push({ label: `${name}:pause`, text, world: { ...w, owners, pauses: w.pauses - 1 }, continues: false, broken: [] });
          }
        }
        if (config.giveUp)
          out.push(...(await this.callSteps(w, i, { kind: 'abandon', id: o.wait.id }, 'gives up waiting', false, { wait: undefined })));
      } else if (o.pc < config.owners[i]!.program.length) {
        const issued = this.issue(w, i);
        if (issued === undefined) {
          const owners = cloneOwners(w.owners);
          owners[i]!.pc++;
          out.push({
            label: `${name}:skip`,
            text: `${name} skips step ${o.pc + 1} (nothing to act on)`,
            world: { ...w, owners },
            continues: false,
            broken: [],
          });
        } else {
          out.push(...(await this.callSteps(w, i, issued.call, '', false, issued.patch)));
        }
      }
      if (w.crashes > 0 && (o.pc < config.owners[i]!.program.length || o.wait || o.pending || o.holds.length > 0)) {
        const owners = cloneOwners(w.owners);
        owners[i] = { ...owners[i]!, crashed: true, holds: [], wait: undefined, pending: undefined, followUp: undefined };
        out.push({
          label: `${name}:crash`,
          text: `${name} stops for good`,
          world: { ...w, owners, crashes: w.crashes - 1 },
          continues: false,
          broken: [],
        });
      }
    }
    // Waiters are timely: the clock moves on once every due waiter tried (or paused).
    const next = nextDeadline(config, w);
    const due = w.owners.some((o, i) => o.wait !== undefined && !o.pending && !o.crashed && !sleeping(w, i));
    if (next !== undefined && !due) {
      const after = advanceClock(w, next);
      out.push({
        label: 'clock',
        text: `clock +${next - w.now} ms (${at(next)})`,
        world: after,
        continues: true,
        broken: this.stateInvariants(w, after),
      });
    }
    return out;
  }

  /** The call of the owner's next program step, with what it changes in the owner's view at once; undefined: nothing to do. */
  private issue(w: World, i: number): { call: Call; patch: Partial<OwnerState> } | undefined {
    const o = w.owners[i]!;
    const op = this.config.owners[i]!.program[o.pc]!;
    const id = `${TOKEN(this.config, i)}.${o.pc}`;
    const pc = o.pc + 1;
    const latest = (mode?: Mode) => [...o.holds].reverse().find((h) => mode === undefined || h.mode === mode);
    switch (op.op) {
      case 'read':
      case 'write':
        return { call: { kind: 'acquire', mode: op.op, id, wait: op.wait }, patch: { pc } };
      case 'release': {
        const h = latest(op.mode);
        if (!h) return undefined;
        // Released: the owner no longer counts on it, whatever the reply.
        return { call: { kind: 'release', mode: op.mode, id: h.id }, patch: { pc, holds: o.holds.filter((x) => x !== h) } };
      }
      case 'extend':
        return o.holds.length === 0 ? undefined : { call: { kind: 'extend' }, patch: { pc } };
      case 'fencedGet':
      case 'fencedSet': {
        const h = latest(op.op === 'fencedSet' ? 'write' : undefined);
        return h ? { call: { kind: op.op, fence: h.fence, id: `${id}` }, patch: { pc } } : undefined;
      }
    }
  }

  /** The steps of one call: delivered once, its reply lost, or delivered twice (within the budgets). */
  private async callSteps(w: World, i: number, c: Call, how: string, continues: boolean, patch: Partial<OwnerState> = {}): Promise<Step[]> {
    const out: Step[] = [];
    const name = TOKEN(this.config, i);
    const base = `${name}:${how || 'op'}`;
    const text = `${name}${how ? ` ${how}:` : ''} ${callText(c)}`;
    const once = await this.executor.run(w, [scriptCall(this.config, i, c)]);
    out.push(this.afterCall(w, i, c, once, 0, patch, { label: base, text, continues }));
    if (w.lost > 0) {
      out.push(this.afterCall(w, i, c, once, 0, patch, { label: `${base}:lost`, text: `${text}, reply lost`, continues: false }, 'lost'));
    }
    if (w.duplicated > 0) {
      const twice = await this.executor.run(w, [scriptCall(this.config, i, c), scriptCall(this.config, i, c)]);
      out.push(
        this.afterCall(w, i, c, twice, 1, patch, { label: `${base}:twice`, text: `${text}, delivered twice`, continues: false }, 'twice'),
      );
    }
    return out;
  }

  private afterCall(
    w: World,
    i: number,
    c: Call,
    ran: Ran,
    last: number,
    patch: Partial<OwnerState>,
    step: { label: string; text: string; continues: boolean },
    variant?: 'lost' | 'twice',
  ): Step {
    const { config } = this;
    const broken: { kind: string; message: string }[] = [];
    const reply = ran.replies[0];
    const owners = cloneOwners(w.owners);
    owners[i] = { ...owners[i]!, ...patch };
    const after: World = { ...w, keys: ran.after[last]!, tick: ran.tick, owners };
    if (after.tick >= 1000) throw new Error('the model clock ran 1000 scripts within one ms: a path too long for its clock');
    let text = step.text;
    if (variant === 'lost') after.lost--;
    if (variant === 'twice') {
      after.duplicated--;
      const first: World = { ...after, keys: ran.after[0]! };
      if (summary(config, first) !== summary(config, after)) {
        broken.push({ kind: 'duplicate', message: `the second delivery of ${callText(c)} changed the state` });
      }
    }
    for (const r of ran.replies) {
      if (r instanceof Error) broken.push({ kind: 'script error', message: `${callText(c)} failed: ${r.message}` });
    }
    const o = owners[i]!;
    const token = TOKEN(config, i);
    const before = liveHolds(config, w);
    const now = liveHolds(config, after);
    const mine = (hs: ServerHold[], mode?: Mode) => hs.filter((h) => h.owner === token && (mode === undefined || h.mode === mode));
    if (!(reply instanceof Error)) {
      if (variant === 'lost') {
        o.pending = c;
        if (c.kind === 'acquire') o.wait = undefined;
        text += '';
      } else {
        o.pending = undefined;
        text += ` → ${this.apply(w, after, i, c, reply, before, now, mine, broken)}`;
      }
    }
    const stalled = this.deliver(after, ran.published);
    broken.push(...this.stateInvariants(w, after));
    return { label: step.label, text, world: after, continues: step.continues, caller: i, broken, stalled };
  }

  /** The owner's view after a reply, and the reply's agreement with the state it left; returns the reply, readably. */
  private apply(
    w: World,
    after: World,
    i: number,
    c: Call,
    reply: unknown,
    before: ServerHold[],
    now: ServerHold[],
    mine: (hs: ServerHold[], mode?: Mode) => ServerHold[],
    broken: { kind: string; message: string }[],
  ): string {
    const { config } = this;
    const o = after.owners[i]!;
    const token = TOKEN(config, i);
    const disagree = (message: string) =>
      broken.push({ kind: 'reply', message: `${callText(c)} replied ${replyText(reply)}, but ${message}` });
    switch (c.kind) {
      case 'acquire': {
        const r = acquireOutcome(reply);
        if (r.granted) {
          const held = mine(now, c.mode).find((h) => h.ids.includes(c.id));
          if (!held) disagree(`the server shows no ${c.mode} hold ${c.id} of ${token}`);
          else {
            if (held.fence !== r.fence) disagree(`the hold's fence is ${fenceText(held.fence)}`);
            if (held.deadline !== w.now + r.remaining) disagree(`its deadline is ${at(held.deadline)}`);
          }
          this.fairness(w, i, c.mode, broken);
          o.holds = [...o.holds.filter((h) => h.id !== c.id), { mode: c.mode, id: c.id, fence: r.fence, until: w.now + r.remaining }];
          o.wait = undefined;
          return `granted, ${fenceText(r.fence)}, until ${at(w.now + r.remaining)}`;
        }
        if (mine(now, c.mode).some((h) => h.ids.includes(c.id))) disagree(`the server shows ${token} holding ${c.id}`);
        if (r.retry < 0) disagree('a refusal must give a time to retry after');
        this.justified(w, i, c.mode, r, before, disagree);
        if (r.reason === 'upgrade') {
          o.wait = undefined;
          o.followUp = { kind: 'abandon', id: c.id };
          return `refused (upgrade conflict): gives up`;
        }
        if (c.wait) {
          const holding = mine(before).length > 0;
          const queuedUntil = r.beat ?? (c.mode === 'write' ? w.now + BEAT_MS : undefined);
          if (r.beat !== undefined) {
            const hash = after.keys[ownerKeys(token, config.owners[i]!.layout).state];
            const field = hash?.t === 'hash' ? hash.v.find(([f]) => f === `q:${token}`)?.[1] : undefined;
            if (Number(field) !== r.beat) disagree(`its heartbeat on the server is ${field}`);
          }
          const queue = after.keys[ownerKeys(token, config.owners[i]!.layout).names[2]!];
          const place = queue?.t === 'zset' ? queue.v.find(([m]) => m === token)?.[1] : undefined;
          o.wait = {
            mode: c.mode,
            id: c.id,
            retryAt: w.now + Math.min(r.retry + 1, RECHECK_MS),
            woken: false,
            ...(queuedUntil !== undefined && { queuedUntil }),
            // Its place stays while its heartbeat is live (ZADD NX); once that lapsed, it queues anew.
            ...(place !== undefined &&
              !holding && { place: o.wait?.place !== undefined && (o.wait.queuedUntil ?? 0) > w.now ? o.wait.place : place }),
            ...(queuedUntil !== undefined && !holding && { handedUntil: Math.min(queuedUntil, w.now + LEASE_MS) }),
          };
        }
        return `refused (${r.reason}, retry after ${r.retry} ms${r.beat === undefined ? '' : `, queued until ${at(r.beat)}`})`;
      }
      case 'release': {
        const left = reply as number;
        const count = mine(now, c.mode).reduce((n, h) => n + h.ids.length, 0);
        if (left >= 0 && count !== left) disagree(`${token} has ${count} ${c.mode} holds left`);
        if (left < 0 && count > 0) disagree(`${token} still holds ${c.mode}`);
        return left >= 0 ? `released, ${left} left` : 'not held';
      }
      case 'extend': {
        const left = (reply as number[])[2]!;
        const held = mine(now);
        if (left > 0) {
          if (held.length === 0) disagree(`${token} holds nothing`);
          for (const h of held) if (h.deadline !== w.now + left) disagree(`${token}'s deadline is ${at(h.deadline)}`);
          // Holds whose deadline passed were lost: a renewal does not bring them back.
          o.holds = o.holds.filter((h) => h.until > w.now);
          for (const h of o.holds) h.until = w.now + left;
          return `extended until ${at(w.now + left)}`;
        }
        if (held.length > 0) disagree(`${token} still holds`);
        o.holds = [];
        return 'lost';
      }
      case 'abandon': {
        const changed = summary(config, after) !== summary(config, w);
        if (reply !== 1 && changed) disagree('the state changed');
        // An acquire abandoned (its outcome unknown, or its wait given up) leaves nothing of it held.
        if (mine(now).some((h) => h.ids.includes(c.id))) disagree(`${token} still holds ${c.id}`);
        o.wait = undefined;
        return reply === 1 ? 'changed' : 'nothing to do';
      }
      case 'fencedGet':
      case 'fencedSet': {
        const highest = Math.max(w.fencedMax, c.fence);
        const stored = after.keys[GUARDED_FENCE_KEY];
        if (c.kind === 'fencedSet') {
          const written = (reply as unknown[])[0] === 1;
          if (written !== c.fence >= w.fencedMax) {
            broken.push({
              kind: 'fencing',
              message: `fencedSet with ${fenceText(c.fence)} ${written ? 'wrote' : 'was refused'}, after a fence of ${fenceText(w.fencedMax)} was used`,
            });
          }
          after.fencedMax = written ? highest : w.fencedMax;
        } else after.fencedMax = highest;
        if (after.fencedMax > 0 && (stored?.t !== 'string' || Number(stored.v) !== after.fencedMax)) {
          broken.push({ kind: 'fencing', message: `the guarded key's fence is ${stored?.t === 'string' ? stored.v : 'missing'}` });
        }
        return replyText(reply);
      }
    }
  }

  /** A refusal's reason and retry time agree with the state it was refused in. */
  private justified(
    w: World,
    i: number,
    mode: Mode,
    r: { retry: number; reason: string },
    before: ServerHold[],
    disagree: (m: string) => void,
  ): void {
    const { config } = this;
    const token = TOKEN(config, i);
    const others = before.filter((h) => h.owner !== token);
    const holding = before.some((h) => h.owner === token);
    if (mode === 'read' && holding) disagree(`${token} holds the lock: its read (reentrant, or a downgrade) is never refused`);
    // The two-key layout's keys live through the ms of their deadline (as Redis keeps a key), and refuse
    // in that ms (retry after 0), also their own owner: conservative, for one ms.
    const legacy = config.owners[i]!.layout !== 'hash';
    if (legacy && r.retry === 0 && Object.values(w.keys).some((kv) => kv.t === 'string' && kv.at === w.now)) return;
    const firstEnd = (hs: ServerHold[]) => Math.min(...hs.map((h) => h.deadline)) - w.now;
    const k = ownerKeys(token, config.owners[i]!.layout);
    const hash = w.keys[k.state];
    const fields = new Map(hash?.t === 'hash' ? hash.v : []);
    const queue = w.keys[k.names[2]!];
    const queued = (queue?.t === 'zset' ? queue.v : []).filter(([m]) => m !== token && Number(fields.get(`q:${m}`) ?? 0) > w.now);
    const u = fields.get('u');
    const upgrader =
      u !== undefined && u !== token && Number(fields.get('ud') ?? 0) > w.now && others.some((h) => h.owner === u && h.mode === 'read');
    switch (r.reason) {
      case 'write': {
        const writers = others.filter((h) => h.mode === 'write');
        if (writers.length === 0) disagree('no other owner writes');
        else if (r.retry !== firstEnd(writers)) disagree(`the writer's lease ends in ${firstEnd(writers)} ms`);
        break;
      }
      case 'read': {
        const readers = others.filter((h) => h.mode === 'read');
        if (readers.length === 0) disagree('no other owner reads');
        else if (r.retry !== firstEnd(readers)) disagree(`the first other reader's lease ends in ${firstEnd(readers)} ms`);
        break;
      }
      case 'intent':
        if (queued.length === 0 && !upgrader) disagree('no other writer waits');
        break;
      case 'queue':
        if (queued.length === 0) disagree('no other writer is queued');
        break;
      case 'upgrade':
        if (!holding || !upgrader) disagree('no other reader waits to upgrade');
        break;
    }
  }

  /** A writer or reader granted ahead of a writer that waits in the queue (by the owners' own views of their waits). */
  private fairness(w: World, i: number, mode: Mode, broken: { kind: string; message: string }[]): void {
    const { config } = this;
    const token = TOKEN(config, i);
    if (liveHolds(config, w).some((h) => h.owner === token)) return; // a holder: reentrant, upgrade or downgrade
    const me = w.owners[i]!.wait;
    const meQueued = me?.queuedUntil !== undefined && me.queuedUntil > w.now && me.place !== undefined;
    for (let j = 0; j < config.owners.length; j++) {
      const other = w.owners[j]!;
      const ow = other.wait;
      if (
        j === i ||
        other.crashed ||
        other.pending ||
        !ow ||
        ow.mode !== 'write' ||
        ow.queuedUntil === undefined ||
        ow.queuedUntil <= w.now
      )
        continue;
      const name = TOKEN(config, j);
      // Each layout's state keeps its own queue: legacy and bridge owners do not queue behind each other.
      if (ownerKeys(name, config.owners[j]!.layout).state !== ownerKeys(token, config.owners[i]!.layout).state) continue;
      // A reader waiting to upgrade waits so only while it still reads.
      if (ow.place === undefined && !liveHolds(config, w).some((h) => h.owner === name && h.mode === 'read')) continue;
      if (mode === 'read') {
        broken.push({
          kind: 'writer preference',
          message: `reader ${token} admitted while writer ${name} waits (queued until ${at(ow.queuedUntil)})`,
        });
      } else if (ow.place !== undefined && (!meQueued || (config.fair && ow.place < me!.place!))) {
        broken.push({ kind: 'queue order', message: `writer ${token} admitted ahead of writer ${name}, queued earlier and live` });
      }
    }
  }

  /** Wake-up messages reach the waiters they are meant for (src/wakeups.ts, Watch.notify). */
  private deliver(w: World, published: [string, string][]): boolean {
    const { config } = this;
    let stalled = false;
    for (const [channel, message] of published) {
      for (let j = 0; j < config.owners.length; j++) {
        const o = w.owners[j]!;
        if (o.crashed || !o.wait || o.pending) continue;
        if (o.wait.paused) {
          // A stalled waiter sleeps through it: the message was sent, but it cannot act on it.
          stalled ||= channel === ownerKeys(TOKEN(config, j), config.owners[j]!.layout).channel;
          continue;
        }
        const token = TOKEN(config, j);
        const k = ownerKeys(token, config.owners[j]!.layout);
        const handed = /^handed (\S+) (\d+) (\d+) (.*)$/.exec(message);
        if (handed) {
          if (channel !== k.handed || handed[4] !== token || o.wait.mode !== 'write' || handed[1] !== o.wait.id) continue;
          if (o.wait.handedUntil === undefined) continue;
          o.holds = [...o.holds, { mode: 'write', id: o.wait.id, fence: Number(handed[3]), until: o.wait.handedUntil }];
          o.wait = undefined;
          continue;
        }
        if (channel !== k.channel) continue;
        const colon = message.indexOf(':');
        if (o.wait.mode === 'write' && colon >= 0 && message.slice(colon + 1) !== token) continue;
        o.wait.woken = true;
      }
    }
    return stalled;
  }

  /** The invariants of one state, `w` the one before it. */
  stateInvariants(before: World, w: World): { kind: string; message: string }[] {
    const { config } = this;
    const broken: { kind: string; message: string }[] = [];
    const live = liveHolds(config, w);
    const writers = [...new Set(live.filter((h) => h.mode === 'write').map((h) => h.owner))];
    if (writers.length > 1) broken.push({ kind: 'one writer', message: `${writers.join(' and ')} both hold write` });
    const readers = [...new Set(live.filter((h) => h.mode === 'read').map((h) => h.owner))];
    if (writers.length === 1 && readers.some((r) => r !== writers[0])) {
      broken.push({
        kind: 'no reader beside a writer',
        message: `${readers.filter((r) => r !== writers[0]).join(', ')} read while ${writers[0]} writes`,
      });
    }
    // An owner that believes it holds is a holder on the server.
    for (let i = 0; i < config.owners.length; i++) {
      const o = w.owners[i]!;
      if (o.crashed) continue;
      const token = TOKEN(config, i);
      for (const h of o.holds) {
        if (h.until <= w.now) continue;
        if (!live.some((s) => s.owner === token && s.mode === h.mode && s.ids.includes(h.id))) {
          broken.push({
            kind: 'belief',
            message: `${token} believes it holds ${h.mode} ${h.id} until ${at(h.until)}, but the server does not have it`,
          });
        }
      }
    }
    // A released or expired hold never comes back.
    const liveIds = new Set(live.flatMap((h) => h.ids.map((id) => `${h.owner}/${id}`)));
    for (const d of before.dead)
      if (liveIds.has(d)) broken.push({ kind: 'hold came back', message: `${d} holds again after it was released or ran out` });
    const dead = new Set(before.dead);
    for (let i = 0; i < config.owners.length; i++) {
      const token = TOKEN(config, i);
      for (const h of [...before.owners[i]!.holds, ...w.owners[i]!.holds]) {
        if (!liveIds.has(`${token}/${h.id}`)) dead.add(`${token}/${h.id}`);
      }
    }
    w.dead = [...dead].sort();
    // Fences rise strictly with each new holder, and a holding keeps its fence.
    const was = liveHolds(config, before);
    let max = before.maxFence;
    for (const h of live) {
      const old = was.find((x) => x.owner === h.owner && x.mode === h.mode && x.state === h.state);
      if (old) {
        if (old.fence !== h.fence) broken.push({ kind: 'fence', message: `${h.owner}'s ${h.mode} holding changed its fence` });
      } else if (!(h.fence > before.maxFence)) {
        broken.push({
          kind: 'fence',
          message: `${h.owner}'s new ${h.mode} holding got ${fenceText(h.fence)}, not above ${fenceText(before.maxFence)}`,
        });
      }
      max = Math.max(max, h.fence);
    }
    w.maxFence = max;
    return broken;
  }

  /** Whether waiter `i`'s try would be granted now (it sleeps: no step of the graph). */
  async grantable(w: World, i: number): Promise<boolean> {
    const wait = w.owners[i]!.wait!;
    const ran = await this.executor.run(w, [scriptCall(this.config, i, { kind: 'acquire', mode: wait.mode, id: wait.id, wait: true })]);
    const reply = ran.replies[0];
    return !(reply instanceof Error) && acquireOutcome(reply).granted;
  }
}

interface Node {
  world: World;
  parent: number;
  label: string;
  text: string;
  depth: number;
  /** Sleeping waiters whose try would be granted, once expanded. */
  grantable?: Set<number>;
  /** Awake waiters whose try is granted, once expanded. */
  awakeGranted?: boolean;
  /** Steps into this state by a call (for the wake-up check): parent, caller. */
  incoming: { from: number; caller: number; label: string; text: string; stalled: boolean }[];
  /** Successors by steps that continue once holders stop. */
  continues: number[];
}

export interface CheckOptions {
  /** Connections to use side by side, each on its own database. */
  readonly redis: readonly Redis[];
  /** The scripts, of the model's build (virtual-clock.ts). */
  readonly scripts: Readonly<Record<string, string>>;
  readonly maxStates?: number;
}

/** Explores `config` breadth first; stops at the first violation. */
export async function check(config: Config, options: CheckOptions): Promise<CheckResult> {
  const started = performance.now();
  const checkers = options.redis.map((r) => new Checker(config, r, options.scripts));
  await Promise.all(checkers.map((c) => c.load()));
  const maxStates = options.maxStates ?? 200_000;
  const nodes: Node[] = [];
  const index = new Map<string, number>();
  const first = initialWorld(config);
  nodes.push({ world: first, parent: -1, label: '', text: '', depth: 0, incoming: [], continues: [] });
  index.set(canonical(config, first), 0);
  let transitions = 0;
  let depth = 0;
  let violation: Violation | undefined;
  let bounded = false;
  const pathTo = (n: number, extra: { label: string; text: string }[] = []) => {
    const labels: string[] = [];
    const texts: string[] = [];
    for (let at = n; at > 0; at = nodes[at]!.parent) {
      labels.unshift(nodes[at]!.label);
      texts.unshift(nodes[at]!.text);
    }
    return { path: [...labels, ...extra.map((e) => e.label)], trace: [...texts, ...extra.map((e) => e.text)] };
  };
  const fail = (kind: string, message: string, at: number, extra: { label: string; text: string }[] = []) => {
    violation ??= { kind, message, ...pathTo(at, extra) };
  };
  // A call that left a sleeping waiter able to get in, where no awake waiter gets in: a missed wake-up.
  const wakeCheck = (to: number, e: Node['incoming'][number]) => {
    const target = nodes[to]!;
    const from = nodes[e.from]!;
    if (!target.grantable || !from.grantable || target.awakeGranted || e.stalled) return;
    for (const j of target.grantable) {
      // (A waiter whose timer ends within the next ms is not left waiting: the two-key layout's keys refuse in their last ms.)
      if (j === e.caller || !sleeping(from.world, j) || from.grantable.has(j)) continue;
      if (target.world.owners[j]!.wait!.retryAt <= target.world.now + 1 || target.world.owners[j]!.wait!.paused) continue;
      const name = TOKEN(config, j);
      fail(
        'missed wake-up',
        `${name} could get the lock now, but sleeps until ${at(target.world.owners[j]!.wait!.retryAt)}: no message woke it`,
        e.from,
        [{ label: e.label, text: e.text }],
      );
    }
  };
  let frontier = [0];
  while (frontier.length > 0 && !violation) {
    const next: number[] = [];
    let cursor = 0;
    const work = async (checker: Checker) => {
      while (cursor < frontier.length && !violation) {
        const id = frontier[cursor++]!;
        const node = nodes[id]!;
        const w = node.world;
        const steps = await checker.steps(w);
        transitions += steps.length;
        const grantable = new Set<number>();
        for (let j = 0; j < config.owners.length; j++) if (sleeping(w, j) && (await checker.grantable(w, j))) grantable.add(j);
        node.grantable = grantable;
        node.awakeGranted = steps.some(
          (s) =>
            s.caller !== undefined &&
            s.continues &&
            w.owners[s.caller]!.wait !== undefined &&
            s.world.owners[s.caller]!.wait === undefined &&
            s.world.owners[s.caller]!.holds.length > w.owners[s.caller]!.holds.length,
        );
        for (const e of node.incoming) wakeCheck(id, e);
        for (const s of steps) {
          if (s.broken.length > 0) {
            fail(s.broken[0]!.kind, s.broken[0]!.message, id, [{ label: s.label, text: s.text }]);
            break;
          }
          const key = canonical(config, s.world);
          let to = index.get(key);
          if (to === undefined) {
            if (nodes.length >= maxStates) {
              bounded = true;
              continue;
            }
            to = nodes.length;
            nodes.push({ world: s.world, parent: id, label: s.label, text: s.text, depth: node.depth + 1, incoming: [], continues: [] });
            index.set(key, to);
            next.push(to);
            depth = Math.max(depth, node.depth + 1);
          }
          if (s.continues) node.continues.push(to);
          if (s.caller !== undefined) {
            const e = { from: id, caller: s.caller, label: s.label, text: s.text, stalled: s.stalled ?? false };
            nodes[to]!.incoming.push(e);
            wakeCheck(to, e);
          }
        }
      }
    };
    await Promise.all(checkers.map(work));
    frontier = next;
  }
  if (!violation && !bounded) {
    // Liveness: once holders stop, from every state every waiter gets the lock or its place goes (it waits no more).
    const done = nodes.map((n) => !n.world.owners.some((_, i) => waiting(n.world, i)));
    const reverse: number[][] = nodes.map(() => []);
    nodes.forEach((n, i) => {
      for (const to of n.continues) reverse[to]!.push(i);
    });
    const queue = done.flatMap((d, i) => (d ? [i] : []));
    const reaches = [...done];
    while (queue.length > 0) {
      const n = queue.pop()!;
      for (const from of reverse[n]!) {
        if (!reaches[from]) {
          reaches[from] = true;
          queue.push(from);
        }
      }
    }
    let worst = -1;
    reaches.forEach((r, i) => {
      if (!r && (worst < 0 || nodes[i]!.depth < nodes[worst]!.depth)) worst = i;
    });
    if (worst >= 0) {
      const stuck = nodes[worst]!.world.owners.flatMap((_, i) => (waiting(nodes[worst]!.world, i) ? [TOKEN(config, i)] : []));
      fail('liveness', `once holders stop, ${stuck.join(' and ')} never get the lock nor stop waiting`, worst);
    }
  }
  return {
    config: config.name,
    states: nodes.length,
    transitions,
    depth,
    seconds: (performance.now() - started) / 1000,
    bounded,
    ...(bounded ? { deepest: pathTo(nodes.length - 1).trace } : {}),
    ...(violation === undefined ? {} : { violation }),
  };
}

/** Runs the steps `path` (labels, as a violation gives them) from the first state; returns the trace and what broke on the way. */
export async function replay(
  config: Config,
  redis: Redis,
  scripts: Readonly<Record<string, string>>,
  path: readonly string[],
): Promise<{ trace: string[]; broken: { kind: string; message: string }[] }> {
  const checker = new Checker(config, redis, scripts);
  await checker.load();
  let w = initialWorld(config);
  const trace: string[] = [];
  for (const label of path) {
    const steps = await checker.steps(w);
    const s = steps.find((x) => x.label === label);
    if (!s) throw new Error(`no step ${label} from the state after ${trace.join('; ')}`);
    trace.push(s.text);
    if (s.broken.length > 0) return { trace, broken: s.broken };
    w = s.world;
  }
  // A missed wake-up shows in the last state: a sleeper that would be granted.
  const broken: { kind: string; message: string }[] = [];
  for (let j = 0; j < config.owners.length; j++) {
    if (sleeping(w, j) && (await checker.grantable(w, j)))
      broken.push({ kind: 'missed wake-up', message: `${TOKEN(config, j)} sleeps, yet would get the lock` });
  }
  return { trace, broken };
}

/** `usNow`, for tests that read the model clock. */
export { usNow };
