import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AcquireOutcome, AcquireRequest, BlockReason, LockBackend, LockInfo } from './backends/backend.js';
import type { Cleanups } from './cleanups.js';
import type { BoundErrors, Deadlines } from './deadlines.js';
import {
  AcquireAbortedError,
  AcquireTimeoutError,
  ClientClosedError,
  InvalidArgumentError,
  LayoutVersionError,
  type LockMode,
  RedisUnavailableError,
  RWLockError,
  type RWLockErrorContext,
  ServerOutOfMemoryError,
  ServerRefusedError,
  UpgradeConflictError,
} from './errors.js';
import { type Holdings, ranOutOnArrival } from './holdings.js';
import { type LockKeys, validateResource } from './keys/keys.js';
import type { Lease } from './lease.js';
import { type AcquireOutcomeName, type AcquireTraceContext, acquireChannel, traced } from './observability/channels.js';
import type { Telemetry } from './observability/telemetry.js';
import {
  type AcquireOptions,
  duration,
  MIN_LEASE_MS,
  ownerToken,
  ownOptions,
  type ResolvedClientOptions,
  resolveReplicaAck,
  type TryAcquireOptions,
} from './options.js';
import { enclosingOwner } from './owner-context.js';
import { redisFailure } from './redis.js';
import type { WakeupHub, Watch } from './wakeups.js';

/** What a lock needs from the {@link LockClient} that made it. */
export interface LockContext {
  readonly options: ResolvedClientOptions;
  readonly backend: LockBackend;
  readonly holdings: Holdings;
  readonly wakeups: WakeupHub;
  /** Bounds every wait on Redis (see `redisTimeoutMs`). */
  readonly deadlines: Deadlines;
  /** Throws `ClientClosedError` when the LockClient or its Redis client is closed. */
  assertOpen(context: RWLockErrorContext): void;
  /** True once the Redis client under the LockClient is closed: nothing more can be sent. */
  redisClosed(): boolean;
  /** True once `close()` was called on the LockClient. */
  closed(): boolean;
  /** A new id for one acquire's hold, unique across clients and processes. */
  nextHoldId(): string;
  /** The client's counters and events. */
  readonly telemetry: Telemetry;
  /** Acquires in flight and work that outlives its call (late grants given back, queue places left); `close()` waits for both. */
  readonly cleanups: Cleanups;
}

const BLOCKED_BY: Record<BlockReason, string> = {
  write: 'another owner holds the write lock',
  read: 'other owners hold the read lock',
  intent: 'a writer is waiting and writers go first',
  queue: 'writers that came earlier are waiting',
  upgrade: 'another reader is upgrading',
};

/**
 * How long a writer some nodes handed the lock waits for the messages of the
 * rest before it tries instead (`redlock` mode). One release goes to every
 * node at once, so their messages come within a fraction of a millisecond,
 * unless a node is slow or handed the lock to a writer that queued there
 * first; then this writer's try gives back what it got, and a longer grace
 * would keep that from the next writer for longer.
 */
const HANDED_GRACE_MS = 20;

/** What a release handed a waiting writer: its fence, and how long its hold lasts from now. */
type Handed = { fence: number; leaseRemainingMs: number };

/** A writer's latest try that queued: when it was sent, and the heartbeat deadline it set on each node. */
interface Queued {
  readonly sentAt: number;
  readonly until: readonly (number | undefined)[];
}

const WAIT_OPTIONS = ['waitMs', 'signal', 'leaseMs', 'owner', 'replicaAck'] as const;
const TRY_OPTIONS = ['leaseMs', 'owner', 'replicaAck'] as const;

/** The read-write lock of one resource. Cheap to create; holds no state of its own. */
export class RWLock {
  /** The resource name. */
  readonly resource: string;
  /** The Redis names this lock uses, all in one Cluster slot. */
  readonly keys: LockKeys;

  /** @internal Locks are made by {@link LockClient.lock}. */
  constructor(
    private readonly ctx: LockContext,
    resource: string,
  ) {
    this.resource = validateResource(resource);
    this.keys = ctx.backend.keysFor(this.resource);
  }

  /** Waits up to `waitMs` for a shared read lease; rejects with `AcquireTimeoutError` when it runs out. */
  acquireRead(options?: AcquireOptions): Promise<Lease> {
    if (traced(acquireChannel)) return this.traced('read', options, true) as Promise<Lease>;
    return this.acquire('read', options, true, undefined);
  }

  /**
   * Waits up to `waitMs` for the exclusive write lease. The caller's own read
   * hold (same owner) is upgraded in place once it is the only reader.
   */
  acquireWrite(options?: AcquireOptions): Promise<Lease> {
    if (traced(acquireChannel)) return this.traced('write', options, true) as Promise<Lease>;
    return this.acquire('write', options, true, undefined);
  }

  /** One try for a read lease: the lease, or null when the lock is taken. */
  tryAcquireRead(options?: TryAcquireOptions): Promise<Lease | null> {
    if (traced(acquireChannel)) return this.traced('read', options, false);
    return this.acquire('read', options, false, undefined).catch(nullIfTimeout);
  }

  /** One try for the write lease: the lease, or null when the lock is taken. */
  tryAcquireWrite(options?: TryAcquireOptions): Promise<Lease | null> {
    if (traced(acquireChannel)) return this.traced('write', options, false);
    return this.acquire('write', options, false, undefined).catch(nullIfTimeout);
  }

  /** The lock's current state: read atomically up to about a hundred holders and waiters, a bigger lock in several calls (see `LockClient.inspect`). */
  async inspect(): Promise<LockInfo> {
    const context = { resource: this.resource };
    this.ctx.assertOpen(context);
    try {
      // A lock of many holders takes many calls: each waits up to redisTimeoutMs, not the read as a whole.
      return await this.ctx.backend.inspect(this.resource, this.keys, (call) =>
        this.ctx.deadlines.within(call, this.ctx.options.redisTimeoutMs, 'inspecting', context),
      );
    } catch (error) {
      throw redisFailure(`inspecting the lock on "${this.resource}"`, error, context);
    }
  }

  /**
   * An acquire published on the `redis-rwlock:acquire` tracing channel; only
   * called while someone subscribes, so the untraced path makes no context.
   */
  private traced(mode: LockMode, options: unknown, waiting: boolean): Promise<Lease | null> {
    const trace: AcquireTraceContext = {
      resource: this.resource,
      mode,
      waiting,
      owner: undefined,
      waitedMs: 0,
      attempts: 0,
      outcome: undefined,
      fence: undefined,
      handed: false,
    };
    const started = performance.now();
    return acquireChannel.tracePromise(
      () =>
        this.acquire(mode, options, waiting, trace).then(
          (lease) => {
            trace.waitedMs = performance.now() - started;
            trace.outcome = 'granted';
            trace.fence = lease.fence;
            return lease;
          },
          (error: unknown) => {
            trace.waitedMs = performance.now() - started;
            trace.outcome = outcomeOf(error, waiting);
            if (trace.outcome === 'busy') return null;
            throw error;
          },
        ),
      trace,
    );
  }

  private async acquire(mode: LockMode, options: unknown, waiting: boolean, trace: AcquireTraceContext | undefined): Promise<Lease> {
    const { ctx, keys, resource } = this;
    const base: RWLockErrorContext = { resource, mode };
    const o = ownOptions(options, waiting ? WAIT_OPTIONS : TRY_OPTIONS, 'options', base);
    const owner = o.owner === undefined ? (enclosingOwner(keys.state) ?? randomUUID()) : ownerToken(o.owner, base, ctx.options.mode);
    const context: RWLockErrorContext = { resource, mode, owner };
    if (trace) trace.owner = owner;
    const autoRenew = o.leaseMs === undefined;
    const leaseMs = autoRenew ? ctx.options.leaseMs : duration('leaseMs', o.leaseMs, MIN_LEASE_MS, context);
    const waitMs = !waiting ? 0 : o.waitMs === undefined ? ctx.options.waitMs : duration('waitMs', o.waitMs, 0, context);
    const signal = o.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new InvalidArgumentError('signal', 'must be an AbortSignal', context);
    }
    const recheckMs = ctx.options.recheckMs;
    const replicaAck = o.replicaAck === undefined ? ctx.options.replicaAck : resolveReplicaAck(o.replicaAck, context);
    const request: AcquireRequest = {
      resource,
      keys,
      mode,
      owner,
      holdId: ctx.nextHoldId(),
      leaseMs,
      honourIntent: ctx.options.writerPreference,
      // A waiter re-tries at least every recheckMs; its place in the queue outlives two of those.
      waitBeatMs: waitMs > 0 ? 2 * recheckMs + 100 : 0,
      fair: ctx.options.fair,
      replicaAck,
    };
    const started = performance.now();
    const deadline = started + waitMs;
    // Whatever Redis or the network does, the acquire settles by then: see acquireBoundMs.
    const bound = new AcquireBound(
      ctx,
      context,
      started,
      started + acquireBoundMs(waitMs, ctx.options.redisTimeoutMs, replicaAck?.timeoutMs ?? 0),
      signal,
    );
    // On a lock whose wake-ups this client already hears, watch before the first try: a
    // release after it cannot be missed, so a refused try is followed by a sleep, not a re-try.
    const writer = mode === 'write' ? owner : undefined;
    let watch = waitMs > 0 ? ctx.wakeups.watchIfSubscribed(keys.channel, writer) : undefined;
    let leftIntent = false;
    /** A grant came back after its lease ran out: Redis may still keep that hold for a moment. */
    let lateGrant = false;
    let attempts = 0;
    let queued: Queued | undefined;
    ctx.cleanups.acquireStarted();
    try {
      for (;;) {
        ctx.assertOpen(context);
        if (signal?.aborted) throw aborted(signal, context);
        if (watch) {
          watch.woken = false;
          watch.handed.length = 0; // this try finds a handed hold anyway (a repeated acquire)
        }
        attempts++;
        if (trace) trace.attempts = attempts; // counted as each try starts: a subscriber sees a wait go on
        // The acquire's start stands for its first try's send, sparing a clock read per call: it is
        // earlier (that call may even wait for the server check), so a lease counted from it never
        // outlasts the server's.
        const sentAt = attempts === 1 ? started : performance.now();
        // One try, in this function: an async helper would add a promise and a microtask hop to every call.
        const sent = ctx.backend.acquire(request);
        let outcome: AcquireOutcome;
        try {
          outcome = await bound.race(sent);
        } catch (error) {
          const failure = this.tryFailed(request, context, bound, sent, error);
          // The server refused the try for a condition of its own (out of memory, busy, ...), before
          // it ran: a waiting acquire waits that out, and rejects with it only once waitMs is over.
          const left = deadline - performance.now();
          if (!(failure instanceof ServerRefusedError) || left <= 0) throw failure;
          // Out of memory, the server runs no try, but it keeps a writer's place (lua/keep-place.lua). A
          // place found gone may have been handed over since the last one known, which names that hand-over.
          if (leftIntent && failure instanceof ServerOutOfMemoryError) queued = (await this.keepPlace(request, bound, queued)) ?? queued;
          watch ??= await bound.race(ctx.wakeups.watch(keys.channel, Math.min(left, recheckMs), writer));
          await watch.sleep(Math.min(recheckMs, left), signal);
          let handed =
            queued && replicaAck === undefined && watch.handed.length > 0 ? this.takeHanded(request, queued, watch, signal) : undefined;
          if (handed instanceof Promise) handed = await handed;
          if (queued && handed) return this.handedLease(request, queued, handed, autoRenew, started, trace);
          continue;
        }
        const arrived = performance.now();
        if (outcome.granted && ranOutOnArrival(sentAt, outcome.leaseRemainingMs, arrived)) {
          // Its reply was held up past the lease: another owner may hold the lock by now. Try
          // again at once: Redis grants afresh, refuses, or (the hold still there) tells how long
          // it has left, counted from this new try.
          lateGrant = true;
          continue;
        }
        if (outcome.granted) {
          const lease = ctx.holdings.add(request, outcome, autoRenew, sentAt);
          ctx.telemetry.granted(lease, arrived - started);
          return lease;
        }
        if (attempts === 1) ctx.telemetry.contended(resource, mode, owner, outcome.reason, waitMs);
        leftIntent ||= mode === 'write' && request.waitBeatMs > 0;
        queued = outcome.queuedUntil === undefined ? undefined : { sentAt, until: outcome.queuedUntil };
        if (outcome.reason === 'upgrade') {
          throw new UpgradeConflictError(
            `cannot upgrade the read lock on "${resource}" to write: another reader is already waiting to upgrade, ` +
              'and waiting too would deadlock both; release this read lease, then acquire write',
            context,
          );
        }
        const left = deadline - performance.now(); // after the contended event's listeners ran
        if (left <= 0) throw new AcquireTimeoutError(waitMs, BLOCKED_BY[outcome.reason], context);
        if (!watch) {
          // Subscribe, then try again at once: a release between the failed try
          // and the subscription cannot be missed.
          watch = await bound.race(ctx.wakeups.watch(keys.channel, Math.min(left, recheckMs), writer));
          continue;
        }
        await watch.sleep(Math.min(outcome.retryAfterMs + 1, recheckMs, left), signal);
        // A release handed this writer the lock after its latest try queued (by that try's hold
        // id and heartbeat): it holds without another call. With replicaAck the next try waits
        // for the replicas instead; an acquire aborted meanwhile takes nothing (the loop's top
        // throws, and the hold is given back).
        // Taken in this turn when every node's message is in (one server or Cluster: always).
        let handed =
          queued && replicaAck === undefined && watch.handed.length > 0 ? this.takeHanded(request, queued, watch, signal) : undefined;
        if (handed instanceof Promise) handed = await handed;
        if (queued && handed) return this.handedLease(request, queued, handed, autoRenew, started, trace);
      }
    } catch (error) {
      ctx.telemetry.refused(error, waitMs > 0);
      // A writer that gives up leaves the queue, so nobody waits behind it for nothing
      // (best-effort within the bound; its place lapses by itself after waitBeatMs anyway),
      // and gives back the hold a release may have handed it meanwhile (named by its id);
      // so does an acquire whose grant came back too late, if Redis still keeps it.
      // An aborted or late acquire returns at once and leaves in the background.
      if ((leftIntent || lateGrant) && !ctx.redisClosed()) {
        const what = leftIntent
          ? `leaving the writers' queue of "${resource}" (its place lapses by itself)`
          : `giving back the ${mode} lock on "${resource}" whose grant came back after its lease (it expires by itself)`;
        const leaving = ctx.backend.abandon(keys, owner, request.holdId).catch((failure: unknown) => {
          ctx.telemetry.backgroundError(redisFailure(what, failure, context));
        });
        ctx.cleanups.track(leaving);
        await bound.race(leaving).catch(() => undefined);
      }
      throw error;
    } finally {
      ctx.cleanups.acquireEnded();
      watch?.close();
    }
  }

  /** The lease of a grant that releases handed this writer. */
  private handedLease(
    request: AcquireRequest,
    queued: Queued,
    handed: Handed,
    autoRenew: boolean,
    started: number,
    trace: AcquireTraceContext | undefined,
  ): Lease {
    const lease = this.ctx.holdings.add(request, { granted: true, ...handed }, autoRenew, queued.sentAt);
    this.ctx.telemetry.granted(lease, performance.now() - started);
    if (trace) trace.handed = true;
    return lease;
  }

  /**
   * Moves a waiting writer's queue heartbeat on while the server, out of
   * memory, refuses its tries: the place it queued at stays its own, and the
   * release that hands it the lock names the new heartbeat. Returns what a
   * queued try would have: undefined where no place is left to keep, and
   * `queued` (the latest try's) when the server did not answer.
   */
  private async keepPlace(request: AcquireRequest, bound: AcquireBound, queued: Queued | undefined): Promise<Queued | undefined> {
    const sentAt = performance.now();
    let until: readonly (number | undefined)[];
    try {
      until = await bound.race(this.ctx.backend.keepPlace(request));
    } catch {
      return queued;
    }
    return until.some((u) => u !== undefined) ? { sentAt, until } : undefined;
  }

  /**
   * The grant releases handed this writer, once enough nodes did: at once
   * (no promise, no turn of the microtask queue) when the messages in say so,
   * as on one server or a Cluster; in `redlock` mode the other nodes'
   * messages may follow the first by a little, and are waited for up to
   * {@link HANDED_GRACE_MS}.
   */
  private takeHanded(
    request: AcquireRequest,
    queued: Queued,
    watch: Watch,
    signal: AbortSignal | undefined,
  ): Handed | undefined | Promise<Handed | undefined> {
    const taken = this.takeHandedNow(request, queued, watch, signal);
    return taken === 'wait' ? this.waitForHanded(request, queued, watch, signal) : taken;
  }

  private takeHandedNow(
    request: AcquireRequest,
    queued: Queued,
    watch: Watch,
    signal: AbortSignal | undefined,
  ): Handed | undefined | 'wait' {
    return signal?.aborted
      ? undefined
      : this.ctx.backend.takeHanded(request, queued.until, watch.handed, performance.now() - queued.sentAt);
  }

  private async waitForHanded(
    request: AcquireRequest,
    queued: Queued,
    watch: Watch,
    signal: AbortSignal | undefined,
  ): Promise<Handed | undefined> {
    const graceEnds = performance.now() + HANDED_GRACE_MS;
    let taken: Handed | undefined | 'wait' = 'wait';
    while (taken === 'wait' && performance.now() < graceEnds) {
      watch.woken = false;
      await watch.sleep(graceEnds - performance.now(), signal);
      taken = this.takeHandedNow(request, queued, watch, signal);
    }
    return taken === 'wait' ? undefined : taken;
  }

  /**
   * A try failed. When its outcome is unknown (the call failed after it may
   * have run, or is still unanswered at the bound), whatever it took is given
   * back once Redis answers: this acquire's hold only, named by its id, so a
   * reentrant owner keeps the holds it had. Returns the error to throw.
   */
  private tryFailed(
    request: AcquireRequest,
    context: RWLockErrorContext,
    bound: AcquireBound,
    sent: Promise<AcquireOutcome>,
    error: unknown,
  ): Error {
    const failure = redisFailure(`acquiring the ${request.mode} lock on "${this.resource}"`, error, context);
    // Typed errors from the backend come with their own clean-up (ReplicaAckError, QuorumError); a
    // server's refusal for a condition of its own (out of memory, busy, ...) took nothing.
    if ((!(error instanceof RWLockError) || bound.caused(error)) && !(failure instanceof ServerRefusedError)) {
      undoWhenKnown(this.ctx, request, sent);
    }
    return failure;
  }
}

/** How far past `waitMs` an acquire may run while Redis does not answer its last call, in ms. */
export const ACQUIRE_SLACK_MS = 250;

/**
 * How long an acquire may take, whatever Redis or the network does: `waitMs`
 * plus a small slack for the call in flight at its end, but never less than
 * `redisTimeoutMs`, so that a try (or a short wait) still gets one answer
 * from a slow Redis; plus the replicas' acknowledgement timeout if asked for.
 */
export function acquireBoundMs(waitMs: number, redisTimeoutMs: number, replicaAckTimeoutMs: number): number {
  return Math.max(waitMs + Math.min(ACQUIRE_SLACK_MS, redisTimeoutMs), redisTimeoutMs) + replicaAckTimeoutMs;
}

/** The hard bound of one acquire: its waits on Redis end by `at`, or as soon as `signal` aborts. */
class AcquireBound implements BoundErrors {
  /** The last error this bound raised (each wait it ends gets a new one). */
  private raised: Error | undefined;

  constructor(
    private readonly ctx: LockContext,
    private readonly context: RWLockErrorContext,
    private readonly started: number,
    private readonly at: number,
    private readonly signal: AbortSignal | undefined,
  ) {}

  race<T>(promise: Promise<T>): Promise<T> {
    return this.ctx.deadlines.race(promise, this.at, this, this.signal);
  }

  /** True for the errors this bound raised. */
  caused(error: unknown): boolean {
    return error === this.raised;
  }

  late(): RedisUnavailableError {
    const { resource, mode } = this.context;
    return (this.raised = new RedisUnavailableError(
      `acquiring the ${mode} lock on "${resource}" failed: Redis did not answer within ${Math.round(this.at - this.started)} ms ` +
        `(waitMs + ${ACQUIRE_SLACK_MS} ms, at least redisTimeoutMs)${this.ctx.deadlines.trouble()}; nothing is held, and a grant that comes later is given back; ` +
        'the operation may be retried',
      this.context,
    ));
  }

  aborted(): AcquireAbortedError {
    return (this.raised = aborted(this.signal!, this.context));
  }

  closed(): ClientClosedError {
    const { resource, mode } = this.context;
    return (this.raised = new ClientClosedError(
      `acquiring the ${mode} lock on "${resource}" ended: this LockClient was closed while the acquire was in flight; ` +
        'nothing is held, and close() settles once a grant that comes later has been given back',
      this.context,
    ));
  }
}

/** Longest pause between two tries to give back a late or unknown grant, in ms. */
const UNDO_RETRY_MAX_MS = 2_000;

/**
 * Gives back what an acquire with an unknown outcome took, once that outcome
 * is known, however late: its hold if granted, its place in the writers'
 * queue if it queued. Retried while Redis does not answer, for as long as the
 * LockClient is open (a reentrant owner's renewal keeps its late hold alive
 * with the others), then until the grant would have expired by itself,
 * counted from when it was known; not once the Redis client is closed. The
 * undo names the hold, so running it more than once changes nothing. Runs in
 * the background, tracked so that `close()` waits for it.
 */
function undoWhenKnown(ctx: LockContext, request: AcquireRequest, sent: Promise<AcquireOutcome>): void {
  ctx.cleanups.track(undo(ctx, request, sent));
}

async function undo(ctx: LockContext, request: AcquireRequest, sent: Promise<AcquireOutcome>): Promise<void> {
  const tookSomething = await sent.then(
    (outcome) => outcome.granted || request.waitBeatMs > 0,
    () => true,
  );
  if (!tookSomething) return;
  const until = performance.now() + request.leaseMs;
  const worthTrying = () => !ctx.redisClosed() && (!ctx.closed() || performance.now() <= until);
  for (let delay = 50, reported = false; worthTrying(); delay = Math.min(2 * delay, UNDO_RETRY_MAX_MS)) {
    try {
      await ctx.backend.abandon(request.keys, request.owner, request.holdId);
      return;
    } catch (error) {
      // Another layout version's lock: the acquire was refused there too, and took nothing.
      if (error instanceof LayoutVersionError) return;
      if (!reported) {
        reported = true;
        const { resource, mode, owner } = request;
        const what = `giving back the ${mode} lock on "${resource}" that an acquire with an unknown outcome may hold (retried while this LockClient is open, then until it would expire by itself)`;
        ctx.telemetry.backgroundError(redisFailure(what, error, { resource, mode, owner }));
      }
      await sleep(delay, undefined, { ref: false });
    }
  }
}

function aborted(signal: AbortSignal, context: RWLockErrorContext): AcquireAbortedError {
  return new AcquireAbortedError(`acquiring the ${context.mode} lock on "${context.resource}" was aborted`, {
    ...context,
    cause: signal.reason,
  });
}

/** A failed acquire's outcome on the tracing channel. */
function outcomeOf(error: unknown, waiting: boolean): AcquireOutcomeName {
  if (error instanceof AcquireTimeoutError) return waiting ? 'timeout' : 'busy';
  if (error instanceof AcquireAbortedError) return 'aborted';
  if (error instanceof UpgradeConflictError) return 'conflict';
  return 'failed';
}

function nullIfTimeout(error: unknown): null {
  if (error instanceof AcquireTimeoutError) return null;
  throw error;
}
