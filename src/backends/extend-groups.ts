import type { LockKeys } from '../keys/keys.js';
import type { CallBound, ExtendRequest } from './backend.js';
import { CallSizer } from './call-sizer.js';

/**
 * Server time one extend call runs for at most, in µs, before it stops and
 * replies for the leases it reached (lua/extend.lua): past it only the lease
 * in hand is finished. Redis runs nothing else meanwhile, so this is about
 * the longest any other client of the node waits for one renewal call. A
 * lease costs 6-25 µs of server time here (6 for a sole holder kept in the
 * hash alone, the common case), so a call stays far under 1 ms on a slower
 * machine too (the budget is time, not a count of leases). Where the
 * script's clock stands still, the call's size keeps it to the budget
 * ({@link CallSizer}).
 */
export const EXTEND_BUDGET_US = 250;
/**
 * Leases sent in one call at most: Redis reads every argument before the
 * script starts, and those the budget leaves unreached are sent again.
 */
export const EXTEND_MAX_LEASES = 256;
/**
 * Leases in the first call to a node; later calls size themselves by what
 * the budget reached, or by what calls cost where the clock stands still
 * (16 leases of 25 µs are well inside the budget's 1 ms bound).
 */
const FIRST_CALL_LEASES = 16;

/** The sizer of one node's renewal calls: kept by the backend from round to round. */
export function extendSizer(): CallSizer {
  return new CallSizer(EXTEND_BUDGET_US, FIRST_CALL_LEASES, EXTEND_MAX_LEASES);
}
/**
 * Extend calls of one group in flight at once: they overlap the client's work
 * and the round trips with the server's (with one, a round of 10,000 leases
 * took over a second on a loaded 2-core machine and the leases ran out), and
 * between calls Redis serves its other clients.
 */
export const EXTEND_CALLS_IN_FLIGHT = 4;

/**
 * Groups renewed at once ({@link extendByGroup}): every node of a Cluster,
 * and where calls carry one slot each (legacy and bridge mode on a Cluster,
 * a server that refuses keys of several slots in one script), that many
 * slots' calls in flight, not one per slot held (10,000 leases lie in some
 * 7,500 slots: all at once, the client fell behind and leases ran out).
 */
export const EXTEND_GROUPS_IN_FLIGHT = 32;

/** What a renewal round tells its calls, and learns from them. */
export interface ExtendRound {
  /** Script calls made so far, every node together (the `redis-rwlock:renew` channel reports them). */
  calls: number;
  /** Bounds each call's wait for Redis: a round of many calls has no bound as a whole. */
  readonly bound?: CallBound;
  /** Set when the client closes: the calls not sent yet are not sent (their leases stay NaN). */
  cancelled?: boolean;
  /**
   * Told of each call's results as it is answered: the indexes (into the
   * round's requests) of the leases it reached, their results, and when the
   * call was sent. A round of many leases takes many calls, so a lease
   * renewed by an early one gets its new deadline then, not at the round's
   * end, which may come after its old one. Not passed on to the nodes of
   * `redlock` mode, where one node's result decides nothing.
   */
  readonly answered?: (indexes: readonly number[], results: readonly number[], sentAt: number) => void;
}

/**
 * `bound` (or no bound), and `answered()` run each time a call it bounds is
 * answered: in `redlock` mode, one node's many calls (renewal, inspect)
 * restart the wait for that node's next one, so that it is bounded per call.
 */
export function reportingBound(bound: CallBound | undefined, answered: () => void): CallBound {
  return <T>(call: Promise<T>) =>
    (bound ? bound(call) : call).then((reply) => {
      answered();
      return reply;
    });
}

/**
 * `round` for one node of several (`redlock` mode): its calls counted, and
 * cancelled, with the round's, each call bounded as {@link reportingBound} says.
 */
export function reportingRound(round: ExtendRound | undefined, answered: () => void): ExtendRound {
  return roundThrough(round, { bound: reportingBound(round?.bound, answered) });
}

/** `round` with its calls bounded and answered by `through`: its calls counted, and cancelled, with the round's. */
export function roundThrough(round: ExtendRound | undefined, through: Pick<ExtendRound, 'bound' | 'answered'>): ExtendRound {
  return {
    get calls() {
      return round?.calls ?? 0;
    },
    set calls(n) {
      if (round) round.calls = n;
    },
    get cancelled() {
      return round?.cancelled;
    },
    bound: through.bound,
    answered: through.answered,
  };
}

/**
 * Renews leases with one sequence of calls per group of requests (a node, or a
 * slot; {@link EXTEND_GROUPS_IN_FLIGHT} groups at once), so that a group that fails (its node unreachable, its slot moving) does not
 * stop the renewal of every other lease: its entries stay NaN, "not known
 * this time", and the caller tries them again next period. When every group
 * fails, the first error is thrown.
 */
export async function extendByGroup(
  count: number,
  groups: readonly number[][],
  run: (indexes: number[], results: number[]) => Promise<void>,
): Promise<number[]> {
  const results = new Array<number>(count).fill(NaN);
  // At most EXTEND_GROUPS_IN_FLIGHT groups at once: one slot per group can make thousands of them.
  const settled: PromiseSettledResult<void>[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < groups.length) {
      const g = next++;
      settled[g] = await run(groups[g]!, results).then(
        () => ({ status: 'fulfilled', value: undefined }),
        (reason: unknown) => ({ status: 'rejected', reason }),
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(EXTEND_GROUPS_IN_FLIGHT, groups.length) }, worker));
  const failed = settled.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed.length > 0 && failed.length === settled.length) throw failed[0]!.reason;
  return results;
}

/**
 * Extends the leases of one group in calls bounded by server time: each call
 * carries up to {@link EXTEND_MAX_LEASES} leases and the budget
 * {@link EXTEND_BUDGET_US}; the leases a call did not reach go first into the
 * next, and `sizer` (the node's) sizes each call by how many the last one
 * reached (a little more after a call that reached all of its own), or where
 * the script's clock stands still by what calls cost. {@link EXTEND_CALLS_IN_FLIGHT}
 * calls are in flight at once. Each call's KEYS and ARGV are as the extend
 * scripts take them: every lease's lock's keys (all declared: the caller
 * groups `indexes` by slot where the server wants one slot per call), then
 * the budget and per lease its owner and lease length; its reply, the
 * call's start and run by its clock, then a result per lease reached.
 * With `acrossSlots` (lua/extend-across-slots.lua, a Cluster node's leases of
 * many slots), the first lock's keys alone are declared, and every lease's
 * lock's keys go in ARGV before its owner.
 * Writes each lease's result into `results` and counts the calls in `round`;
 * a failed call (an error, or no answer within the round's bound) does not
 * stop the others: its leases stay as they were (NaN), and only
 * {@link EXTEND_CALLS_IN_FLIGHT} failed calls in a row (the node down) stop
 * the group, its leases not sent staying NaN. Then an error is thrown: the
 * first that `decides` picks (a refusal on which the caller renews another
 * way, wherever it came among the calls in flight), else the first.
 */
export async function extendInChunks<K extends LockKeys>(
  requests: readonly ExtendRequest<K>[],
  indexes: readonly number[],
  results: number[],
  names: (keys: K) => readonly string[],
  run: (keys: string[], args: (string | number)[], lock: K) => Promise<number[]>,
  round?: ExtendRound,
  sizer: CallSizer = extendSizer(),
  acrossSlots = false,
  decides?: (error: unknown) => boolean,
): Promise<void> {
  let next = 0;
  /** Leases sent but not reached, in order: they go out first. */
  const unreached: number[] = [];
  /** Failed calls since the last answered one; this many in a row stop the group. */
  let failedInRow = 0;
  let failure: { error: unknown } | undefined;
  let decisive: { error: unknown } | undefined;
  const sendCalls = async (): Promise<void> => {
    while (failedInRow < EXTEND_CALLS_IN_FLIGHT && !round?.cancelled) {
      const size = sizer.size;
      const chunk = unreached.splice(0, size);
      if (chunk.length < size && next < indexes.length) {
        const fresh = indexes.slice(next, (next += size - chunk.length));
        for (const i of fresh) chunk.push(i);
      }
      if (chunk.length === 0) return;
      const keys: string[] = [];
      const args: (string | number)[] = [EXTEND_BUDGET_US];
      if (acrossSlots) {
        // lua/extend-across-slots.lua: the first lock's keys route the call; every lock's names travel in ARGV.
        keys.push(...names(requests[chunk[0]!]!.keys));
        for (const i of chunk) args.push(...names(requests[i]!.keys), requests[i]!.owner, requests[i]!.leaseMs);
      } else {
        for (const i of chunk) {
          keys.push(...names(requests[i]!.keys));
          args.push(requests[i]!.owner, requests[i]!.leaseMs);
        }
      }
      let startUs: number;
      let elapsedUs: number;
      let reply: number[];
      const sentAt = performance.now();
      try {
        const call = run(keys, args, requests[chunk[0]!]!.keys);
        [startUs = 0, elapsedUs = 0, ...reply] = await (round?.bound ? round.bound(call) : call);
        if (round) round.calls++;
        if (reply.length === 0) throw new Error('the extend script replied for no lease; it always reaches the first');
      } catch (error) {
        // Its leases stay NaN: the caller tries them again first.
        failedInRow++;
        failure ??= { error };
        if (!decisive && decides?.(error)) decisive = { error };
        continue;
      }
      failedInRow = 0;
      reply.forEach((left, k) => (results[chunk[k]!] = left));
      round?.answered?.(chunk.slice(0, reply.length), reply, sentAt);
      const stopped = reply.length < chunk.length;
      if (stopped) unreached.unshift(...chunk.slice(reply.length));
      sizer.answered({ startUs, elapsedUs, units: reply.length, sent: chunk.length, stopped });
    }
  };
  await Promise.all(Array.from({ length: EXTEND_CALLS_IN_FLIGHT }, sendCalls));
  const thrown = decisive ?? failure;
  if (thrown) throw thrown.error;
}
