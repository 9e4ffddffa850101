import type { EvictionRisk, LockMode } from '../errors.js';
import type { LockKeys } from '../keys/keys.js';
import type { ResolvedReplicaAck } from '../options.js';
import type { ExtendRound } from './extend-groups.js';

/** Why an acquire was refused. */
export type BlockReason = 'write' | 'read' | 'intent' | 'queue' | 'upgrade';

export type AcquireOutcome =
  | {
      readonly granted: true;
      readonly fence: number;
      readonly leaseRemainingMs: number;
      /** Replicas that acknowledged the grant, when the request asked for `replicaAck`. */
      readonly replicasAcked?: number;
    }
  | {
      readonly granted: false;
      readonly retryAfterMs: number;
      readonly reason: BlockReason;
      /**
       * A writer that queued: its place's heartbeat deadline (server ms), by node
       * (one entry on a single server or Cluster; in `redlock` mode undefined
       * where it did not queue). A release that hands it the lock names this
       * deadline (see {@link HandedGrant}).
       */
      readonly queuedUntil?: readonly (number | undefined)[];
      /** Where it queued: its place in each node's queue (server us), as `queuedUntil`. */
      readonly queuedAtUs?: readonly (number | undefined)[];
    };

/**
 * A release that freed the lock handed it to the longest-waiting writer
 * (lua/includes/release-body.lua, handOver): the writer holds it under the
 * hold id it queued with, until its queue heartbeat deadline, and learns of it
 * from the wake-up message rather than from another try.
 */
export interface HandedGrant {
  readonly holdId: string;
  /** The heartbeat deadline the writer's latest queued try set (server ms): the handed lease ends then. */
  readonly queuedUntil: number;
  readonly fence: number;
}

/** A waiting writer's queue entry, kept by a release that gives back its grant (redlock mode). */
export interface Requeue {
  /** Its place in every node's queue (server µs). */
  readonly placeUs: number;
  /** How long its place lasts without another try (its `waitBeatMs`). */
  readonly beatMs: number;
  /** The lease a hand-over gives it. */
  readonly leaseMs: number;
}

export interface AcquireRequest<K extends LockKeys = LockKeys> {
  /** The resource name, for errors raised below the lock. */
  readonly resource: string;
  readonly keys: K;
  readonly mode: LockMode;
  readonly owner: string;
  /**
   * Names this acquire's hold on the server: a repeated delivery of the same
   * request finds it there and changes nothing, and release and undo name it.
   */
  readonly holdId: string;
  readonly leaseMs: number;
  /** Readers: queue behind a waiting writer. */
  readonly honourIntent: boolean;
  /**
   * Writers: a refused writer that will wait re-tries within this many ms; it
   * queues until then (0: a try that does not wait, and does not queue).
   */
  readonly waitBeatMs: number;
  /** Writers: only the longest-waiting writer may take a free lock. */
  readonly fair: boolean;
  /**
   * Writers: the place (us) to queue at, the same on every node (`redlock`
   * mode: taken from the nodes' clocks at its first queued try); undefined:
   * the server's clock at the first refused try.
   */
  readonly queuePlaceUs?: number;
  /** After a grant, wait for this many replicas to acknowledge it (`WAIT`); undefined: don't. */
  readonly replicaAck?: ResolvedReplicaAck | undefined;
}

export interface ExtendRequest<K extends LockKeys = LockKeys> {
  readonly keys: K;
  readonly owner: string;
  readonly leaseMs: number;
  /**
   * The owner's holds on the lock when the request was made. In `redlock`
   * mode a lease no majority holds any more gives back these on every node,
   * never the owner's every hold: the verdict may come after the owner
   * released them and was granted the lock again.
   */
  readonly holdIds: readonly string[];
}

/** A holder or waiter as `inspect` sees it. */
export interface HolderInfo {
  /** The holder's owner token. */
  readonly owner: string;
  /** Hold count (reentrancy). */
  readonly holds: number;
  /** Lease left, in ms. */
  readonly ttlMs: number;
}

/** A waiting writer as `inspect` sees it. */
export interface WaiterInfo {
  /** The waiter's owner token. */
  readonly owner: string;
  /** How long it is known to keep waiting: it re-tries, and renews this, before then. */
  readonly ttlMs: number;
}

/** One lock's state, read atomically. */
export interface LockInfo {
  /** The resource name. */
  readonly resource: string;
  /** The Redis key of the lock's state. */
  readonly key: string;
  /** `write` while a writer holds the lock, `read` while only readers do, else `free`. */
  readonly mode: 'free' | 'read' | 'write';
  /** The writer, or null. */
  readonly writer: HolderInfo | null;
  /** The readers, each with its hold count and lease left. */
  readonly readers: readonly HolderInfo[];
  /**
   * The writer new readers queue behind: a reader waiting to upgrade, else the
   * longest-waiting writer; `ttlMs` is how long it is known to keep waiting.
   */
  readonly waitingWriter: WaiterInfo | null;
  /** Writers waiting for the lock, first come first. */
  readonly queue: readonly WaiterInfo[];
  /** The last fence handed out, or null when the lock's state is gone. */
  readonly fence: number | null;
  /** The Redis server's clock when it was read, in ms since the epoch. */
  readonly serverTimeMs: number;
  /**
   * Legacy and bridge modes: what the two-key layout shows. `mode` above also
   * counts holders seen only there (old processes, or library processes of
   * the other mode); `writer` and `readers` list this mode's own holders.
   */
  readonly legacy?: LegacyInfo;
  /**
   * `redlock` mode: each node's own view, in the order of the LockClient's
   * clients (null where a node did not answer). The fields above then show
   * the holders that hold a majority, and the highest fence of any node.
   */
  readonly nodes?: readonly (LockInfo | null)[];
  /**
   * Present when the master that serves the lock may evict its keys
   * (`maxmemory` set, `maxmemory-policy` not `noeviction`), as that master
   * last said (docs/production.md, "Eviction"). In `redlock` mode, on each
   * node's view.
   */
  readonly evictionRisk?: EvictionRisk;
}

/** One legacy key as `inspect` sees it. */
export interface LegacyKeyInfo {
  /** The key's name. */
  readonly key: string;
  /** The value: an owner token when the library set it, `1` when an old process did. */
  readonly value: string | null;
  /** Time to live in ms; null when the key does not exist or has no expiry. */
  readonly ttlMs: number | null;
}

/** The two-key layout of one lock, in legacy and bridge modes. */
export interface LegacyInfo {
  /** The read key. */
  readonly read: LegacyKeyInfo;
  /** The write key. */
  readonly write: LegacyKeyInfo;
  /** An old process (value `1`) holds the write key. */
  readonly oldWriter: boolean;
  /** Old processes are known to hold the read key for this long, in ms (0: none known). */
  readonly oldReadersTtlMs: number;
  /** Library readers of every mode on the read key (owner tokens), with their lease left. */
  readonly readers: readonly {
    /** The reader's owner token. */
    readonly owner: string;
    /** Its lease left, in ms. */
    readonly ttlMs: number;
  }[];
}

/** Bounds one call's wait for Redis: its outcome, or a rejection once the bound passes. */
export type CallBound = <T>(call: Promise<T>) => Promise<T>;

/**
 * One storage layout. The lock, waiting and renewal logic above it is the same
 * for every mode; a backend only says how one operation runs on Redis.
 */
export interface LockBackend<K extends LockKeys = LockKeys> {
  /** The Redis names of one resource's lock, checked to share one Cluster slot. */
  keysFor(resource: string): K;
  acquire(request: AcquireRequest<K>): Promise<AcquireOutcome>;
  /**
   * Releases hold `holdId`. True when it was released, now or by an earlier
   * delivery of the same release while the owner still holds that mode;
   * false when the owner holds nothing of that mode. With `requeue` (hash
   * layout, redlock mode), a waiting writer giving back a grant stays queued.
   */
  release(keys: K, mode: LockMode, owner: string, holdId: string, requeue?: Requeue): Promise<boolean>;
  /**
   * For each request, the lease left in ms after extending, 0 when it is no
   * longer held, or NaN when its node could not be asked this time (the
   * caller tries again later). Throws when no request could be asked.
   * Counts its script calls in `round`, and bounds each by its `bound`.
   */
  extend(requests: readonly ExtendRequest<K>[], round?: ExtendRound): Promise<number[]>;
  /**
   * Withdraws a waiting writer's intent and, with `drop`, one hold (the id of
   * an acquire whose outcome was unknown) or, with {@link ALL_HOLDS}, every
   * hold of the owner. With a hold id, the owner's place in the queue goes
   * only when that acquire registered it: a newer try of the same owner
   * keeps its place. Repeating it changes nothing more. An `optional` one
   * (a hold that expires by itself, given back to free it sooner) is not
   * sent once `close()`'s bound has passed; the others are, however late.
   */
  abandon(keys: K, owner: string, drop?: string, optional?: boolean): Promise<void>;
  /**
   * Keeps a waiting writer's place while the server refuses its tries for
   * lack of memory (lua/keep-place.lua): its queue heartbeat moves on, as a
   * try would have moved it. Resolves with the new heartbeat deadline by
   * node (as `queuedUntil`: a release that hands it the lock names it), or
   * undefined where it holds no live place or the node did not answer.
   */
  keepPlace(request: AcquireRequest<K>): Promise<readonly (number | undefined)[]>;
  /**
   * Reads the lock, in as many calls as its size takes (each of bounded server
   * time, lua/includes/inspect-page.lua); `bound` bounds each call's wait for Redis.
   */
  inspect(resource: string, keys: K, bound?: CallBound): Promise<LockInfo>;
  /**
   * Whether a release hands a freed lock to the longest-waiting writer, on
   * the channel of that writer's client (`handedChannel` in
   * src/keys/keys.ts), which a waiting writer then watches besides the lock's.
   */
  readonly handsOver: boolean;
  /**
   * Whether {@link abandon} settles within a bound of its own, whatever
   * Redis does (`redlock`: it waits `nodeTimeoutMs` for the nodes' answers,
   * which may be longer than `redisTimeoutMs`). A give-back then keeps its
   * place in its paced queue until it has, not only until `redisTimeoutMs`.
   */
  readonly abandonEndsByItself: boolean;
  /**
   * The grant that releases handed a waiting writer, as their wake-up messages
   * told it (`handed`, by node), when they name the hold of the writer's latest
   * queued try (`queuedUntil`, by node, as its refusal gave it) on enough
   * nodes: one, or a majority in `redlock` mode. `elapsedMs` is the time since
   * that try was sent; `leaseRemainingMs` counts from then too, and a grant
   * with less than a quarter of its handed length left is not taken (the next
   * try finds the hold instead, and runs it for the writer's lease). `'wait'`: some nodes handed it the lock, and
   * the rest may still do so. Undefined: no grant to take. Throws
   * `EvictionRiskError` for a grant `onEvictionRisk: 'refuse'` refuses (the
   * acquire then gives the handed hold back).
   */
  takeHanded(
    request: AcquireRequest<K>,
    queuedUntil: readonly (number | undefined)[],
    handed: readonly (HandedGrant | undefined)[],
    elapsedMs: number,
  ): { readonly fence: number; readonly leaseRemainingMs: number } | 'wait' | undefined;
}

/**
 * How long a hold a release hands a queued writer lasts at least, counted from
 * when that writer's queued try was sent: its queue heartbeat, or its lease if
 * shorter (lua/includes/release-body.lua, handOver).
 */
export function handedMs(request: AcquireRequest): number {
  return Math.min(request.waitBeatMs, request.leaseMs);
}

/**
 * A grant of `leaseRemainingMs` (counted from the send of the writer's queued
 * try) that releases handed over, unless less than a quarter of the handed
 * length is left after `elapsedMs`: the next try finds the hold instead.
 */
export function handedGrant(
  request: AcquireRequest,
  fence: number,
  leaseRemainingMs: number,
  elapsedMs: number,
): { fence: number; leaseRemainingMs: number } | undefined {
  return leaseRemainingMs - elapsedMs > handedMs(request) / 4 ? { fence, leaseRemainingMs } : undefined;
}

/** The nodes whose release handed `request`'s hold to the writer, under the heartbeat its latest queued try set there. */
export function handedNodes(
  request: AcquireRequest,
  queuedUntil: readonly (number | undefined)[],
  handed: readonly (HandedGrant | undefined)[],
): number[] {
  const nodes: number[] = [];
  handed.forEach((grant, i) => {
    if (grant !== undefined && grant.holdId === request.holdId && grant.queuedUntil === queuedUntil[i]) nodes.push(i);
  });
  return nodes;
}

/**
 * `abandon`'s `drop` for every hold of the owner (never a hold id). No
 * library path sends it: a call decided on what it saw earlier may land
 * after the owner was granted the lock again (see {@link ExtendRequest}).
 */
export const ALL_HOLDS = '*';
