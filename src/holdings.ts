import { type AcquireOutcome, type AcquireRequest, handedMs, type LockBackend } from './backends/backend.js';
import type { ExtendRound } from './backends/extend-groups.js';
import { Cleanups } from './cleanups.js';
import type { Deadlines } from './deadlines.js';
import { ClientClosedError, LockLostError, LockNotHeldError, RedisUnavailableError, type RWLockError } from './errors.js';
import type { LockKeys } from './keys/keys.js';
import { Lease, type LeaseHost } from './lease.js';
import {
  extendChannel,
  type LeaseTraceContext,
  type RenewTraceContext,
  releaseChannel,
  renewChannel,
  traced,
} from './observability/channels.js';
import { duration, MIN_LEASE_MS } from './options.js';
import { PacedQueue, paced, RELEASE_CALLS_IN_FLIGHT } from './paced.js';
import { redisFailure } from './redis.js';

/**
 * Everything one owner holds on one lock. Redis keeps one deadline per owner
 * and lock, so leases of the same owner on the same lock are renewed, and
 * lost, together.
 */
class Holding {
  /** Usually one: an array is cheaper than a Set at that size. */
  readonly leases: Lease[] = [];
  /** Local monotonic time (performance.now) at which the lease counts as lost; never later than Redis' deadline. */
  expiresAt = 0;

  constructor(
    readonly id: string,
    readonly resource: string,
    readonly keys: LockKeys,
    readonly owner: string,
  ) {}

  /** How many of `leases` are renewed automatically. */
  autoRenewed = 0;
  /** Its last renewal round could not renew it: retried soon, and first in the next round. */
  missed = false;
  /** Why its latest renewal failed, until one succeeds: a loss by its deadline then says so. */
  renewalFailure: RWLockError | undefined;
}

export interface LossEvent {
  readonly error: LockLostError;
  readonly leases: readonly Lease[];
}

/** What else Holdings reports (src/observability/telemetry.ts). */
export interface HoldingsObserver {
  released(lease: Lease): void;
  /** `holdings` (lock and owner pairs) were renewed by one round. */
  renewed(holdings: number): void;
  /** A round could not renew `holdings`, which hold `leases`: Redis did not answer. */
  renewalFailed(error: RWLockError, holdings: number, leases: readonly Lease[]): void;
  /** Background work failed that no call rejects with. */
  backgroundError(error: RWLockError): void;
}

/**
 * The leases one client holds: it tracks their deadlines, renews the
 * auto-renewed ones in batches (per Redis node per period, per slot in legacy
 * and bridge mode on a Cluster; in calls of at most 250 µs of server time each,
 * src/backends/extend-groups.ts), and turns a missed deadline or a failed renewal
 * into a loud loss: every affected lease's signal aborts.
 */
export class Holdings implements LeaseHost {
  private readonly byId = new Map<string, Holding>();
  /** Auto-renewed leases held; the renewal timer runs while there are any. */
  private autoRenewed = 0;
  /**
   * The renewal timer. It is kept, idle, once no lease is auto-renewed
   * (`autoRenewed` 0): a lease that comes before its next tick restarts it
   * (`refresh()`: the same timer, its first tick a period from now, as a new
   * one would be), and an idle tick clears it. One lease at a time (1 in
   * flight) otherwise made and cleared an interval on every cycle: an
   * allocation, and the timer list of its duration made and dropped each time.
   */
  private renewTimer: NodeJS.Timeout | undefined;
  /**
   * One timer for every deadline, set for the earliest (a timer per holding
   * would cost a setTimeout and a clearTimeout per acquire and release).
   * Grants and renewals only push deadlines later, so it rarely moves.
   */
  private deadlineTimer: NodeJS.Timeout | undefined;
  private deadlineTimerAt = Infinity;
  private renewing = false;
  /** The round in progress renews only the holdings the last one missed. */
  private retrying = false;
  /** A period's round came while a retry ran: it runs as that ends. */
  private tickSkipped = false;
  /** Retries since a round last missed nothing: each waits twice as long as the one before. */
  private retries = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  /** The renewal round in progress: close() cancels what it has not sent yet. */
  private round: ExtendRound | undefined;
  private closed = false;
  /** Set once close() has settled: a lease it left held can no longer be released or extended here. */
  private ended = false;
  /**
   * Give-backs of leases that ran out here: {@link RELEASE_CALLS_IN_FLIGHT}
   * at once, as close() releases, so that a stall that loses thousands of
   * leases does not queue thousands of calls ahead of the renewals and every
   * other command on the connection. After close(), none past its bound.
   */
  private readonly giveBacks: PacedQueue;
  /** Leases held, for stats. */
  private leaseCount = 0;

  constructor(
    private readonly backend: LockBackend,
    /** The length of auto-renewed leases; they renew every third of it. */
    private readonly autoLeaseMs: number,
    private readonly onLost: (event: LossEvent) => void,
    private readonly deadlines: Deadlines,
    /** How long a release, extend or renewal waits for Redis. */
    private readonly redisTimeoutMs: number,
    private readonly observer?: HoldingsObserver,
    /** Where a grant that came after close() is given back from; `LockClient.close()` waits for it. */
    private readonly cleanups = new Cleanups(),
  ) {
    this.giveBacks = new PacedQueue(RELEASE_CALLS_IN_FLIGHT, cleanups);
  }

  /** Number of (lock, owner) pairs held; for tests and introspection. */
  get size(): number {
    return this.byId.size;
  }

  /** Number of leases held. */
  get leases(): number {
    return this.leaseCount;
  }

  /**
   * Records a grant. `sentAt` is when the acquire was sent: the server's
   * deadline is `leaseRemainingMs` after a moment later than that, so a local
   * deadline counted from `sentAt` never runs past the server's.
   */
  add(request: AcquireRequest, grant: AcquireOutcome & { granted: true }, autoRenew: boolean, sentAt: number): Lease {
    const { resource, keys, owner, mode, holdId, leaseMs } = request;
    if (this.closed) {
      // Granted while close() ran: give it straight back (close() waits for it), so nothing stays locked.
      const givingBack = this.backend.release(keys, mode, owner, holdId).catch((error: unknown) => {
        const context = { resource, mode, owner };
        this.observer?.backgroundError(
          redisFailure(`giving back the ${mode} lock on "${resource}" granted after close() (it expires by itself)`, error, context),
        );
      });
      this.cleanups.track(givingBack);
      throw new ClientClosedError('this LockClient was closed while the acquire was in flight; nothing is held', {
        resource,
        mode,
        owner,
      });
    }
    const id = holdingId(keys, owner);
    let holding = this.byId.get(id);
    if (!holding) this.byId.set(id, (holding = new Holding(id, resource, keys, owner)));
    // A reentrant hold of the same mode keeps its holding's fence (the server returns it too;
    // in redlock mode another majority of nodes may have answered, with another highest fence).
    const fence = holding.leases.find((l) => l.mode === mode)?.fence ?? grant.fence;
    const lease = new Lease(this, resource, mode, owner, fence, leaseMs, autoRenew, holdId, grant.replicasAcked);
    lease.grantedAt = sentAt;
    holding.leases.push(lease);
    this.leaseCount++;
    lease.holding = holding;
    this.setDeadline(holding, Math.max(holding.expiresAt, localDeadline(sentAt, grant.leaseRemainingMs)));
    // A hold a release handed over, taken from the message, lasts the writer's queue heartbeat when
    // that is shorter than its lease (a later try that finds it runs it for the lease: the message
    // late or lost, or replicaAck): it must be extended long before renewal would come.
    const handMs = handedMs(request);
    if (handMs < leaseMs && grant.leaseRemainingMs <= handMs) this.extendHanded(lease, handMs);
    if (autoRenew) {
      holding.autoRenewed++;
      this.autoRenewed++;
      this.startRenewing();
    }
    return lease;
  }

  /** Releases one lease (a promise chain, not async functions: this runs on every cycle). */
  releaseLease(lease: Lease): Promise<void> {
    if (lease.state === 'held' && lease.pending === undefined && traced(releaseChannel)) {
      const trace = leaseTrace(lease);
      return releaseChannel.tracePromise(
        () =>
          this.release(lease).then(
            () => void (trace.outcome = 'released'),
            (error: unknown) => {
              trace.outcome = leaseOutcomeOf(error);
              throw error;
            },
          ),
        trace,
      );
    }
    return this.release(lease);
  }

  private release(lease: Lease): Promise<void> {
    if (lease.state === 'released') return Promise.resolve();
    if (lease.state === 'lost') return Promise.reject(notHeld(lease));
    if (lease.pending) return lease.pending;
    let holding: Holding;
    try {
      holding = this.holdingOf(lease);
    } catch (error) {
      return Promise.reject(error);
    }
    const released = this.backend.release(holding.keys, lease.mode, lease.token, lease.holdId);
    lease.pending = this.deadlines.within(released, this.redisTimeoutMs, 'releasing', lease).then(
      (held) => {
        lease.pending = undefined;
        // After an attempt with an unknown outcome, a hold already gone was most likely released by it.
        if (!held && !lease.releaseUnknown) {
          this.lose(holding, 'Redis no longer holds it (its lease ran out or it was released by force)');
          throw notHeld(lease);
        }
        lease.state = 'released';
        this.remove(holding, lease);
        this.observer?.released(lease);
      },
      (error: unknown) => {
        lease.pending = undefined;
        lease.releaseUnknown = true;
        // The release may or may not have run. Renewing on would keep the lock held for as
        // long as this client lives if it did not: stop, so it frees itself within one lease
        // (a retried release() still works while it is live, and finds a hold already
        // released by this attempt gone without harm: holds are named).
        this.stopRenewal(holding, lease);
        throw redisFailure(`releasing the ${lease.mode} lock on "${lease.resource}"`, error, {
          resource: lease.resource,
          mode: lease.mode,
          owner: lease.token,
        });
      },
    );
    return lease.pending;
  }

  expireIfDue(lease: Lease): void {
    const holding = lease.holding as Holding | undefined;
    if (holding && holding.expiresAt <= performance.now()) {
      this.lose(holding, 'its lease ran out without renewal (the event loop may have been blocked)', true);
    }
  }

  /**
   * A lease a release handed over runs until the writer's queue heartbeat
   * deadline, `handMs` after its latest try was sent: it is extended to its
   * own length once a third of that has passed, as renewal extends any
   * lease at a third of its length, so a hold released sooner (the common
   * short critical section) costs no call. If the extension fails, the
   * lease is renewed or reported lost as any other; one released or lost
   * meanwhile is left alone.
   */
  private extendHanded(lease: Lease, handMs: number): void {
    const at = (lease.holding as Holding).expiresAt - (2 * handMs) / 3;
    setTimeout(() => this.extendHandedNow(lease), Math.max(0, at - performance.now())).unref();
  }

  private extendHandedNow(lease: Lease): void {
    // Nor once close() began: a lease it could not release ends with its handed hold.
    if (lease.state !== 'held' || this.closed) return;
    this.extend(lease, undefined).catch((error: unknown) => {
      if (lease.state !== 'held') return;
      const context = { resource: lease.resource, mode: lease.mode, owner: lease.token };
      this.observer?.backgroundError(
        redisFailure(
          `extending the ${lease.mode} lock on "${lease.resource}" handed over by a release to its lease length`,
          error,
          context,
        ),
      );
    });
  }

  extendLease(lease: Lease, leaseMs: number | undefined): Promise<void> {
    if (!traced(extendChannel)) return this.extend(lease, leaseMs);
    const trace = leaseTrace(lease);
    return extendChannel.tracePromise(
      () =>
        this.extend(lease, leaseMs).then(
          () => void (trace.outcome = 'extended'),
          (error: unknown) => {
            trace.outcome = leaseOutcomeOf(error);
            throw error;
          },
        ),
      trace,
    );
  }

  private async extend(lease: Lease, leaseMs: number | undefined): Promise<void> {
    const context = { resource: lease.resource, mode: lease.mode, owner: lease.token };
    const ms = leaseMs === undefined ? lease.leaseMs : duration('leaseMs', leaseMs, MIN_LEASE_MS, context);
    if (lease.state === 'released') throw notHeld(lease, 'it was released');
    if (lease.state === 'lost') throw lost(lease, 'it was lost before');
    const holding = this.holdingOf(lease);
    const sentAt = performance.now();
    let remaining: number;
    try {
      const extended = this.backend.extend([{ keys: holding.keys, owner: lease.token, leaseMs: ms, holdIds: holdIdsOf(holding) }]);
      [remaining] = (await this.deadlines.within(extended, this.redisTimeoutMs, 'extending', lease)) as [number];
    } catch (error) {
      throw redisFailure(`extending the ${lease.mode} lock on "${lease.resource}"`, error, context);
    }
    if (Number.isNaN(remaining)) {
      throw new RedisUnavailableError(
        `extending the ${lease.mode} lock on "${lease.resource}" failed: its node could not be asked; the lease is unchanged; the operation may be retried`,
        context,
      );
    }
    if (remaining <= 0) {
      this.lose(holding, 'Redis no longer holds it', false, sentAt);
      throw lost(lease, 'Redis no longer holds it');
    }
    if (this.byId.get(holding.id) === holding) this.setDeadline(holding, localDeadline(sentAt, remaining));
  }

  /**
   * Stops renewing and releases everything still held, best-effort, a few
   * releases in flight at a time ({@link RELEASE_CALLS_IN_FLIGHT}), so that
   * other clients' commands go in between; every lease is then `released`
   * (or `lost` if Redis no longer had it). Settles within `redisTimeoutMs`:
   * a release not sent by then is not sent (its lease runs out by itself).
   * A lease whose release was not confirmed stays held until its local
   * deadline, then is lost like any other: Redis may still hold it till then.
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.round) this.round.cancelled = true;
    clearInterval(this.renewTimer);
    this.renewTimer = undefined;
    clearTimeout(this.retryTimer);
    const leases = [...this.byId.values()].flatMap((h) => [...h.leases]);
    const until = performance.now() + this.redisTimeoutMs;
    const releasing = paced(
      leases,
      RELEASE_CALLS_IN_FLIGHT,
      (lease) => this.releaseLease(lease),
      () => performance.now() < until,
    );
    await this.deadlines.within(releasing, this.redisTimeoutMs, 'releasing the leases still held', NO_SUBJECT).catch(() => undefined);
    this.ended = true;
    // Nothing left to lose: the timer of a deadline already released goes, or it would keep the
    // closed client reachable until then (up to a lease). A lease still held keeps it.
    if (this.byId.size === 0) {
      clearTimeout(this.deadlineTimer);
      this.deadlineTimer = undefined;
      this.deadlineTimerAt = Infinity;
    }
  }

  /**
   * One renewal round: every auto-renewed holding (with `retry`, those the
   * last round missed), in batches per Redis node (see the class comment),
   * those the last round missed first. Never rejects.
   */
  renewNow(retry = false): Promise<void> {
    if (this.renewing) {
      // A slow round must not overlap the next; a retry must not hold up the period's round.
      if (this.retrying && !retry) this.tickSkipped = true;
      return Promise.resolve();
    }
    if (!traced(renewChannel)) return this.renewRound(undefined, retry);
    const trace: RenewTraceContext = { holdings: 0, renewed: 0, lost: 0, unreached: 0, calls: 0 };
    return renewChannel.tracePromise(() => this.renewRound(trace, retry), trace);
  }

  private async renewRound(trace: RenewTraceContext | undefined, retry: boolean): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    this.retrying = retry;
    let due: Holding[] = [];
    /** Leases whose result a call has already reported (`answered`), or the round's end. */
    let settled = new Uint8Array(0);
    try {
      const now = performance.now();
      const missed: Holding[] = [];
      for (const holding of this.byId.values()) {
        if (holding.autoRenewed === 0 || (retry && !holding.missed)) continue;
        // After an event-loop stall longer than the lease, the lock may be someone else's by now.
        if (now >= holding.expiresAt) {
          this.lose(holding, 'its lease ran out before it could be renewed (event loop stalled?)', true);
          if (trace) {
            trace.holdings++;
            trace.lost++;
          }
        } else (holding.missed ? missed : due).push(holding);
      }
      // The holdings the last round did not reach go first: under repeated failures no tail starves.
      if (missed.length > 0) due = missed.concat(due);
      settled = new Uint8Array(due.length);
      if (trace) trace.holdings += due.length;
      if (due.length === 0) return;
      let renewed = 0;
      const settle = (i: number, left: number, sentAt: number) => {
        settled[i] = 1;
        const holding = due[i]!;
        if (this.byId.get(holding.id) !== holding) return; // released meanwhile
        if (left > 0) {
          this.setDeadline(holding, localDeadline(sentAt, left));
          holding.renewalFailure = undefined;
          renewed++;
        } else {
          if (this.lose(holding, 'renewal found it no longer held', false, sentAt) && trace) trace.lost++;
        }
      };
      let results: number[];
      // Many leases take many calls: each waits up to redisTimeoutMs, not the round as a whole,
      // and each call's leases take their new deadlines as it is answered.
      const round: ExtendRound = (this.round = {
        calls: 0,
        bound: (call) => this.deadlines.within(call, this.redisTimeoutMs, 'renewing leases', NO_SUBJECT),
        answered: (indexes, replies, sentAt) => indexes.forEach((i, k) => settle(i, replies[k]!, sentAt)),
      });
      try {
        results = await this.backend.extend(
          due.map((h) => ({ keys: h.keys, owner: h.owner, leaseMs: this.autoLeaseMs, holdIds: holdIdsOf(h) })),
          round,
        );
      } catch (error) {
        // Redis unreachable: tried again soon (afterRound); the deadline timers report loss if it never comes back.
        const failed = due.filter((_, i) => settled[i] === 0);
        const failure = redisFailure(`renewing ${failed.length} lease holding(s)`, error, {});
        for (const holding of failed) holding.renewalFailure = failure;
        if (this.observer) {
          this.observer.renewalFailed(
            failure,
            failed.length,
            failed.flatMap((h) => h.leases),
          );
        }
        if (trace) {
          trace.calls = round.calls;
          trace.renewed = renewed;
          trace.unreached += failed.length;
          trace.error = error;
          renewChannel.error.publish(trace); // the round itself resolves: a timer runs it
        }
        return;
      }
      let unreached: Holding[] | undefined;
      due.forEach((holding, i) => {
        if (settled[i] === 1 || this.byId.get(holding.id) !== holding) return; // taken as its call was answered, or released meanwhile
        if (Number.isNaN(results[i])) {
          (unreached ??= []).push(holding);
          return; // its node could not be asked: tried again soon, or the deadline decides
        }
        settle(i, results[i]!, now); // redlock mode: a majority of nodes decided, as the round ends
      });
      this.observer?.renewed(renewed);
      if (unreached && this.observer) {
        const failure = new RedisUnavailableError(
          `renewing ${unreached.length} lease holding(s) failed: their Redis node could not be asked; tried again shortly`,
        );
        this.observer.renewalFailed(
          failure,
          unreached.length,
          unreached.flatMap((h) => h.leases),
        );
      }
      if (trace) {
        trace.calls = round.calls;
        trace.renewed = renewed;
        trace.unreached = unreached?.length ?? 0;
      }
    } finally {
      this.renewing = false;
      this.round = undefined;
      this.afterRound(due, settled);
    }
  }

  /**
   * Marks the holdings `due` that the round did not renew (`settled` 0) and
   * tries them again soon: after {@link RETRY_FIRST_MS}, twice that after the
   * next failure and so on, at most `redisTimeoutMs`, and never later than
   * halfway to the first of their local deadlines. A period's round that came
   * meanwhile runs now.
   */
  private afterRound(due: readonly Holding[], settled: Uint8Array): void {
    let earliest = Infinity;
    due.forEach((holding, i) => {
      holding.missed = settled[i] === 0 && this.byId.get(holding.id) === holding && holding.autoRenewed > 0;
      if (holding.missed && holding.expiresAt < earliest) earliest = holding.expiresAt;
    });
    if (this.closed || this.autoRenewed === 0) return;
    if (this.tickSkipped) {
      this.tickSkipped = false;
      void this.renewNow();
      return;
    }
    if (earliest === Infinity) {
      this.retries = 0;
      return;
    }
    const backoff = Math.min(RETRY_FIRST_MS * 2 ** this.retries++, this.redisTimeoutMs);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => void this.renewNow(true), Math.max(0, Math.min(backoff, (earliest - performance.now()) / 2)));
    this.retryTimer.unref();
  }

  private startRenewing(): void {
    if (this.closed) return;
    if (this.renewTimer) {
      // The first auto-renewed lease since the timer went idle: restart its period.
      if (this.autoRenewed === 1) this.renewTimer.refresh();
      return;
    }
    this.renewTimer = setInterval(() => this.renewTick(), Math.max(1, Math.floor(this.autoLeaseMs / 3)));
    this.renewTimer.unref();
  }

  /** A period's tick: a round, or, with nothing auto-renewed since the last lease went, the timer's end. */
  private renewTick(): void {
    if (this.autoRenewed > 0) {
      void this.renewNow();
      return;
    }
    clearInterval(this.renewTimer);
    this.renewTimer = undefined;
  }

  private setDeadline(holding: Holding, expiresAt: number): void {
    holding.expiresAt = expiresAt;
    if (expiresAt < this.deadlineTimerAt) this.armDeadlineTimer(expiresAt);
  }

  private armDeadlineTimer(at: number): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimerAt = at;
    this.deadlineTimer = setTimeout(() => this.checkDeadlines(), Math.max(0, at - performance.now()));
    this.deadlineTimer.unref();
  }

  /** Reports every holding whose deadline has passed lost, and sets the timer for the next deadline. */
  private checkDeadlines(): void {
    this.deadlineTimer = undefined;
    this.deadlineTimerAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const holding of [...this.byId.values()]) {
      // A timer may fire up to its 1 ms resolution before `at`: count that as run out (the safe side).
      if (holding.expiresAt <= now + CLOCK_RESOLUTION_MS) this.lose(holding, 'its lease ran out without renewal', true);
      else if (holding.expiresAt < next) next = holding.expiresAt;
    }
    if (next < Infinity) this.armDeadlineTimer(next);
  }

  /**
   * Reports `holding`'s leases lost. `byClock`: lost because its local
   * deadline passed, while Redis may still hold it: a renewal or extension
   * on the wire may land and keep it for a whole lease with nobody holding
   * it, so each hold is given back by its id too (sent after that call on
   * the same connection, so run after it; `close()` waits for it).
   * Otherwise Redis' answer to a call sent at `sentAt` found it gone, which
   * says nothing of a lease whose release is in flight (that release may be
   * what emptied the lock; it settles the lease itself) or was granted since.
   */
  private lose(holding: Holding, why: string, byClock = false, sentAt = Infinity): boolean {
    if (this.byId.get(holding.id) !== holding) return false;
    const leases = byClock ? [...holding.leases] : holding.leases.filter((l) => l.pending === undefined && l.grantedAt <= sentAt);
    if (leases.length === 0) return false;
    for (const lease of leases) this.remove(holding, lease);
    // Run out by its deadline after renewal failed: the failure (a server refusing, say) is the cause.
    const failure = byClock ? holding.renewalFailure : undefined;
    const error = new LockLostError(
      `lost the lock on "${holding.resource}": ${why}${failure ? ` (its last renewal: ${failure.message})` : ''}`,
      {
        resource: holding.resource,
        mode: leases.some((l) => l.mode === 'write') ? 'write' : 'read',
        owner: holding.owner,
        cause: failure,
      },
    );
    for (const lease of leases) {
      lease.markLost(error);
    }
    try {
      this.onLost({ error, leases });
    } finally {
      // Only once the holder was told (its signals aborted, the `lost` listeners run, even one
      // that threw): a hold given back lets another owner in at once, before the server's deadline.
      if (byClock) for (const lease of leases) this.giveBack(holding, lease);
    }
    return true;
  }

  /**
   * Drops `lease`'s hold in Redis, in the background (the first ones at once,
   * the rest as those are answered or given up after `redisTimeoutMs`, or in
   * `redlock` mode once their quorum call has ended: see `giveBacks`); a
   * failure, or no answer within `redisTimeoutMs`, is reported (the hold
   * expires by itself).
   */
  private giveBack(holding: Holding, lease: Lease): void {
    this.giveBacks.push(
      async () => {
        const abandoning = this.backend.abandon(holding.keys, lease.token, lease.holdId, true);
        const reported = this.deadlines.within(abandoning, this.redisTimeoutMs, 'giving back', lease).catch((error: unknown) => {
          const context = { resource: lease.resource, mode: lease.mode, owner: lease.token };
          this.observer?.backgroundError(
            redisFailure(
              `giving back the ${lease.mode} lock on "${lease.resource}" after its lease ran out here (it expires by itself)`,
              error,
              context,
            ),
          );
        });
        // A call that ends by itself (redlock: by nodeTimeoutMs, which may be later) keeps its
        // place until it has: no more give-backs in flight than the queue allows.
        if (this.backend.abandonEndsByItself) await abandoning.catch(() => undefined);
        await reported;
      },
      // Optional: once close() has settled, a give-back not sent is not sent (the hold expires by itself).
      true,
    );
  }

  /** Stops counting `lease` among the auto-renewed ones (once). */
  private stopRenewal(holding: Holding, lease: Lease): void {
    if (!lease.autoRenew || lease.renewalStopped || !holding.leases.includes(lease)) return;
    lease.renewalStopped = true;
    holding.autoRenewed--;
    if (--this.autoRenewed === 0) {
      // The renewal timer is idle until its next tick, which clears it unless a lease came meanwhile.
      clearTimeout(this.retryTimer);
    }
  }

  /** Forgets one lease; the holding goes with its last lease. */
  private remove(holding: Holding, lease: Lease): void {
    this.stopRenewal(holding, lease);
    const at = holding.leases.indexOf(lease);
    if (at < 0) return;
    holding.leases.splice(at, 1);
    this.leaseCount--;
    if (holding.leases.length === 0 && this.byId.get(holding.id) === holding) this.byId.delete(holding.id);
  }

  private holdingOf(lease: Lease): Holding {
    const holding = lease.holding as Holding | undefined;
    if (holding && !this.ended && this.byId.get(holding.id) === holding) return holding;
    throw new ClientClosedError(`the lease on "${lease.resource}" belongs to a closed LockClient`, {
      resource: lease.resource,
      mode: lease.mode,
      owner: lease.token,
    });
  }
}

const NO_SUBJECT = Object.freeze({});

/** The first retry of holdings a renewal round missed comes this long after it. */
const RETRY_FIRST_MS = 25;

/** A new context for the release or extend tracing channel (only made while someone subscribes). */
function leaseTrace(lease: Lease): LeaseTraceContext {
  return {
    resource: lease.resource,
    mode: lease.mode,
    owner: lease.token,
    fence: lease.fence,
    heldMs: performance.now() - lease.grantedAt,
    outcome: undefined,
  };
}

function leaseOutcomeOf(error: unknown): 'not-held' | 'failed' {
  return error instanceof LockNotHeldError || error instanceof LockLostError ? 'not-held' : 'failed';
}

/** Redis counts deadlines in whole ms, and Node's timers fire with 1 ms resolution. */
const CLOCK_RESOLUTION_MS = 1;

/**
 * The local (performance.now) deadline of a lease granted or renewed for
 * `remainingMs` by a script sent at `sentAt`. The server's deadline is its
 * clock in whole ms (truncated) at the grant plus `remainingMs`, so up to
 * 1 ms before `grant + remainingMs`; the grant comes after `sentAt`, so this
 * is never later than the server's deadline.
 */
function localDeadline(sentAt: number, remainingMs: number): number {
  return sentAt + remainingMs - CLOCK_RESOLUTION_MS;
}

/**
 * True when a grant of `remainingMs` by a call sent at `sentAt` has already
 * run out on this client's clock as its reply arrives (the reply was held up
 * past the lease): Redis may have let another owner in since, so it is no
 * lease. Counted as the deadline timer counts (`checkDeadlines`); `now`: the
 * reply's arrival, when the caller has read the clock already.
 */
export function ranOutOnArrival(sentAt: number, remainingMs: number, now = performance.now()): boolean {
  return localDeadline(sentAt, remainingMs) <= now + CLOCK_RESOLUTION_MS;
}

/** The holds a renewal of `holding` covers, as it is sent (redlock mode gives back these alone if lost). */
function holdIdsOf(holding: Holding): string[] {
  return holding.leases.map((l) => l.holdId);
}

function holdingId(keys: LockKeys, owner: string): string {
  return `${keys.state}\u0000${owner}`;
}

function notHeld(lease: Lease, why = 'it was lost'): LockNotHeldError {
  return new LockNotHeldError(`the ${lease.mode} lock on "${lease.resource}" is not held by this lease (${why}); nothing was changed`, {
    resource: lease.resource,
    mode: lease.mode,
    owner: lease.token,
  });
}

function lost(lease: Lease, why: string): LockLostError {
  return new LockLostError(`cannot extend the ${lease.mode} lock on "${lease.resource}": ${why}`, {
    resource: lease.resource,
    mode: lease.mode,
    owner: lease.token,
  });
}
