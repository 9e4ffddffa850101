import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { LockBackend, LockInfo } from './backend.js';
import {
  ClientClosedError,
  InvalidArgumentError,
  LockNotHeldError,
  type LockLostError,
  type RedisUnavailableError,
  type RWLockError,
  type RWLockErrorContext,
} from './errors.js';
import { Holdings } from './holdings.js';
import { Deadlines } from './deadlines.js';
import { createBackend } from './modes.js';
import { validatePrefix } from './keys.js';
import type { Lease } from './lease.js';
import { RWLock, type LockContext } from './lock.js';
import { resolveClientOptions, type AcquireOptions, type LockClientOptions, type ResolvedClientOptions } from './options.js';
import { runAsOwner } from './owner-context.js';
import { Telemetry, type ContentionInfo, type LockStats } from './observability/telemetry.js';
import { isClosed, isUsableClient, redisFailure, type RedisClient } from './redis.js';
import { redlockClients } from './redlock-backend.js';
import { WakeupHub } from './wakeups.js';

/** How many locks `lock()` keeps for reuse; past that it starts over (a few hundred KB at most). */
const RECENT_LOCKS = 1024;

/**
 * The events a {@link LockClient} emits, with their arguments. The client
 * never emits `error`, so a process that listens for nothing cannot be
 * crashed by it: failures no call rejects with come as `renewalFailed`,
 * `subscriberError` and `backgroundError`.
 */
export interface LockClientEvents {
  /** A held lease was lost: its lock expired or was taken over before release. */
  lost: [error: LockLostError, leases: readonly Lease[]];
  /** An acquisition was granted, `waitedMs` after the call (the round trip included). */
  acquired: [lease: Lease, waitedMs: number];
  /** An acquisition found its lock taken (once per acquisition, at its first refusal); it waits, or a try gives up. */
  contended: [info: ContentionInfo];
  /** A lease was released, `heldMs` after its acquire was sent. */
  released: [lease: Lease, heldMs: number];
  /**
   * A renewal round could not renew `leases` because Redis did not answer.
   * They are still held, and renewed next round (every `leaseMs / 3`); if
   * renewal does not come through before their deadline, `lost` follows.
   */
  renewalFailed: [error: RedisUnavailableError, leases: readonly Lease[]];
  /**
   * A subscriber connection (wake-ups of waiting acquisitions) failed, or
   * subscribing to a lock's wake-ups did. ioredis reconnects; meanwhile
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
}

/**
 * Read-write locks on one Redis server or Redis Cluster, through the ioredis
 * client you pass (the LockClient never closes it). Create one per process
 * and client, and `close()` it on shutdown. In `redlock` mode, pass an array
 * of clients, one per independent server or Cluster (at least 3).
 */
export class LockClient extends EventEmitter<LockClientEvents> {
  /** The options in force, defaults filled in. */
  readonly options: ResolvedClientOptions;
  private readonly ctx: LockContext;
  private readonly clients: readonly RedisClient[];
  private isClosedFlag = false;
  /** Recently used locks by resource: a lock is immutable, and reusing one skips validating and hashing the name. */
  private readonly recentLocks = new Map<string, RWLock>();
  private readonly telemetry: Telemetry;

  constructor(redis: RedisClient | readonly RedisClient[], options?: LockClientOptions) {
    super();
    const redlock = (options as { mode?: unknown } | undefined)?.mode === 'redlock';
    if (Array.isArray(redis) && !redlock) {
      throw new InvalidArgumentError('redis', 'an array of clients is for mode "redlock" (a majority of independent servers); pass { mode: \'redlock\' }');
    }
    if (!redlock && !isUsableClient(redis)) {
      throw new InvalidArgumentError('redis', 'must be an ioredis Redis or Cluster instance');
    }
    const clients = redlock ? redlockClients(redis) : [redis as RedisClient];
    if (clients.some(isClosed)) {
      throw new ClientClosedError('the ioredis client passed to LockClient is closed; pass an open one');
    }
    this.clients = clients;
    this.options = resolveClientOptions(options, validatePrefix);
    const backend: LockBackend = createBackend(redlock ? clients : clients[0]!, this.options);
    const deadlines = new Deadlines();
    const telemetry = (this.telemetry = new Telemetry(this));
    const holdings = new Holdings(
      backend,
      this.options.leaseMs,
      ({ error, leases }) => telemetry.lost(error, leases),
      deadlines,
      this.options.redisTimeoutMs,
      telemetry,
    );
    // Hold ids: this client's random prefix and a counter (unique across clients and processes).
    const holdIdPrefix = randomBytes(6).toString('base64url');
    let holdCount = 0;
    this.ctx = {
      options: this.options,
      backend,
      holdings,
      wakeups: new WakeupHub(clients, {
        message: () => telemetry.wakeup(),
        unconfirmed: () => telemetry.pollingFallback(),
        error: (error) => telemetry.subscriberError(error),
      }),
      deadlines,
      assertOpen: (context) => this.assertOpen(context),
      redisClosed: () => this.clients.some(isClosed),
      nextHoldId: () => holdIdPrefix + (holdCount++).toString(36),
      telemetry,
    };
  }

  /** True once `close()` was called. */
  get closed(): boolean {
    return this.isClosedFlag;
  }

  /** The read-write lock of `resource`. */
  lock(resource: string): RWLock {
    this.assertOpen({ resource });
    let lock = this.recentLocks.get(resource);
    if (!lock) {
      lock = new RWLock(this.ctx, resource);
      if (this.recentLocks.size >= RECENT_LOCKS) this.recentLocks.clear();
      this.recentLocks.set(resource, lock);
    }
    return lock;
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
   * A snapshot of this client's counters since it was made: acquisitions
   * and how they ended, waits and a wait-time histogram, releases, losses,
   * leases held, renewals, wake-ups, fallbacks to polling. Cheap (the
   * counters are kept on every path anyway); poll it for metrics.
   */
  stats(): LockStats {
    return this.telemetry.snapshot(this.ctx.holdings.leases);
  }

  /** The current state of `resource`'s lock, read atomically. */
  inspect(resource: string): Promise<LockInfo> {
    return this.lock(resource).inspect();
  }

  /**
   * Stops renewal, releases every lease still held (best-effort), ends the
   * waits in progress with `ClientClosedError`, and closes the subscriber
   * connections. The ioredis client passed in stays open.
   */
  async close(): Promise<void> {
    if (this.isClosedFlag) return;
    this.isClosedFlag = true;
    this.ctx.wakeups.close();
    await this.ctx.holdings.close();
  }

  private async withLease<T>(
    lock: RWLock,
    mode: 'read' | 'write',
    fn: (lease: Lease) => Promise<T> | T,
    options: AcquireOptions | undefined,
  ): Promise<T> {
    if (typeof fn !== 'function') {
      throw new InvalidArgumentError('fn', 'must be a function', { resource: lock.resource, mode });
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
        this.telemetry.backgroundError(redisFailure(`releasing the ${mode} lock on "${lock.resource}" after the function threw`, failure, context));
      });
      throw error;
    }
    await lease.release(); // a lost lease rejects here: fn's work was not fully protected
    return result;
  }

  private assertOpen(context: RWLockErrorContext): void {
    if (this.isClosedFlag) throw new ClientClosedError('this LockClient is closed; create a new one', context);
    if (this.clients.some(isClosed)) {
      throw new ClientClosedError('the ioredis client under this LockClient is closed; pass an open one', context);
    }
  }
}
