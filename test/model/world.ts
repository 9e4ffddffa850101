/**
 * The model checker's world: a configuration (owners, their programs and
 * layouts, the environment's budgets), the state of one moment (the lock's
 * keys, each owner's own view, the virtual clock), and its canonical form,
 * which identifies states that behave alike from then on.
 */

import { handedChannel, lockKeys } from '../../src/keys/keys.js';
import { type LegacyLockKeys, legacyLockKeys } from '../../src/keys/legacy.js';

export type Mode = 'read' | 'write';
export type OwnerLayout = 'hash' | 'legacy' | 'bridge';

/** One step of an owner's program. */
export type Op =
  | { op: 'read' | 'write'; wait: boolean }
  | { op: 'release'; mode: Mode }
  | { op: 'extend' }
  | { op: 'fencedGet' }
  | { op: 'fencedSet' };

export interface OwnerSpec {
  readonly name: string;
  readonly layout: OwnerLayout;
  readonly program: readonly Op[];
}

export interface Config {
  readonly name: string;
  readonly owners: readonly OwnerSpec[];
  /** How many replies may be lost on one path (the script ran; the owner resends, or abandons an acquire). */
  readonly lost: number;
  /** How many calls may be delivered twice on one path. */
  readonly duplicated: number;
  /** How many owners may stop for good on one path (no release, no renewal, no abandon). */
  readonly crashes: number;
  /**
   * How often on one path a waiter due to try (woken, or its sleep over) may
   * pause instead, until its queue heartbeat lapsed (a stalled process).
   * Otherwise waiters are timely: they try before the clock moves on.
   */
  readonly pauses: number;
  /** A waiting owner may give up (its wait timed out) and abandon, at any moment. */
  readonly giveUp: boolean;
  /** Fair queueing (only the longest-waiting writer takes a free lock). */
  readonly fair: boolean;
  /** Hash-mode writers accept a lock a release hands them (false: as in redlock mode, where releases set when the lock was freed, for the pass-over rules). */
  readonly handOver?: boolean;
  /** Renewal through lua/extend-across-slots.lua (a Cluster node's call) rather than lua/extend.lua (hash mode). */
  readonly acrossSlots?: boolean;
  /** The lock's fence `f` already this far (us) ahead of the clock: a clock stepped back, or a failover to a slower replica. */
  readonly fenceAheadUs?: number;
}

/** Lease, queue heartbeat and re-check of the owners (ms). The heartbeat is the library's: 2 re-checks + 100. */
export const LEASE_MS = 3000;
export const RECHECK_MS = 1500;
export const BEAT_MS = 2 * RECHECK_MS + 100;
export const EXTEND_BUDGET_US = 1000;
/** The virtual clock's start (ms). */
export const START_MS = 1_000_000;

export const PREFIX = 'mc';
export const RESOURCE = 'r';

export type KeyKind = 'hash' | 'zsetMs' | 'zsetUs' | 'string' | 'stringUs';

/** The names of one owner's lock, by its layout. */
export interface OwnerKeys {
  readonly names: readonly string[];
  readonly state: string;
  readonly channel: string;
  readonly handed: string;
  /** The other layout's channel, woken by legacy and bridge releases and abandons (legacy and bridge only). */
  readonly peerChannel?: string;
  readonly legacy?: LegacyLockKeys;
}

export const GUARDED_KEY = 'mc:guarded';
export const GUARDED_FENCE_KEY = 'mc:guarded:fence';

export function ownerKeys(owner: string, layout: OwnerLayout): OwnerKeys {
  if (layout === 'hash') {
    const k = lockKeys(PREFIX, RESOURCE);
    return { names: [k.state, k.leases, k.queue], state: k.state, channel: k.channel, handed: handedChannel(k.channel, owner) };
  }
  const k = legacyLockKeys(PREFIX, RESOURCE, { read: 'old:read', write: 'old:write' }, layout, false);
  return {
    names: [k.state, k.leases, k.queue, k.read, k.write, k.readers],
    state: k.state,
    channel: k.channel,
    handed: handedChannel(k.channel, owner),
    peerChannel: k.peerChannel,
    legacy: k,
  };
}

/** Every key of the world and its kind. */
export function worldKeys(config: Config): Map<string, KeyKind> {
  const kinds = new Map<string, KeyKind>([
    [GUARDED_KEY, 'string'],
    [GUARDED_FENCE_KEY, 'stringUs'],
  ]);
  for (const o of config.owners) {
    const names = ownerKeys(o.name, o.layout).names;
    const roles: KeyKind[] = ['hash', 'zsetMs', 'zsetUs', 'string', 'string', 'zsetMs'];
    names.forEach((name, i) => kinds.set(name, roles[i]!));
  }
  return kinds;
}

/** One key's value and deadline (virtual ms; null: none). */
export type KeyValue =
  | { t: 'hash'; v: [string, string][]; at: number | null }
  | { t: 'zset'; v: [string, number][]; at: number | null }
  | { t: 'string'; v: string; at: number | null };

export type Keys = Record<string, KeyValue>;

export type Call =
  | { kind: 'acquire'; mode: Mode; id: string; wait: boolean }
  | { kind: 'release'; mode: Mode; id: string }
  | { kind: 'extend' }
  | { kind: 'abandon'; id: string }
  | { kind: 'fencedGet'; fence: number; id: string }
  | { kind: 'fencedSet'; fence: number; id: string };

export interface Hold {
  mode: Mode;
  id: string;
  fence: number;
  /** Until when (virtual ms) the owner believes it holds. */
  until: number;
}

export interface Wait {
  mode: Mode;
  id: string;
  /** When its sleep ends without a wake-up: min(retryAfter + 1, recheck) after its try. */
  retryAt: number;
  woken: boolean;
  /** Its queue heartbeat deadline, when its try queued it (a writer that is not a holder). */
  queuedUntil?: number;
  /** Its place in the queue (server us), from its first queued try. */
  place?: number;
  /** How long a hold a release hands it lasts at least: min(heartbeat, its try + lease). */
  handedUntil?: number;
  /** Stalled: it sleeps through any message until `retryAt`. */
  paused?: boolean;
}

export interface OwnerState {
  pc: number;
  holds: Hold[];
  wait?: Wait;
  /** A call whose reply was lost: the owner sends it again (or abandons, for an acquire). */
  pending?: Call;
  /** A call the owner must make next (an acquire refused for an upgrade conflict gives up). */
  followUp?: Call;
  crashed?: boolean;
}

export interface World {
  now: number;
  /** Script runs since `now` was reached. */
  tick: number;
  keys: Keys;
  owners: OwnerState[];
  lost: number;
  duplicated: number;
  crashes: number;
  pauses: number;
  /** The largest fence handed out so far (server us), 0 before any. */
  maxFence: number;
  /** The largest fence a fenced read or write of the guarded key used (0: none). */
  fencedMax: number;
  /** Hold ids an owner knew it held, released or run out since: none may come back. */
  dead: string[];
}

/** The microseconds of the last script run: every stored server-us value is at most this. */
export function usNow(w: World): number {
  return w.now * 1000 + w.tick;
}

// Fields of the state hash by the unit of their value.
const MS_FIELDS = /^(q:.*|ud|qx)$/;
const US_FIELDS = /^(f|fa)$/;
const HOLD_LIST = /^(wc|r:.*)$/;

/**
 * The canonical form of a state: every time in ms relative to now (and any
 * time already past as one value: none of the scripts tells two past
 * deadlines apart), and every server-us value (fences, queue places) by its
 * rank among them, or relative to the last script run's us when ahead of it
 * (a fence ahead of the clock). Two states with one canonical form behave
 * alike from then on.
 */
export function canonical(config: Config, w: World): string {
  const kinds = worldKeys(config);
  const us = new Set<number>();
  const T = usNow(w);
  const noteUs = (v: number) => us.add(v);
  // First pass: collect the us values.
  for (const [name, kv] of Object.entries(w.keys)) {
    const kind = kinds.get(name);
    if (kv.t === 'hash') {
      for (const [f, v] of kv.v) {
        if (US_FIELDS.test(f)) noteUs(Number(v));
        else if (HOLD_LIST.test(f)) noteUs(Number(v.split(' ')[0]));
      }
    } else if (kv.t === 'zset' && kind === 'zsetUs') {
      for (const [, s] of kv.v) noteUs(s);
    } else if (kv.t === 'string' && kind === 'stringUs') noteUs(Number(kv.v));
  }
  for (const o of w.owners) {
    for (const h of o.holds) noteUs(h.fence);
    if (o.wait?.place !== undefined) noteUs(o.wait.place);
    for (const c of [o.pending, o.followUp]) if (c && 'fence' in c) noteUs(c.fence);
  }
  noteUs(w.maxFence);
  noteUs(w.fencedMax);
  const ranks = new Map(
    [...us]
      .filter((v) => v <= T)
      .sort((a, b) => a - b)
      .map((v, i) => [v, i] as const),
  );
  const U = (v: number) => (v > T ? `+${v - T}` : `u${ranks.get(v)}`);
  const M = (v: number | null | undefined) => (v === null || v === undefined ? null : v < w.now ? 'p' : v - w.now);
  const keys = Object.keys(w.keys)
    .sort()
    .map((name) => {
      const kv = w.keys[name]!;
      const kind = kinds.get(name);
      let v: unknown;
      if (kv.t === 'hash') {
        v = kv.v.map(([f, x]) => {
          if (MS_FIELDS.test(f)) return [f, M(Number(x))];
          if (US_FIELDS.test(f)) return [f, U(Number(x))];
          if (HOLD_LIST.test(f)) {
            const [fence, ...ids] = x.split(' ');
            return [f, U(Number(fence)), ...ids];
          }
          return [f, x];
        });
      } else if (kv.t === 'zset') {
        v = kv.v.map(([m, s]) => [m, kind === 'zsetUs' ? U(s) : M(s)]);
      } else v = kind === 'stringUs' ? U(Number(kv.v)) : kv.v;
      return [name, v, M(kv.at)];
    });
  const call = (c: Call | undefined) => (c === undefined ? null : 'fence' in c ? { ...c, fence: U(c.fence) } : c);
  const owners = w.owners.map((o) => [
    o.pc,
    o.crashed ?? false,
    o.holds.map((h) => [h.mode, h.id, U(h.fence), M(h.until)]),
    o.wait && [
      o.wait.mode,
      o.wait.id,
      M(o.wait.retryAt),
      o.wait.woken,
      M(o.wait.queuedUntil),
      o.wait.place === undefined ? null : U(o.wait.place),
      M(o.wait.handedUntil),
      o.wait.paused ?? false,
    ],
    call(o.pending),
    call(o.followUp),
  ]);
  return JSON.stringify([keys, owners, w.lost, w.duplicated, w.crashes, w.pauses, U(w.maxFence), U(w.fencedMax), w.dead]);
}

/** The next moment at which anything in the state changes by the clock alone, or undefined. */
export function nextDeadline(config: Config, w: World): number | undefined {
  const kinds = worldKeys(config);
  let next: number | undefined;
  const note = (v: number | undefined) => {
    if (v !== undefined && v > w.now && (next === undefined || v < next)) next = v;
  };
  for (const [name, kv] of Object.entries(w.keys)) {
    if (kv.at !== null) {
      note(kv.at);
      note(kv.at + 1);
    }
    if (kv.t === 'hash') for (const [f, v] of kv.v) if (MS_FIELDS.test(f)) note(Number(v));
    if (kv.t === 'zset' && kinds.get(name) === 'zsetMs') for (const [, s] of kv.v) note(s);
  }
  for (const o of w.owners) {
    if (o.crashed) continue;
    for (const h of o.holds) note(h.until);
    if (o.wait) {
      note(o.wait.retryAt);
      note(o.wait.queuedUntil);
      note(o.wait.handedUntil);
    }
  }
  return next;
}

/** The state when the clock moves to `to`: keys whose deadline passed are gone. */
export function advanceClock(w: World, to: number): World {
  const keys: Keys = {};
  for (const [name, kv] of Object.entries(w.keys)) if (kv.at === null || kv.at >= to) keys[name] = kv;
  return { ...w, now: to, tick: 0, keys };
}

/** A holder as the server's keys show it: one owner's holds of one mode on one state hash. */
export interface ServerHold {
  owner: string;
  mode: Mode;
  ids: string[];
  fence: number;
  deadline: number;
  state: string;
}

/** Every holder the lock's hashes name (live or not: see `deadline`). */
export function serverHolds(config: Config, w: World): ServerHold[] {
  const seen = new Set<string>();
  const out: ServerHold[] = [];
  for (const o of config.owners) {
    const k = ownerKeys(o.name, o.layout);
    if (seen.has(k.state)) continue;
    seen.add(k.state);
    const hash = w.keys[k.state];
    if (hash?.t !== 'hash') continue;
    const fields = new Map(hash.v);
    const leases = w.keys[k.names[1]!];
    const deadlines = new Map(leases?.t === 'zset' ? leases.v : []);
    const sole = /^([wr]) (\S+) (.*)$/.exec(fields.get('o') ?? '');
    if (sole) {
      out.push({
        owner: sole[3]!,
        mode: sole[1] === 'w' ? 'write' : 'read',
        ids: [sole[2]!],
        fence: Number(fields.get('f')),
        deadline: hash.at ?? Number.POSITIVE_INFINITY,
        state: k.state,
      });
    }
    for (const [f, v] of fields) {
      const [fence, ...ids] = v.split(' ');
      let owner: string | undefined;
      let mode: Mode = 'read';
      if (f === 'wc') {
        owner = fields.get('w');
        mode = 'write';
      } else if (f.startsWith('r:')) owner = f.slice(2);
      if (owner === undefined) continue;
      out.push({ owner, mode, ids, fence: Number(fence), deadline: deadlines.get(owner) ?? Number.NEGATIVE_INFINITY, state: k.state });
    }
  }
  return out;
}

export function liveHolds(config: Config, w: World): ServerHold[] {
  return serverHolds(config, w).filter((h) => h.deadline > w.now);
}

/** The first state: nothing held, or a lock whose fence is ahead of the clock (held by an owner outside the model). */
export function initialWorld(config: Config): World {
  const keys: Keys = {};
  const T = START_MS * 1000;
  if (config.fenceAheadUs !== undefined) {
    const k = ownerKeys(config.owners[0]!.name, config.owners[0]!.layout);
    const at = START_MS + LEASE_MS;
    keys[k.state] = {
      t: 'hash',
      v: [
        ['f', String(T + config.fenceAheadUs)],
        ['r:Z', `${T + config.fenceAheadUs} Z.0`],
        ['v', '2'],
      ],
      at,
    };
    keys[k.names[1]!] = { t: 'zset', v: [['Z', at]], at };
  }
  return {
    now: START_MS,
    tick: 0,
    keys,
    owners: config.owners.map(() => ({ pc: 0, holds: [] })),
    lost: config.lost,
    duplicated: config.duplicated,
    crashes: config.crashes,
    pauses: config.pauses,
    maxFence: config.fenceAheadUs === undefined ? 0 : T + config.fenceAheadUs,
    fencedMax: 0,
    dead: [],
  };
}

/**
 * What a state means, apart from how the keys keep it: the live holders, the
 * live waiters, the fences, the two-key layout. A call that changes none of
 * it changed nothing (a sole holder moved from the hash into the leases set
 * is the same holder).
 */
export function summary(config: Config, w: World): string {
  const holds = liveHolds(config, w)
    .map((h) => [h.state, h.owner, h.mode, h.ids, h.fence, h.deadline])
    .sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
  const waiting: unknown[] = [];
  const queues = new Map(config.owners.map((o) => ownerKeys(o.name, o.layout)).map((k) => [k.state, k.names[2]!]));
  for (const [name, queueName] of queues) {
    const kv = w.keys[name];
    if (kv?.t !== 'hash') continue;
    const fields = new Map(kv.v);
    const queue = w.keys[queueName];
    for (const [m, place] of queue?.t === 'zset' ? queue.v : []) {
      const beat = Number(fields.get(`q:${m}`) ?? 0);
      if (beat > w.now) waiting.push([name, m, place, beat, fields.get(`g:${m}`) ?? null]);
    }
    const u = fields.get('u');
    if (u !== undefined && Number(fields.get('ud') ?? 0) > w.now) waiting.push([name, 'u', u, Number(fields.get('ud'))]);
    waiting.push([name, 'f', fields.get('f') ?? null]);
  }
  const strings = Object.entries(w.keys)
    .filter(([, kv]) => kv.t === 'string')
    .map(([name, kv]) => [name, kv.v, kv.at]);
  const readers = Object.entries(w.keys)
    .filter(([name, kv]) => kv.t === 'zset' && name.includes('readers'))
    .map(([name, kv]) => [name, (kv.v as [string, number][]).filter(([, s]) => s > w.now)]);
  return JSON.stringify([holds, waiting, strings, readers]);
}
