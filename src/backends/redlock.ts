import type { Cleanups } from '../cleanups.js';
import type { Driver } from '../clients/driver.js';
import {
  ClientClosedError,
  EvictionRiskError,
  LayoutVersionError,
  type LockMode,
  type NodeOutcome,
  QuorumError,
  type RWLockErrorContext,
  ServerRefusedError,
  serverRefusal,
} from '../errors.js';
import { type LockKeys, lockKeys } from '../keys/keys.js';
import type { ResolvedRedlockOptions } from '../options.js';
import { PacedQueue, RELEASE_CALLS_IN_FLIGHT } from '../paced.js';
import {
  type AcquireOutcome,
  type AcquireRequest,
  type BlockReason,
  type CallBound,
  type ExtendRequest,
  type HandedGrant,
  type HolderInfo,
  handedGrant,
  handedMs,
  handedNodes,
  type LockBackend,
  type LockInfo,
  type WaiterInfo,
} from './backend.js';
import { type ExtendRound, reportingBound, reportingRound } from './extend-groups.js';
import { addressOf } from './redlock-nodes.js';

/** What `redlock` mode needs of each node: the hash-mode operations on one server or Cluster. */
export type NodeBackend = Pick<LockBackend, 'acquire' | 'release' | 'extend' | 'abandon' | 'keepPlace' | 'inspect'>;

/** One node's answer to one operation, as far as it came. */
type Settled<T> =
  | { readonly status: 'ok'; readonly value: T }
  | { readonly status: 'error'; readonly error: unknown }
  | { readonly status: 'pending' };

/** Every node's answer to one operation when the wait for them ended. */
interface Gathered<T> {
  readonly settled: Settled<T>[];
  /** The promises of the nodes still pending, for clean-up when they answer. */
  readonly late: (Promise<T> | undefined)[];
  /** The timeout, when it ended the wait; undefined when the nodes that answered decided. */
  readonly timedOutMs: number | undefined;
}

/** Majority of `n`. */
export function quorumOf(n: number): number {
  return Math.floor(n / 2) + 1;
}

/** The reason a refusal reports, when the nodes refused for several: the one that lasts longest first. */
const REASON_ORDER: readonly BlockReason[] = ['write', 'read', 'intent', 'queue'];

/**
 * `redlock` mode: the hash-mode layout on each of N independent servers (or
 * Clusters), with every operation judged by a majority of them.
 *
 * - acquire: the same script on every node at once; granted when a majority
 *   granted and the grant's validity (the majority's lease left, less the
 *   time taken and a clock-drift allowance) is still positive. Otherwise
 *   whatever was taken is undone on every node, also on nodes that answer
 *   late. The fence is the highest of the granting nodes' fences.
 * - extend: one batched call per node; a lease stays held while a majority
 *   renewed it (0, so "lost", once fewer do; its holds left are dropped, by id).
 * - release: held when a majority released it.
 * - Operations end as soon as a majority decided, so a dead or slow node
 *   costs `nodeTimeoutMs` only when the others cannot decide without it.
 *
 * A write majority and a read majority share at least one node, where the
 * per-node script refuses the second, so they cannot both be granted.
 */
export class RedlockBackend implements LockBackend {
  readonly quorum: number;
  /** Every node runs the hash-mode scripts. */
  readonly handsOver = true;
  /** An abandon gathers the nodes' answers for at most nodeTimeoutMs (`gather`, never re-armed there). */
  readonly abandonEndsByItself = true;
  private readonly addresses: string[];
  /**
   * Each waiting writer's place in every node's queue: the median of the
   * places the nodes gave its first queued try, each by its own clock (the
   * servers' clocks, never a client's, which a skewed host would carry to
   * the front or the back of every queue). Ordered by their own arrival, the
   * nodes' queues differ for writers that arrive together; each node then
   * hands the lock to a different writer, none holds a majority, and each
   * gives its node back and rejoins that queue at the end, which can keep
   * the heads apart for good (A-B-C, B-C-A, C-A-B stays so). From its next
   * try on, a writer queues at that one place on every node, so every node
   * hands the lock to the same writer.
   */
  private readonly places = new WeakMap<AcquireRequest, number>();
  /**
   * How many tries each acquire has sent. Its tries share its hold id, so a
   * node's late answer to one try names the hold a later try may have been
   * granted; once a later try was sent, that try's outcome on the node (its
   * grant, or its own clean-up) decides the hold, not the late answer.
   */
  private readonly tries = new WeakMap<AcquireRequest, number>();
  /**
   * The clean-up of holds renewal judged lost, or a release found held by
   * too few nodes, a few at a time (as hash mode
   * gives back leases lost together, `holdings.ts`): 10,000 lost at once
   * would otherwise start 10,000 quorum calls at once, each bounded from its
   * start while it waits in the node queues below, and queue the other
   * callers' abandons behind them all. Optional: not sent once `close()` has
   * settled (each hold expires by itself).
   */
  private readonly lostCleanUps: PacedQueue;
  /**
   * Per node, the abandons of {@link abandon} (the clean-up of holds renewal
   * judged lost, the give-backs of leases that ran out here, a release that
   * found too few holds): at most {@link RELEASE_CALLS_IN_FLIGHT} in flight
   * on a node, each counted until that node answers, whatever stream sent
   * it: 10,000 leases lost at once must not send 10,000 abandons ahead of
   * every other call on a node's connection, and a node that answers after
   * the quorum's wait ended must not be sent the next ones on top of those
   * still in flight. `close()` waits for them (bounded); an optional one
   * is not sent once it has settled, while the give-back of a grant that came
   * after its acquire ended still goes, however late.
   */
  private readonly abandonsByNode: readonly PacedQueue[];

  constructor(
    clients: readonly Driver[],
    private readonly nodes: readonly NodeBackend[],
    private readonly prefix: string,
    private readonly options: ResolvedRedlockOptions,
    cleanups: Cleanups,
  ) {
    this.quorum = quorumOf(nodes.length);
    this.lostCleanUps = new PacedQueue(RELEASE_CALLS_IN_FLIGHT, cleanups);
    this.abandonsByNode = nodes.map(() => new PacedQueue(RELEASE_CALLS_IN_FLIGHT, cleanups));
    this.addresses = clients.map(addressOf);
  }

  keysFor(resource: string): LockKeys {
    return lockKeys(this.prefix, resource);
  }

  /** The drift allowance of a lease, in ms. */
  driftOf(leaseMs: number): number {
    return Math.ceil(leaseMs * this.options.driftFactor) + this.options.driftMs;
  }

  async acquire(r: AcquireRequest): Promise<AcquireOutcome> {
    const started = performance.now();
    const n = this.nodes.length;
    const q = this.quorum;
    const place = this.places.get(r);
    const request = place === undefined ? r : { ...r, queuePlaceUs: place };
    const thisTry = (this.tries.get(r) ?? 0) + 1;
    this.tries.set(r, thisTry);
    // Done early once a majority granted; a refusal waits for every node (or the timeout), so
    // that what this attempt took is given back before the caller tries again or gives up.
    const gathered = await this.gather(
      (node) => node.acquire(request),
      Math.min(this.options.nodeTimeoutMs, r.leaseMs),
      (s) => s.filter((x) => x.status === 'ok' && x.value.granted).length >= q,
    );
    const { settled, late } = gathered;
    const grants = settled.flatMap((s) => (s.status === 'ok' && s.value.granted ? [s.value] : []));
    const refusals = settled.flatMap((s) => (s.status === 'ok' && !s.value.granted ? [s.value] : []));
    const queues = r.mode === 'write' && r.waitBeatMs > 0;

    if (grants.length >= q) {
      // The lock is held until fewer than a majority hold it: the q-th longest lease left.
      const remaining = grants.map((g) => g.leaseRemainingMs).sort((a, b) => b - a)[q - 1]!;
      // The drift of the hold this grant confirms: a handed hold lasts far less than the lease.
      const drift = this.driftOf(remaining);
      const validity = remaining - (performance.now() - started) - drift;
      if (validity > 0) {
        // A refused node may have queued this writer; it got the lock, so it waits no more there.
        // Named by its hold id: the place of a newer acquire of the same owner stays, and a hold a
        // release there handed it meanwhile goes (a majority holds the lease without it).
        const withdraw = (i: number) => void this.nodes[i]!.abandon(r.keys, r.owner, r.holdId).catch(() => undefined);
        if (queues) settled.forEach((s, i) => s.status === 'ok' && !s.value.granted && withdraw(i));
        late.forEach((p, i) =>
          p?.then(
            (o) => queues && !o.granted && withdraw(i),
            () => undefined,
          ),
        );
        const acked = grants.flatMap((g) => (g.replicasAcked === undefined ? [] : [g.replicasAcked]));
        return {
          granted: true,
          fence: Math.max(...grants.map((g) => g.fence)),
          // Counted by the caller from before the send, which takes the elapsed time off.
          leaseRemainingMs: remaining - drift,
          ...(acked.length > 0 ? { replicasAcked: Math.min(...acked) } : {}),
        };
      }
    }

    // No valid majority: take back what this attempt took, on every node (its hold only: a
    // reentrant owner keeps the holds it had). An acquire that fails here (below) waits no more:
    // a node that refused it may have queued it, and a release would hand that place the lock.
    const unknown = settled.filter((s) => s.status !== 'ok').length;
    const fails = unknown > n - q || grants.length >= q;
    const blocked = refusals.flatMap((o) => (o.granted ? [] : [o]));
    if (place === undefined && queues) {
      const placed = blocked.flatMap((o) => o.queuedAtUs ?? []).filter((p) => p !== undefined);
      if (placed.length > 0) this.places.set(r, placed.sort((a, b) => a - b)[(placed.length - 1) >> 1]!);
    }
    // A writer that waits on gives a grant back at its place: the node then hands the lock to the
    // earliest place (see release.lua), not to a writer giving its own node back to this one.
    const placeUs = queues && !fails ? this.places.get(r) : undefined;
    const requeue = placeUs === undefined ? undefined : { placeUs, beatMs: r.waitBeatMs, leaseMs: r.leaseMs };
    const undo = (i: number, outcome: Settled<AcquireOutcome>): Promise<unknown> | undefined => {
      const node = this.nodes[i]!;
      if (outcome.status === 'ok') {
        if (outcome.value.granted) return node.release(r.keys, r.mode, r.owner, r.holdId, requeue);
        return fails && queues ? node.abandon(r.keys, r.owner, r.holdId) : undefined;
      }
      // Refused for its eviction policy, or by the server for a condition of its own: it ran nothing
      // there (and a place this writer holds there stays). Any other failure: the outcome is unknown,
      // it may have been granted.
      if (outcome.status === 'error' && (outcome.error instanceof EvictionRiskError || refusalOf(outcome.error) !== undefined)) {
        return undefined;
      }
      return node.abandon(r.keys, r.owner, r.holdId);
    };
    // A late answer after a later try of this acquire was sent is that try's to clean up: it
    // reached the node after this one, so it found this hold, under the same id.
    const undoLate = (i: number, outcome: Settled<AcquireOutcome>) =>
      this.tries.get(r) === thisTry ? undo(i, outcome)?.catch(() => undefined) : undefined;
    late.forEach((p, i) =>
      p?.then(
        (value) => undoLate(i, { status: 'ok', value }),
        (error: unknown) => undoLate(i, { status: 'error', error }),
      ),
    );
    await Promise.allSettled(settled.map((s, i) => (s.status === 'pending' ? undefined : undo(i, s))));

    if (unknown > n - q) {
      throwRefusal(settled);
      this.throwServerRefusal(settled, `acquiring the ${r.mode} lock on "${r.resource}"`, {
        resource: r.resource,
        mode: r.mode,
        owner: r.owner,
      });
    }
    if (fails) {
      const took = Math.round(performance.now() - started);
      throw new QuorumError(
        `acquiring the ${r.mode} lock on "${r.resource}"`,
        q,
        this.outcomes(
          gathered,
          (o) => (o.granted ? 'granted' : `refused (${o.reason})`),
          (o) => o.granted,
        ),
        { resource: r.resource, mode: r.mode, owner: r.owner },
        grants.length >= q
          ? `the majority's grants took ${took} ms, which left no validity of the ${r.leaseMs} ms lease (it was released again)`
          : `${unknown} did not answer`,
      );
    }
    // 'upgrade' means "give up now, waiting would deadlock": only when it bars every majority.
    const upgrades = blocked.filter((o) => o.reason === 'upgrade').length;
    const reason = upgrades > n - q ? 'upgrade' : (REASON_ORDER.find((why) => blocked.some((o) => o.reason === why)) ?? 'read');
    const retryAfterMs = Math.min(...blocked.map((o) => o.retryAfterMs));
    // Where this writer queued, a release may hand it the lock (takeHanded).
    const queuedUntil = settled.map((s) => (s.status === 'ok' && !s.value.granted ? s.value.queuedUntil?.[0] : undefined));
    return queuedUntil.some((q) => q !== undefined)
      ? { granted: false, retryAfterMs, reason, queuedUntil }
      : { granted: false, retryAfterMs, reason };
  }

  /**
   * Each node's release hands the lock to the head of that node's queue. The
   * queues have one order (`places`), but a writer's try may not have reached
   * every node yet, so a writer handed the lock by a majority holds it: its
   * fence the highest they gave, its validity the handed length less the
   * drift allowance. It stays queued on the other nodes, which hand it the
   * lock once their release comes (or once a writer they handed it to gives
   * it back); its own release then frees those holds with the rest. A writer
   * handed the lock by a minority tries again (after HANDED_GRACE_MS in
   * lock.ts), which finds those holds and gives them back when no majority
   * grants it.
   */
  takeHanded(
    r: AcquireRequest,
    queuedUntil: readonly (number | undefined)[],
    handed: readonly (HandedGrant | undefined)[],
    elapsedMs: number,
  ): { fence: number; leaseRemainingMs: number } | 'wait' | undefined {
    const mine = handedNodes(r, queuedUntil, handed);
    // The other nodes' messages may still come: the release went to every node at once.
    if (mine.length < this.quorum) return mine.length > 0 ? 'wait' : undefined;
    const fence = Math.max(...mine.map((i) => handed[i]!.fence));
    const handMs = handedMs(r);
    return handedGrant(r, fence, handMs - this.driftOf(handMs), elapsedMs);
  }

  async release(keys: LockKeys, mode: LockMode, owner: string, holdId: string): Promise<boolean> {
    const n = this.nodes.length;
    const q = this.quorum;
    const gathered = await this.gather(
      (node) => node.release(keys, mode, owner, holdId),
      this.options.nodeTimeoutMs,
      (s) => {
        const released = s.filter((x) => x.status === 'ok' && x.value).length;
        const not = s.filter((x) => x.status === 'ok' && !x.value).length;
        return released >= q || not > n - q;
      },
    );
    const { settled } = gathered;
    const released = settled.filter((s) => s.status === 'ok' && s.value).length;
    if (released >= q) return true;
    if (released + settled.filter((s) => s.status !== 'ok').length >= q) {
      throw new QuorumError(
        `releasing the ${mode} lock`,
        q,
        this.outcomes(
          gathered,
          (v) => (v ? 'released' : 'not held'),
          (v) => v,
        ),
        {
          mode,
          owner,
        },
      );
    }
    // Fewer than a majority held it: lost, or released by an earlier call whose outcome was
    // unknown. Drop what is left of this hold alone: the owner's other holds (an outer write
    // under this nested read) are theirs to release.
    this.lostCleanUps.push(() => this.abandon(keys, owner, holdId, true).catch(() => undefined), true);
    return false;
  }

  async extend(requests: readonly ExtendRequest[], round?: ExtendRound): Promise<number[]> {
    if (requests.length === 0) return [];
    const q = this.quorum;
    const verdict = (s: readonly Settled<number[]>[], k: number): 'held' | 'lost' | 'open' => {
      const held = s.filter((x) => x.status === 'ok' && x.value[k]! > 0).length;
      // A node that failed, or could not be asked about this lease (NaN), has not decided it.
      const open = s.filter((x) => x.status !== 'ok' || Number.isNaN(x.value[k])).length;
      return held >= q ? 'held' : held + open < q ? 'lost' : 'open';
    };
    // Many leases take many calls per node (each of bounded server time, extend-groups.ts): the
    // wait ends when no node answered one for nodeTimeoutMs, not after nodeTimeoutMs in all.
    const gathered = await this.gather(
      (node, answered) => node.extend(requests, reportingRound(round, answered)),
      this.options.nodeTimeoutMs,
      (s) => requests.every((_, k) => verdict(s, k) !== 'open'),
    );
    const { settled } = gathered;
    const verdicts = requests.map((_, k) => verdict(settled, k));
    if (verdicts.every((v) => v === 'open')) {
      // Nothing decided: the caller learns why (each node's answer) and tries again.
      throw new QuorumError(
        `renewing ${requests.length} lease(s)`,
        q,
        this.outcomes(
          gathered,
          (v) => `${v.filter((x) => x > 0).length} renewed`,
          () => true,
        ),
      );
    }
    // Each lease on its own: one that no majority decided yet (NaN) is asked again next
    // period, while those a majority renewed stay held.
    return requests.map((r, k) => {
      if (verdicts[k] === 'open') return Number.NaN;
      if (verdicts[k] === 'lost') {
        // Held by too few nodes to count: let go of the rest too, by hold id. Not every hold of
        // the owner: this verdict may come after the owner released these holds and was granted
        // the lock again, and that grant is no part of this lease.
        for (const holdId of r.holdIds) {
          this.lostCleanUps.push(() => this.abandon(r.keys, r.owner, holdId, true).catch(() => undefined), true);
        }
        return 0;
      }
      const left = settled.flatMap((s) => (s.status === 'ok' && s.value[k]! > 0 ? [s.value[k]!] : [])).sort((a, b) => b - a);
      return Math.max(1, left[q - 1]! - this.driftOf(left[q - 1]!));
    });
  }

  async abandon(keys: LockKeys, owner: string, drop?: string, optional = false): Promise<void> {
    const gathered = await this.gather(
      (node, _answered, i) => this.abandonsByNode[i]!.run(() => node.abandon(keys, owner, drop), 'withdrawing from the lock', optional),
      this.options.nodeTimeoutMs,
      () => false,
    );
    const failed = gathered.settled.filter((s) => s.status !== 'ok');
    // An optional abandon dropped unsent after close() (its hold expires by itself): nothing to report.
    if (failed.every((s) => s.status === 'error' && s.error instanceof ClientClosedError)) return;
    if (failed.length > 0) {
      throw new QuorumError(
        'withdrawing from the lock',
        this.quorum,
        this.outcomes(
          gathered,
          () => 'done',
          () => true,
        ),
        { owner },
      );
    }
  }

  /** Each node's heartbeat, as far as its node answered within `nodeTimeoutMs`. */
  async keepPlace(r: AcquireRequest): Promise<readonly (number | undefined)[]> {
    const { settled } = await this.gather(
      (node) => node.keepPlace(r),
      this.options.nodeTimeoutMs,
      () => false,
    );
    return settled.map((s) => (s.status === 'ok' ? s.value[0] : undefined));
  }

  async inspect(resource: string, keys: LockKeys, bound?: CallBound): Promise<LockInfo> {
    // A lock of many holders takes many calls per node: nodeTimeoutMs bounds each, as in renewal.
    const gathered = await this.gather(
      (node, answered) => node.inspect(resource, keys, reportingBound(bound, answered)),
      this.options.nodeTimeoutMs,
      () => false,
    );
    const views = gathered.settled.map((s) => (s.status === 'ok' ? s.value : null));
    const answered = views.filter((v): v is LockInfo => v !== null);
    if (answered.length < this.quorum) {
      throwRefusal(gathered.settled);
      throw new QuorumError(
        `inspecting the lock on "${resource}"`,
        this.quorum,
        this.outcomes(
          gathered,
          () => 'answered',
          () => true,
        ),
        {
          resource,
        },
      );
    }
    return mergeViews(resource, keys.state, answered, views, this.quorum);
  }

  /**
   * Runs `op` on every node at once and resolves when `enough` says a
   * majority decided, when every node answered, or after `timeoutMs`,
   * whichever comes first; an operation of many calls per node calls
   * `answered` as each call is answered, which starts `timeoutMs` over.
   * `late` holds the promises of the nodes still pending then, for clean-up
   * when they answer; `timedOutMs` is the timeout when it was the timeout
   * that ended the wait.
   */
  private gather<T>(
    op: (node: NodeBackend, answered: () => void, i: number) => Promise<T>,
    timeoutMs: number,
    enough: (settled: readonly Settled<T>[]) => boolean,
  ): Promise<Gathered<T>> {
    const settled: Settled<T>[] = this.nodes.map(() => ({ status: 'pending' }));
    return new Promise((resolve) => {
      let done = false;
      let timer: NodeJS.Timeout | undefined;
      let promises: Promise<T>[] = [];
      const finish = (timedOut: boolean) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        const snapshot = [...settled];
        resolve({
          settled: snapshot,
          late: promises.map((p, i) => (snapshot[i]!.status === 'pending' ? p : undefined)),
          timedOutMs: timedOut ? timeoutMs : undefined,
        });
      };
      const arm = () => {
        clearTimeout(timer);
        // After an event-loop stall, timers run before the I/O that came in meanwhile: answers that
        // arrived in time are read first (setImmediate runs after the poll phase), as deadlines.ts does.
        const armed = setTimeout(() => setImmediate(() => timer === armed && finish(true)), timeoutMs);
        timer = armed;
      };
      arm();
      const answered = () => {
        if (!done) arm();
      };
      promises = this.nodes.map((node, i) => {
        try {
          return op(node, answered, i);
        } catch (error) {
          return Promise.reject(error);
        }
      });
      promises.forEach((p, i) =>
        p
          .then(
            (value) => {
              settled[i] = { status: 'ok', value };
            },
            (error: unknown) => {
              settled[i] = { status: 'error', error };
            },
          )
          .then(() => {
            if (done) return;
            if (settled.every((s) => s.status !== 'pending') || enough(settled)) finish(false);
          }),
      );
    });
  }

  /**
   * Throws the servers' refusal when every node that did not answer refused
   * for a condition of its own (out of memory, busy, ...): nothing ran on
   * them, and that condition, not a missing majority, is what to act on.
   */
  private throwServerRefusal(settled: readonly Settled<unknown>[], what: string, context: RWLockErrorContext): void {
    const failed = settled.flatMap((s, node) => (s.status === 'ok' ? [] : [{ s, node }]));
    const refusals = failed.map(({ s, node }) =>
      s.status === 'error' ? refusalOf(s.error, `${what} on node ${node} (${this.addresses[node]})`, context) : undefined,
    );
    if (refusals.length > 0 && refusals.every((refusal) => refusal !== undefined)) throw refusals[0];
  }

  /** Each node's outcome, for a {@link QuorumError}. */
  private outcomes<T>({ settled, timedOutMs }: Gathered<T>, say: (value: T) => string, agreed: (value: T) => boolean): NodeOutcome[] {
    return settled.map((s, node) => {
      const address = this.addresses[node]!;
      if (s.status === 'ok') return { node, address, outcome: agreed(s.value) ? 'ok' : 'refused', reason: say(s.value) };
      if (s.status === 'pending') {
        // A node the others decided without was not waited for: it did not time out.
        return timedOutMs === undefined
          ? { node, address, outcome: 'pending', reason: 'not answered yet when the other nodes had decided (not waited for)' }
          : { node, address, outcome: 'timeout', reason: `no answer within ${timedOutMs} ms` };
      }
      const message = s.error instanceof Error ? s.error.message : String(s.error);
      return { node, address, outcome: 'error', reason: `failed: ${message}` };
    });
  }
}

/** A node's failure as the server's refusal for a condition of its own, if it was one. */
function refusalOf(error: unknown, what = 'the call', context: RWLockErrorContext = {}): ServerRefusedError | undefined {
  if (error instanceof ServerRefusedError) return error;
  return serverRefusal(what, error instanceof Error ? error.message : String(error), { ...context, cause: error });
}

/**
 * Throws a node's refusal of a lock of another layout version, or of its
 * eviction policy (`onEvictionRisk: 'refuse'`), if one refused so: that, not
 * the missing majority, is what to act on.
 */
function throwRefusal(settled: readonly Settled<unknown>[]): void {
  for (const s of settled) {
    if (s.status === 'error' && (s.error instanceof LayoutVersionError || s.error instanceof EvictionRiskError)) throw s.error;
  }
}

/** One view of a lock from the nodes that answered: holders that hold a majority, the highest fence. */
function mergeViews(
  resource: string,
  key: string,
  answered: readonly LockInfo[],
  views: readonly (LockInfo | null)[],
  quorum: number,
): LockInfo {
  // A holder counts when a majority of all nodes list it; its ttl is that majority's shortest.
  const majority = (lists: readonly (readonly HolderInfo[])[]): HolderInfo[] => {
    const byOwner = new Map<string, HolderInfo[]>();
    for (const list of lists) for (const h of list) byOwner.set(h.owner, [...(byOwner.get(h.owner) ?? []), h]);
    return [...byOwner.values()]
      .filter((hs) => hs.length >= quorum)
      .map((hs) => {
        const ttls = hs.map((h) => h.ttlMs).sort((a, b) => b - a);
        return { owner: hs[0]!.owner, holds: Math.min(...hs.map((h) => h.holds)), ttlMs: ttls[quorum - 1]! };
      });
  };
  const writer = majority(answered.map((v) => (v.writer ? [v.writer] : [])))[0] ?? null;
  const readers = majority(answered.map((v) => v.readers));
  const queue: WaiterInfo[] = [];
  for (const v of answered) for (const w of v.queue) if (!queue.some((x) => x.owner === w.owner)) queue.push(w);
  const fences = answered.flatMap((v) => (v.fence === null ? [] : [v.fence]));
  return {
    resource,
    key,
    mode: writer ? 'write' : readers.length > 0 ? 'read' : 'free',
    writer,
    readers,
    waitingWriter: answered.find((v) => v.waitingWriter)?.waitingWriter ?? null,
    queue,
    fence: fences.length > 0 ? Math.max(...fences) : null,
    serverTimeMs: answered[0]!.serverTimeMs,
    nodes: views,
  };
}
