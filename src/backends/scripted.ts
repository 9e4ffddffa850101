import type { Driver } from '../clients/driver.js';
import type { LockMode } from '../errors.js';
import type { LockKeys } from '../keys/keys.js';
import {
  type AcquireOutcome,
  type AcquireRequest,
  type CallBound,
  type ExtendRequest,
  type HandedGrant,
  handedGrant,
  handedMs,
  handedNodes,
  type LockBackend,
  type LockInfo,
  type Requeue,
} from './backend.js';
import { CallSizer } from './call-sizer.js';
import { evictionChecked, evictionRefusal, evictionRiskOf } from './eviction.js';
import { type ExtendRound, extendByGroup, extendInChunks, extendSizer, roundThrough } from './extend-groups.js';
import type { Layout } from './layouts.js';
import { acknowledged } from './replica-ack.js';
import { layoutRefusal, parseAcquireReply } from './replies.js';
import { type AcquireReply, type HashKeys, holderArg, refusedForEviction, runScript, type ScriptReply } from './scripts.js';

/**
 * Server time one inspect call reads for at most, in µs, and one step of 32
 * entries more (lua/includes/inspect-page.lua): it replies with a cursor,
 * and the next call reads on from there. A lock of up to about a hundred
 * holders and waiters is read in one call, atomically. (Read whole, a lock
 * of 10,000 readers took one call of 17-26 ms, while Redis served no other
 * client; in pages, ~310 calls of ~170 µs.) Where the script's clock stands
 * still, the steps a call may read keep it to the budget ({@link CallSizer}).
 */
export const INSPECT_BUDGET_US = 100;
/** Full steps (32 entries, 30-100 µs each) an inspect call reads at most; the first call to a node reads at most 2. */
const INSPECT_MAX_STEPS = 64;
const INSPECT_FIRST_STEPS = 2;

/**
 * Runs a storage layout ({@link Layout}: the hash layout, or legacy/bridge)
 * on one server or one Cluster: one script call per operation (and a `WAIT`
 * after a grant whose request asks for replica acknowledgement), and renewal
 * in as few calls as the layout's grouping allows.
 */
export class ScriptedBackend<K extends LockKeys> implements LockBackend<K> {
  /** The sizers of each node's renewal and inspect calls, by node ('' on one server). */
  readonly #sizers = new Map<string, { extend: CallSizer; inspect: CallSizer }>();
  /** Set once one server refused a renewal call's keys of several slots: its renewal calls carry one slot each from then on. */
  #oneSlotPerCall = false;

  /** `refusesEviction`: acquires are refused where a master may evict lock keys (`onEvictionRisk: 'refuse'`). */
  constructor(
    private readonly client: Driver,
    private readonly layout: Layout<K>,
    private readonly refusesEviction = false,
  ) {}

  keysFor(resource: string): K {
    return this.layout.keysFor(resource);
  }

  get handsOver(): boolean {
    return this.layout.handsOver;
  }

  /** An abandon waits on its connection for as long as the driver keeps it; its callers bound the wait. */
  readonly abandonEndsByItself = false;

  // Each operation's scripts refuse a lock of another layout version with an error reply, which
  // becomes a LayoutVersionError here (a try/catch: nothing more on the path that succeeds).
  async acquire(r: AcquireRequest<K>): Promise<AcquireOutcome> {
    const { scripts, names } = this.layout;
    const { keys } = r;
    if (this.refusesEviction) {
      const judging = refusedForEviction(this.client, { resource: r.resource, mode: r.mode, owner: r.owner });
      if (judging) await judging;
    }
    let reply: AcquireReply;
    try {
      reply = await (r.mode === 'read'
        ? runScript(
            this.client,
            scripts.acquireRead,
            names(keys),
            [r.leaseMs, holderArg('read', r.holdId, r.owner), r.honourIntent ? '1' : '0'],
            keys,
          )
        : runScript(
            this.client,
            scripts.acquireWrite,
            names(keys),
            r.queuePlaceUs === undefined
              ? [r.leaseMs, holderArg('write', r.holdId, r.owner), r.waitBeatMs, r.fair ? '1h' : '0h']
              : [r.leaseMs, holderArg('write', r.holdId, r.owner), r.waitBeatMs, r.fair ? '1h' : '0h', r.queuePlaceUs],
            keys,
          ));
    } catch (error) {
      throw layoutRefusal(error, keys, r.resource);
    }
    const outcome = parseAcquireReply(reply, r.leaseMs);
    return r.replicaAck === undefined ? outcome : acknowledged(this, this.client, r, r.replicaAck, outcome);
  }

  async release(keys: K, mode: LockMode, owner: string, holdId: string, requeue?: Requeue): Promise<boolean> {
    const { scripts, names, peerChannels } = this.layout;
    const holder = holderArg(mode, holdId, owner);
    const args = requeue
      ? ([holder, requeue.placeUs, requeue.beatMs, requeue.leaseMs] as const)
      : ([holder, ...peerChannels(keys)] as const);
    try {
      return (await runScript(this.client, scripts.release, names(keys), args, keys)) >= 0;
    } catch (error) {
      throw layoutRefusal(error, keys);
    }
  }

  /** The sizers of the calls to the node that serves `keys` (its slot's master). */
  #sizersFor(keys: K): { extend: CallSizer; inspect: CallSizer } {
    const node = this.client.cluster ? (this.client.masterOf(keys.slot) ?? `slot:${keys.slot}`) : '';
    let sizers = this.#sizers.get(node);
    if (!sizers) {
      sizers = { extend: extendSizer(), inspect: new CallSizer(INSPECT_BUDGET_US, INSPECT_FIRST_STEPS, INSPECT_MAX_STEPS) };
      this.#sizers.set(node, sizers);
    }
    return sizers;
  }

  /**
   * Renews in as few calls as the server takes. On one server, every lease
   * in one group of calls, each as large as the budget allows, each
   * declaring every key it touches (lua/extend.lua). A Redis Cluster refuses
   * declared keys of several slots, so there each node's leases go together
   * through lua/extend-across-slots.lua, which touches keys it does not
   * declare; a server that refuses that, or keys of several slots in one
   * script (ElastiCache Serverless, Dragonfly, a proxy that routes scripts
   * by their keys), has the leases the refused calls left unrenewed sent
   * again at once, one slot per call with every key declared, and so does
   * every later round of this backend. One server may be a proxy in front
   * of several that runs each script where its first key lives, and refuses
   * nothing: a lease a call found gone is asked again in a call its own
   * lock leads before it counts as lost, and found held there, this
   * backend's rounds go one slot per call too.
   */
  async extend(requests: readonly ExtendRequest<K>[], round?: ExtendRound): Promise<number[]> {
    /** On one server, the leases found gone by a call another lock led: asked again before they count. */
    const unsure: number[] = [];
    const via = this.client.cluster ? round : leadingLockOnly(round, requests, this.layout.names, unsure);
    const extendGroup =
      (acrossSlots: boolean, through = via, decides?: (error: unknown) => boolean) =>
      (indexes: number[], results: number[]) =>
        extendInChunks(
          requests,
          indexes,
          results,
          this.layout.names,
          (keys, args, lock) =>
            acrossSlots
              ? runScript(this.client, this.layout.extendAcrossSlots!, keys as unknown as HashKeys, args, lock)
              : runScript(this.client, this.layout.scripts.extend, keys, args, lock),
          through,
          this.#sizersFor(requests[indexes[0]!]!.keys).extend,
          acrossSlots,
          decides,
        );
    const declared = extendGroup(false);
    const all = requests.map((_, i) => i);
    const bySlot = (indexes: Iterable<number>) => extendByGroup(requests.length, groupBySlot(requests, indexes), declared);
    /**
     * Runs the group (across slots or declared) on `indexes`; when one of its calls was refused, renews what it
     * left by slot (and remembers a refusal of several slots), whichever of its calls failed first.
     */
    const orBySlot = (acrossSlots: boolean, refusals: RegExp) => {
      const severalSlots = (error: unknown) => refusesSeveralSlots(error) || refusesAcrossSlotsFlag(error);
      const bySlotAfter = (error: unknown) => severalSlots(error) || refusals.test(String(error));
      const group = extendGroup(acrossSlots, via, bySlotAfter);
      return async (indexes: number[], results: number[]): Promise<void> => {
        try {
          await group(indexes, results);
        } catch (error) {
          if (!bySlotAfter(error)) throw error;
          if (severalSlots(error)) this.#oneSlotPerCall = true;
          const left = indexes.filter((i) => Number.isNaN(results[i]));
          const renewed = await bySlot(left);
          for (const i of left) results[i] = renewed[i]!;
        }
      };
    };
    if (!this.client.cluster) {
      const results = await (this.#oneSlotPerCall ? bySlot(all) : extendByGroup(requests.length, [all], orBySlot(false, NEVER)));
      if (unsure.length === 0) return results;
      // Each in calls of its own lock, which route where that lock lives; not known (NaN) if they fail.
      const again = await extendByGroup(requests.length, groupByLock(requests, unsure, this.layout.names), extendGroup(false, round)).catch(
        () => undefined,
      );
      for (const i of unsure) {
        results[i] = again?.[i] ?? NaN;
        if (results[i]! > 0) this.#oneSlotPerCall = true;
      }
      return results;
    }
    if (this.#oneSlotPerCall || this.layout.extendAcrossSlots === undefined) return bySlot(all);
    const byNode = new Map<string, number[]>();
    requests.forEach((r, i) => push(byNode, this.client.masterOf(r.keys.slot) ?? `slot:${r.keys.slot}`, i));
    // Also when the slot map moved under a call (a key no longer local, MOVED, ASK): one call per slot is always routable.
    return extendByGroup(requests.length, [...byNode.values()], orBySlot(true, MOVED_UNDER_US));
  }

  async abandon(keys: K, owner: string, drop = ''): Promise<void> {
    const { scripts, names, peerChannels } = this.layout;
    await runScript(this.client, scripts.abandon, names(keys), [owner, drop, ...peerChannels(keys)]).catch((error: unknown) => {
      throw layoutRefusal(error, keys);
    });
  }

  async keepPlace(r: AcquireRequest<K>): Promise<readonly (number | undefined)[]> {
    const [state, leases, queue] = this.layout.names(r.keys);
    const until = await runScript(this.client, 'keepPlace', [state, leases, queue], [r.owner, r.waitBeatMs], r.keys);
    return [until > 0 ? until : undefined];
  }

  /** Reads the lock in calls of at most {@link INSPECT_BUDGET_US} of server time each, one after the other. */
  async inspect(resource: string, keys: K, bound?: CallBound): Promise<LockInfo> {
    const { scripts, names } = this.layout;
    const sizer = this.#sizersFor(keys).inspect;
    const pages: ScriptReply<typeof scripts.inspect>[] = [];
    let cursor = '0';
    do {
      const maxSteps = sizer.size;
      const call = runScript(this.client, scripts.inspect, names(keys), [cursor, INSPECT_BUDGET_US, maxSteps]);
      const page = await (bound ? bound(call) : call).catch((error: unknown) => {
        throw layoutRefusal(error, keys, resource);
      });
      pages.push(page);
      cursor = page[1];
      const [startUs, elapsedUs, steps] = page[5];
      // Stopped by its clock: fewer steps than it could read, and more left to read.
      sizer.answered({ startUs, elapsedUs, units: steps, sent: maxSteps, stopped: cursor !== '0' && steps < maxSteps });
    } while (cursor !== '0');
    const info = this.layout.describe(resource, keys, pages);
    await evictionChecked(this.client); // the first inspect of a client: its masters' first read, begun by the server check
    const evictionRisk = evictionRiskOf(this.client, keys.slot);
    return evictionRisk ? { ...info, evictionRisk } : info;
  }

  takeHanded(
    r: AcquireRequest<K>,
    queuedUntil: readonly (number | undefined)[],
    handed: readonly (HandedGrant | undefined)[],
    elapsedMs: number,
  ): { fence: number; leaseRemainingMs: number } | undefined {
    const [node] = handedNodes(r, queuedUntil, handed);
    if (node === undefined) return undefined;
    // Queued before a master was found to evict: refused as its next try would be (the acquire then gives the hold back).
    const refusal = this.refusesEviction && evictionRefusal(this.client, { resource: r.resource, mode: r.mode, owner: r.owner });
    if (refusal) throw refusal;
    return handedGrant(r, handed[node]!.fence, handedMs(r), elapsedMs);
  }
}

/** Nothing but a refusal of several slots sends one server's leases by slot. */
const NEVER = /$^/;
/** A Cluster node's calls refused because the slot map moved under them: its leases go by slot this once. */
const MOVED_UNDER_US = /non local key|MOVED|ASK|CROSSSLOT|TRYAGAIN|Too many Cluster redirections/;

/**
 * A script refused because its keys lie in several slots (Redis Cluster, a
 * proxy or service that routes by key: `CROSSSLOT`), or because it touched
 * keys it did not declare (Dragonfly, Upstash: "undeclared").
 */
export function refusesSeveralSlots(error: unknown): boolean {
  return /CROSSSLOT|same slot|undeclared|not declared/i.test(error instanceof Error ? error.message : String(error));
}

/**
 * The across-slots renewal script refused for its `allow-cross-slot-keys`
 * flag, which the server does not know (Dragonfly as a Cluster: "Invalid
 * flag: allow-cross-slot-keys"; others: "Unexpected flag in script
 * shebang"): it never runs there, so renewal goes one slot per call.
 */
export function refusesAcrossSlotsFlag(error: unknown): boolean {
  return /flag\b.*allow-cross-slot-keys/i.test(error instanceof Error ? error.message : String(error));
}

/**
 * `round` as one server's calls report to it, but for the leases a call
 * found gone whose lock did not lead that call (its keys first): those go
 * into `unsure` instead, to be asked again. A proxy in front of several
 * servers may run a call where its first key lives, and find the other
 * locks' keys missing there.
 */
function leadingLockOnly<K extends LockKeys>(
  round: ExtendRound | undefined,
  requests: readonly ExtendRequest<K>[],
  names: (keys: K) => readonly string[],
  unsure: number[],
): ExtendRound {
  const firstKey = (i: number) => names(requests[i]!.keys)[0];
  return roundThrough(round, {
    bound: round?.bound,
    answered: (indexes, replies, sentAt) => {
      if (!replies.includes(0)) return round?.answered?.(indexes, replies, sentAt);
      const leading = firstKey(indexes[0]!);
      const sure: number[] = [];
      const sureReplies: number[] = [];
      indexes.forEach((i, k) => {
        if (replies[k] === 0 && firstKey(i) !== leading) unsure.push(i);
        else {
          sure.push(i);
          sureReplies.push(replies[k]!);
        }
      });
      if (sure.length > 0) round?.answered?.(sure, sureReplies, sentAt);
    },
  });
}

/** The request indexes among `indexes`, grouped by their lock (its first key). */
function groupByLock<K extends LockKeys>(
  requests: readonly ExtendRequest<K>[],
  indexes: Iterable<number>,
  names: (keys: K) => readonly string[],
): number[][] {
  const byLock = new Map<string, number[]>();
  for (const i of indexes) push(byLock, names(requests[i]!.keys)[0]!, i);
  return [...byLock.values()];
}

/** The request indexes among `indexes`, grouped by their lock's Cluster slot. */
function groupBySlot(requests: readonly ExtendRequest[], indexes: Iterable<number>): number[][] {
  const bySlot = new Map<number, number[]>();
  for (const i of indexes) push(bySlot, requests[i]!.keys.slot, i);
  return [...bySlot.values()];
}

function push<K>(map: Map<K, number[]>, key: K, value: number): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
