import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { LockBackend, LockInfo } from './backends/backend.js';
import { evictionRisks, onEvictionRisk, warnOfEviction } from './backends/eviction.js';
import { createBackend } from './backends/index.js';
import { redlockClients } from './backends/redlock-nodes.js';
import { Cleanups } from './cleanups.js';
import { type Driver, driverFor, type LockRedisClient, notAClient } from './clients/index.js';
import { Deadlines } from './deadlines.js';
import {
  AcquireTimeoutError,
  ClientClosedError,
  type EvictionRisk,
  InvalidArgumentError,
  type LockLostError,
  LockNotHeldError,
  type RedisUnavailableError,
  type RWLockError,
  type RWLockErrorContext,
  serverRefusal,
} from './errors.js';
import { type ForcedRelease, forceReleaseOn, lockFootprint } from './force-release.js';
import { Holdings } from './holdings.js';
import { validatePrefix } from './keys/keys.js';
import type { Lease } from './lease.js';
import { LeaseGroup, type LockRequest, lossOf } from './lease-group.js';
import { type LockContext, RWLock } from './lock.js';
import { type ContentionInfo, type LockStats, Telemetry } from './observability/telemetry.js';
import {
  type AcquireOptions,
  duration,
  type LockClientOptions,
  ownOptions,
  type ResolvedClientOptions,
  resolveClientOptions,
} from './options.js';
import { runAsOwner } from './owner-context.js';
import { redisFailure } from './redis.js';
import { WakeupHub } from './wakeups.js';

/** Whether a client was closed (by its user); on every call's path, so no closure is made per call. */
const isClosed = (client: Driver): boolean => client.closed;

/**
 * The events a {@link LockClient} emits, with their arguments. The client
 * never emits `error`, so a process that listens for nothing cannot be
 * crashed by it: failures no call rejects with come as `renewalFailed`,
 * `subscriberError` and `backgroundError`.
 */
export interface LockClientEvents {
  /** A held lease was lost: its lock expired or was taken over before release. */
  lost: [error: LockLostError, leases: readonly Lease[]];
  /** An acquisition was granted, `waitedMs` after the call (the round trip included; to 0.1 ms, as every time in events and stats). */
  acquired: [lease: Lease, waitedMs: number];
  /** An acquisition found its lock taken (once per acquisition, at its first refusal); it waits, or a try gives up. */
  contended: [info: ContentionInfo];
  /** A lease was released, `heldMs` after its acquire was sent (to 0.1 ms). */
  released: [lease: Lease, heldMs: number];
  /**
   * A renewal round could not renew `leases` because Redis did not answer.
   * They are still held, and tried again soon, at most `redisTimeoutMs`
   * apart; if renewal does not come through before their deadline, `lost`
   * follows.
   */
  renewalFailed: [error: RedisUnavailableError, leases: readonly Lease[]];
  /**
   * A subscriber connection (wake-ups of waiting acquisitions) failed, or
   * subscribing to a lock's wake-ups did. The client library reconnects; meanwhile
   * waiters re-check every `recheckMs` instead of being woken.
   */
  subscriberError: [error: Error];
  /**
   * Background work failed that no call rejects with: giving back a grant that
   * arrived after its acquire gave up, leaving the writers' queue after a
   * timeout, releasing a lease after the `withRead`/`withWrite` function threw
   * (the function's error is the one thrown). What it left behind expires
   * by itself (within the lease, or the queue's heartbeat).
   */
  backgroundError: [error: RWLockError];
  /**
   * A master of this client's Redis may evict lock keys: `maxmemory` is set
   * and its `maxmemory-policy` is not `noeviction`. Found by the server check
   * at the first use, and again after a reconnect, a failover or a new
   * master; once per master and policy (again when its policy changes). A
   * LockClient made after its Redis client was checked hears of the masters
   * known just after it is made. With `onEvictionRisk: 'warn'` (the
   * default) the process is also warned (`RWLOCK_EVICTION_RISK`).
   */
  evictionRisk: [risk: EvictionRisk];
}

/**
 * Read-write locks on one Redis server or Redis Cluster, through the Redis
 * client you pass: ioredis 5 or 6 (or iovalkey), node-redis 5 or 6 (connected
 * first), or GLIDE 2 (`GlideClient`, `GlideClusterClient`). The LockClient
 * never closes it. Create one per process
 * and client, and `close()` it on shutdown. In `redlock` mode, pass an array
 * of clients, one per independent server or Cluster (at least 3).
 */
export class LockClient extends EventEmitter {
  /** The options in force, defaults filled in. */
  readonly options: ResolvedClientOptions;
  private readonly ctx: LockContext;
  private readonly clients: readonly Driver[];
  private isClosedFlag = false;
  private readonly telemetry: Telemetry;
  /** Stops hearing of the masters that may evict lock keys. */
  private readonly unwatchEviction: readonly (() => void)[];

  constructor(redis: LockRedisClient | readonly LockRedisClient[], options?: LockClientOptions) {
    super();
    const redlock = (options as { mode?: unknown } | undefined)?.mode === 'redlock';
    if (Array.isArray(redis) && !redlock) {
      throw new InvalidArgumentError(
        'redis',
        'an array of clients is for mode "redlock" (a majority of independent servers); pass { mode: \'redlock\' }',
      );
    }
    const driver = redlock ? undefined : driverFor(redis);
    if (!redlock && !driver) throw new InvalidArgumentError('redis', notAClient(redis));
    const clients = redlock ? redlockClients(redis) : [driver!];
    const prefixed = clients.find((client) => client.keyPrefix !== '');
    if (prefixed) {
      const prefix = JSON.stringify(prefixed.keyPrefix);
      throw new InvalidArgumentError(
        'redis',
        `has keyPrefix ${prefix}, which ioredis adds to a command's keys but not to the key names redis-rwlock passes as ` +
          'arguments (renewal would lose every lease); pass a client created without keyPrefix, and keep the namespace ' +
          `with LockClient's prefix option: { prefix: ${JSON.stringify(`${prefixed.keyPrefix}rwlock`)} }`,
      );
    }
    if (clients.some(isClosed)) {
      throw new ClientClosedError('the Redis client passed to LockClient is closed (node-redis: or not yet connected); pass an open one');
    }
    this.clients = clients;
    this.options = resolveClientOptions(options, validatePrefix);
    const cleanups = new Cleanups();
    const backend: LockBackend = createBackend(redlock ? clients : clients[0]!, this.options, cleanups);
    const deadlines = new Deadlines(() => {
      for (const client of clients) {
        const why = client.connectionTrouble?.();
        if (why !== undefined) return why;
      }
      return undefined;
    });
    const telemetry = (this.telemetry = new Telemetry(this));
    const warns = this.options.onEvictionRisk === 'warn';
    this.unwatchEviction = clients.map((client) =>
      onEvictionRisk(client, (risk) => {
        if (warns) warnOfEviction(risk);
        telemetry.evictionRisk(risk);
      }),
    );
    const holdings = new Holdings(
      backend,
      this.options.leaseMs,
      ({ error, leases }) => telemetry.lost(error, leases),
      deadlines,
      this.options.redisTimeoutMs,
      telemetry,
      cleanups,
    );
    // Hold ids: this client's random id, a dot and a counter (unique across clients and processes).
    // A release that hands a lock over reads the id from the hold id, to message this client alone.
    const clientId = randomBytes(6).toString('base64url');
    let holdCount = 0;
    this.ctx = {
      options: this.options,
      backend,
      holdings,
      wakeups: new WakeupHub(
        clients,
        {
          message: () => telemetry.wakeup(),
          unconfirmed: () => telemetry.pollingFallback(),
          // A subscription the server refused for a condition of its own (BUSY, LOADING, maxclients) says so.
          error: (error) => telemetry.subscriberError(serverRefusal('subscribing to wake-ups', error.message, { cause: error }) ?? error),
        },
        backend.handsOver ? clientId : undefined,
        this.options.linkCheckMs,
      ),
      deadlines,
      assertOpen: (context) => this.assertOpen(context),
      redisClosed: () => this.clients.some(isClosed),
      closed: () => this.isClosedFlag,
      nextHoldId: () => `${clientId}.${(holdCount++).toString(36)}`,
      telemetry,
      cleanups,
    };
  }

  /** True once `close()` was called. */
  get closed(): boolean {
    return this.isClosedFlag;
  }

  /**
   * The read-write lock of `resource`. Made anew on every call (about
   * 0.3 µs), which costs less than a cache of recent locks would: the cache
   * keeps the garbage collector busy (1.3 µs on a new name).
   */
  lock(resource: string): RWLock {
    this.assertOpen({ resource });
    return new RWLock(this.ctx, resource);
  }

  /**
   * Runs `fn` under a read lease of `resource` and releases it afterwards.
   * The lease (with its loss `signal`) is passed to `fn`; nested calls on the
   * same resource inside `fn` reuse its owner.
   */
  withRead<T>(resource: string, fn: (lease: Lease) => Promise<T> | T, options?: AcquireOptions): Promise<T> {
    return this.withLease(this.lock(resource), 'read', fn, options);
  }

  /** Runs `fn` under the write lease of `resource`; see {@link withRead}. */
  withWrite<T>(resource: string, fn: (lease: Lease) => Promise<T> | T, options?: AcquireOptions): Promise<T> {
    return this.withLease(this.lock(resource), 'write', fn, options);
  }

  /**
   * Takes several locks at once without deadlock. Every process takes them
   * in one canonical order (by the Redis key of each lock, the same in every
   * process with the same prefix), whatever the order of `requests`, so two
   * callers that want overlapping sets never each hold what the other waits
   * for. `waitMs` and `signal` bound the whole set; if any lock cannot be
   * had (timeout, abort, error) or one taken earlier is lost meanwhile,
   * the locks already taken are released before it rejects.
   *
   * The usual options apply to every lock (`owner`: by default each lock's
   * own, as for `acquireRead`/`acquireWrite`). The leases come back in the
   * order of `requests`. A lock held outside the set by the same caller
   * breaks the ordering: take every lock you need in one call.
   *
   * @example
   * ```ts
   * await using accounts = await locks.acquireAll([
   *   { resource: 'acct:1', mode: 'write' },
   *   { resource: 'acct:2', mode: 'write' },
   * ]);
   * ```
   */
  async acquireAll(requests: readonly LockRequest[], options?: AcquireOptions): Promise<LeaseGroup> {
    const steps = this.plan(requests);
    const o = ownOptions(options, ['waitMs', 'signal', 'leaseMs', 'owner', 'replicaAck'], 'options');
    const waitMs = o.waitMs === undefined ? this.options.waitMs : duration('waitMs', o.waitMs, 0);
    const signal = o.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw new InvalidArgumentError('signal', 'must be an AbortSignal');
    const deadline = performance.now() + waitMs;
    const leases: Lease[] = new Array<Lease>(steps.length);
    const taken: Lease[] = [];
    try {
      for (const { lock, mode, index } of steps) {
        // A lease taken earlier and lost meanwhile ends the wait for the next one.
        const signals = signal ? [signal, ...taken.map((l) => l.signal)] : taken.map((l) => l.signal);
        const one: AcquireOptions = {
          ...(o as AcquireOptions),
          waitMs: Math.max(0, Math.floor(deadline - performance.now())),
          signal: signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : AbortSignal.any(signals),
        };
        const lease = await (mode === 'read' ? lock.acquireRead(one) : lock.acquireWrite(one));
        taken.push(lease);
        leases[index] = lease;
      }
    } catch (error) {
      const lost = lossOf(taken);
      await this.releaseAll(taken);
      if (lost !== undefined) throw lost;
      if (error instanceof AcquireTimeoutError) {
        throw new AcquireTimeoutError(
          waitMs,
          `waiting for it after ${taken.length} of the set's ${steps.length} locks; those were released`,
          { resource: error.resource, mode: error.mode, owner: error.owner, cause: error },
        );
      }
      throw error;
    }
    const lost = lossOf(taken);
    if (lost !== undefined) {
      await this.releaseAll(taken);
      throw lost;
    }
    return new LeaseGroup(leases);
  }

  /**
   * Runs `fn` under every lock of `requests`, taken without deadlock as by
   * {@link acquireAll}, and releases them afterwards. Nested
   * `withRead`/`withWrite` calls on any of them inside `fn` reuse its owner.
   *
   * @example
   * ```ts
   * await locks.withLocks(
   *   [{ resource: 'acct:1', mode: 'write' }, { resource: 'acct:2', mode: 'write' }],
   *   async (accounts) => transfer(from, to, amount, { signal: accounts.signal }),
   * );
   * ```
   */
  async withLocks<T>(requests: readonly LockRequest[], fn: (group: LeaseGroup) => Promise<T> | T, options?: AcquireOptions): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', 'must be a function');
    const group = await this.acquireAll(requests, options);
    let result: T;
    try {
      const run = group.leases.reduceRight<() => Promise<T>>(
        (inner, lease) => () => runAsOwner(this.lock(lease.resource).keys.state, lease.token, inner),
        async () => fn(group),
      );
      result = await run();
    } catch (error) {
      await group.release().catch((failure: unknown) => {
        // fn's error matters more; a lost lease was reported by `lost`
        if (!(failure instanceof LockNotHeldError))
          this.telemetry.backgroundError(redisFailure('releasing a set of locks after the function threw', failure, {}));
      });
      throw error;
    }
    await group.release(); // a lost lease rejects here: fn's work was not fully protected
    return result;
  }

  /** Runs `fn` under the write locks of every resource in `resources`; see {@link withLocks}. */
  withWriteAll<T>(resources: readonly string[], fn: (group: LeaseGroup) => Promise<T> | T, options?: AcquireOptions): Promise<T> {
    if (!Array.isArray(resources)) return Promise.reject(new InvalidArgumentError('resources', 'must be an array of resource names'));
    return this.withLocks(
      resources.map((resource: string) => ({ resource, mode: 'write' as const })),
      fn,
      options,
    );
  }

  // The base is Node's plain EventEmitter, not `EventEmitter<LockClientEvents>`: @types/node changed
  // the typed one's method signatures in 25 and again in 26, and no override of them in the declarations
  // compiles with every version from 20 on (TS2416). These type the events for every version: a
  // misspelt event is an error on the name, and a known one types its listener's arguments.
  /** Listens for one of the {@link LockClientEvents}. */
  override on<E extends keyof LockClientEvents>(event: E, listener: (...args: LockClientEvents[E]) => void): this {
    return super.on(event, listener as never);
  }
  /** Listens for the next one of the {@link LockClientEvents} of that name. */
  override once<E extends keyof LockClientEvents>(event: E, listener: (...args: LockClientEvents[E]) => void): this {
    return super.once(event, listener as never);
  }
  /** Same as {@link LockClient.on}. */
  override addListener<E extends keyof LockClientEvents>(event: E, listener: (...args: LockClientEvents[E]) => void): this {
    return super.addListener(event, listener as never);
  }
  /** Stops a listener. */
  override off<E extends keyof LockClientEvents>(event: E, listener: (...args: LockClientEvents[E]) => void): this {
    return super.off(event, listener as never);
  }
  /** Same as {@link LockClient.off}. */
  override removeListener<E extends keyof LockClientEvents>(event: E, listener: (...args: LockClientEvents[E]) => void): this {
    return super.removeListener(event, listener as never);
  }

  /**
   * A snapshot of this client's counters since it was made: acquisitions
   * and how they ended, waits and a wait-time histogram, releases, losses,
   * leases held, renewals, wake-ups, fallbacks to polling. Cheap (the
   * counters are kept on every path anyway); poll it for metrics.
   */
  stats(): LockStats {
    return this.telemetry.snapshot(this.ctx.holdings.leases, this.clients.flatMap(evictionRisks));
  }

  /**
   * The current state of `resource`'s lock, read atomically. A lock with more
   * holders and waiters than one call of bounded server time reads (about a
   * hundred) is read in several such calls: each entry as its call found it.
   */
  inspect(resource: string): Promise<LockInfo> {
    return this.lock(resource).inspect();
  }

  /**
   * An operator's tool, for a lock whose holder died and whose lease is too
   * long to wait out: deletes every key of `resource`'s lock whoever holds
   * it (in legacy and bridge mode the legacy keys too), in one script, and
   * wakes its waiters. What `redis-rwlock release --force` does.
   *
   * Hazards: holders are not told. A LockClient finds its lease lost at its
   * next renewal (`LockLostError`, its `signal` aborts) and until then may
   * act as if it held the lock, so a live holder and the next one overlap;
   * fencing tokens (see `fencedSet`) are what refuses the stale one's
   * writes. Old two-key processes are not told at all. Use it on a lock
   * whose holder you know is gone. Repeating it deletes nothing more.
   * Settles within `redisTimeoutMs` (rejects with `RedisUnavailableError`).
   */
  async forceRelease(resource: string): Promise<ForcedRelease> {
    const lock = this.lock(resource);
    const context = { resource };
    const { names, channels } = lockFootprint(lock.keys, this.options.prefix);
    try {
      const deleting = Promise.all(this.clients.map((client) => forceReleaseOn(client, names, channels)));
      const deleted = await this.ctx.deadlines.within(deleting, this.options.redisTimeoutMs, 'force-releasing', context);
      return { resource, deleted: [...new Set(deleted.flat())] };
    } catch (error) {
      throw redisFailure(`force-releasing the lock on "${resource}"`, error, context);
    }
  }

  /**
   * Stops renewal, releases every lease still held (best-effort), ends the
   * acquires in flight with `ClientClosedError` (waits and calls on the
   * wire alike), closes the subscriber connections, and settles once every
   * such acquire has settled and what it took (a grant that lands late, a
   * place in the writers' queue) has been given back, waiting at most
   * `redisTimeoutMs` for Redis (a grant that lands later still is given
   * back then). Quitting the Redis client after it then leaves nothing
   * held. The Redis client passed in stays open.
   */
  async close(): Promise<void> {
    if (this.isClosedFlag) return;
    this.isClosedFlag = true;
    const { holdings, deadlines, cleanups, options, wakeups } = this.ctx;
    for (const unwatch of this.unwatchEviction) unwatch();
    wakeups.close();
    deadlines.close();
    // The acquires just ended give back what they took meanwhile: wait for that too, up to redisTimeoutMs.
    const givenBack = deadlines.within(cleanups.settled(), options.redisTimeoutMs, 'giving back what ended acquires took', {});
    await Promise.all([holdings.close(), givenBack.catch(() => undefined)]);
    // Settled: no optional clean-up still queued goes out after this (a bound's timer may fire a ms early).
    cleanups.closed();
  }

  private async withLease<T>(
    lock: RWLock,
    mode: 'read' | 'write',
    fn: (lease: Lease) => Promise<T> | T,
    options: AcquireOptions | undefined,
  ): Promise<T> {
    if (typeof fn !== 'function') {
      const call = mode === 'read' ? 'withRead' : 'withWrite';
      const reason =
        typeof options === 'function'
          ? `must be the second argument: ${call}(resource, fn, options), the options last (not redlock's (resource, options, fn))`
          : 'must be a function';
      throw new InvalidArgumentError('fn', reason, { resource: lock.resource, mode });
    }
    const lease = await (mode === 'read' ? lock.acquireRead(options) : lock.acquireWrite(options));
    let result: T;
    try {
      result = await runAsOwner(lock.keys.state, lease.token, async () => fn(lease));
    } catch (error) {
      await lease.release().catch((failure: unknown) => {
        // fn's error matters more; a lost lease was reported by `lost`
        if (failure instanceof LockNotHeldError) return;
        const context = { resource: lock.resource, mode, owner: lease.token };
        this.telemetry.backgroundError(
          redisFailure(`releasing the ${mode} lock on "${lock.resource}" after the function threw`, failure, context),
        );
      });
      throw error;
    }
    await lease.release(); // a lost lease rejects here: fn's work was not fully protected
    return result;
  }

  /**
   * Releases what a failed `acquireAll` took, the last taken first; a failure
   * goes to `backgroundError` (the lease lapses by itself), a lost lease was
   * reported by `lost`.
   */
  private async releaseAll(leases: readonly Lease[]): Promise<void> {
    for (const lease of [...leases].reverse()) {
      await lease.release().catch((failure: unknown) => {
        if (failure instanceof LockNotHeldError) return;
        const context = { resource: lease.resource, mode: lease.mode, owner: lease.token };
        this.telemetry.backgroundError(
          redisFailure(`releasing the ${lease.mode} lock on "${lease.resource}" of a set that could not be taken whole`, failure, context),
        );
      });
    }
  }

  /** The locks of `requests` in the canonical order (by state key), each with its index in `requests`. */
  private plan(requests: unknown): { lock: RWLock; mode: 'read' | 'write'; index: number }[] {
    if (!Array.isArray(requests) || requests.length === 0) {
      throw new InvalidArgumentError('requests', 'must be a non-empty array of { resource, mode }');
    }
    const steps = (requests as unknown[]).map((request, index) => {
      if (request === null || typeof request !== 'object') {
        throw new InvalidArgumentError(`requests[${index}]`, 'must be an object { resource, mode }');
      }
      const { resource, mode } = request as { resource?: unknown; mode?: unknown };
      if (typeof resource !== 'string') throw new InvalidArgumentError(`requests[${index}].resource`, 'must be a string');
      if (mode !== 'read' && mode !== 'write') {
        throw new InvalidArgumentError(`requests[${index}].mode`, 'must be "read" or "write"', { resource });
      }
      return { lock: this.lock(resource), mode: mode as 'read' | 'write', index };
    });
    steps.sort((a, b) => (a.lock.keys.state < b.lock.keys.state ? -1 : a.lock.keys.state > b.lock.keys.state ? 1 : 0));
    for (let i = 1; i < steps.length; i++) {
      const [a, b] = [steps[i - 1]!.lock, steps[i]!.lock];
      if (a.keys.state === b.keys.state) {
        throw new InvalidArgumentError(
          'requests',
          `"${a.resource}" and "${b.resource}" are the same lock (key ${a.keys.state}); ask for it once, in write mode if either needs to write`,
          { resource: b.resource },
        );
      }
    }
    return steps;
  }

  private assertOpen(context: RWLockErrorContext): void {
    if (this.isClosedFlag) throw new ClientClosedError('this LockClient is closed; create a new one', context);
    if (this.clients.some(isClosed)) {
      throw new ClientClosedError('the Redis client under this LockClient is closed; pass an open one', context);
    }
  }
}
