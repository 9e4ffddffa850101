/**
 * The library's `node:diagnostics_channel` tracing channels, the way mysql2
 * and undici publish theirs: APM agents and OpenTelemetry instrumentations
 * subscribe by name, with no dependency between them and the library.
 *
 * Each is a `TracingChannel`, so a subscriber listens on
 * `tracing:redis-rwlock:acquire:start`, `...:end`, `...:asyncStart`,
 * `...:asyncEnd` and `...:error` (or on all of them at once with
 * `diagnostics_channel.tracingChannel('redis-rwlock:acquire').subscribe({...})`).
 * Every event of one operation gets the same context object; its fields are
 * filled in as they become known, so read the outcome at `asyncEnd` (or
 * `error`). The operation runs inside `start.runStores(context)`, so a store
 * bound to `start` (an AsyncLocalStorage holding the current span) is in
 * force for the Redis calls the operation makes.
 *
 * Nothing is published, and no context object is made, while nobody
 * subscribes: the library checks the channels' `hasSubscribers` first.
 */
import { tracingChannel } from 'node:diagnostics_channel';
import type { LockMode } from '../errors.js';

/** The names of the library's tracing channels (subscribe to `tracing:<name>:start` and so on). */
export const TRACING_CHANNELS = Object.freeze({
  /** One acquisition (`acquireRead`, `acquireWrite`, `tryAcquire*`, and each lock of `withLocks`), from the call to its grant or failure. */
  acquire: 'redis-rwlock:acquire',
  /** One `lease.release()`. */
  release: 'redis-rwlock:release',
  /** One `lease.extend()`. */
  extend: 'redis-rwlock:extend',
  /** One round of automatic renewal (every auto-renewed lease of the client, in calls of at most about 250 µs of server time each, per Redis node). */
  renew: 'redis-rwlock:renew',
} as const);

/**
 * How an acquisition ended: `granted`; `timeout` (`waitMs` ran out,
 * `AcquireTimeoutError`); `busy` (a `tryAcquire*` found the lock taken and
 * resolved with null); `aborted` (its signal, `AcquireAbortedError`);
 * `conflict` (`UpgradeConflictError`); `failed` (any other error: Redis
 * unavailable, client closed, bad options).
 */
export type AcquireOutcomeName = 'granted' | 'timeout' | 'busy' | 'aborted' | 'conflict' | 'failed';

/** The context of the `redis-rwlock:acquire` channel's events. */
export interface AcquireTraceContext {
  /** The resource name. */
  readonly resource: string;
  /** `read` or `write`. */
  readonly mode: LockMode;
  /** True for `acquireRead`/`acquireWrite` (they wait up to `waitMs`), false for the `tryAcquire*` calls. */
  readonly waiting: boolean;
  /** The owner token; set once the options are read, before the first call to Redis. */
  owner: string | undefined;
  /** How long the acquisition took from the call to its grant or failure, in ms; set at the end. */
  waitedMs: number;
  /** How many times it asked Redis (1 when the lock was free at once), counted as each try starts (a try may first wait for the server check, or for the eviction check with `onEvictionRisk: 'refuse'`). */
  attempts: number;
  /** How it ended; set at the end. */
  outcome: AcquireOutcomeName | undefined;
  /** The grant's fencing token, when granted. */
  fence: number | undefined;
  /** True when a release handed this waiting writer the lock: the wake-up message was the grant, with no further try. */
  handed: boolean;
  /** Set by `diagnostics_channel` when it fails: the error it rejects with (a `busy` try resolves with null instead). */
  error?: unknown;
  /** Set by `diagnostics_channel` when it settles successfully: the `Lease` (or null for a `busy` try). */
  result?: unknown;
}

/**
 * How a release or an extension ended: `released` / `extended`; `not-held`
 * (the lease was lost or already gone, `LockNotHeldError` or `LockLostError`);
 * `failed` (Redis unavailable: the outcome is unknown, or the client closed).
 */
export type LeaseOutcomeName = 'released' | 'extended' | 'not-held' | 'failed';

/** The context of the `redis-rwlock:release` and `redis-rwlock:extend` channels' events. */
export interface LeaseTraceContext {
  /** The resource name. */
  readonly resource: string;
  /** The lease's mode. */
  readonly mode: LockMode;
  /** The lease's owner token. */
  readonly owner: string;
  /** The lease's fencing token. */
  readonly fence: number;
  /** How long the lease had been held when the operation started, in ms. */
  readonly heldMs: number;
  /** How it ended; set at the end. */
  outcome: LeaseOutcomeName | undefined;
  /** Set by `diagnostics_channel` when it fails. */
  error?: unknown;
  /** Set by `diagnostics_channel` when it settles successfully. */
  result?: unknown;
}

/** The context of the `redis-rwlock:renew` channel's events: one renewal round. */
export interface RenewTraceContext {
  /** Holdings (lock and owner pairs; reentrant leases renew together) the round renews. */
  holdings: number;
  /** Of those, renewed. */
  renewed: number;
  /** Of those, found no longer held (each is reported as lost). */
  lost: number;
  /** Of those, not renewed this round because Redis could not be asked (tried again 25 ms later, then twice as long after each miss, at most `redisTimeoutMs`). */
  unreached: number;
  /** Script calls the round made, every node together (each stops after about 250 µs of server time). */
  calls: number;
  /** Set by `diagnostics_channel` when the round's call failed as a whole (the round's error; nothing is thrown to the caller). */
  error?: unknown;
  /** Set by `diagnostics_channel` when it settles. */
  result?: unknown;
}

/**
 * What the library uses of a `node:diagnostics_channel` `TracingChannel`
 * with context `C`. Its own type, not Node's: `@types/node` 26 swapped
 * `TracingChannel`'s two type parameters (store, context became context,
 * store), so no spelling of `TracingChannel<...>` in the declarations
 * compiles with every `@types/node` from 20 on.
 * @internal
 */
export interface LockTracingChannel<C extends object> {
  readonly start: { readonly hasSubscribers: boolean };
  readonly end: { readonly hasSubscribers: boolean };
  readonly asyncStart: { readonly hasSubscribers: boolean };
  readonly asyncEnd: { readonly hasSubscribers: boolean };
  readonly error: { readonly hasSubscribers: boolean; publish(message: C): void };
  tracePromise<T>(fn: () => Promise<T>, context: C): Promise<T>;
}

function channel<C extends object>(name: string): LockTracingChannel<C> {
  return tracingChannel(name) as unknown as LockTracingChannel<C>;
}

/** @internal */
export const acquireChannel: LockTracingChannel<AcquireTraceContext> = channel(TRACING_CHANNELS.acquire);
/** @internal */
export const releaseChannel: LockTracingChannel<LeaseTraceContext> = channel(TRACING_CHANNELS.release);
/** @internal */
export const extendChannel: LockTracingChannel<LeaseTraceContext> = channel(TRACING_CHANNELS.extend);
/** @internal */
export const renewChannel: LockTracingChannel<RenewTraceContext> = channel(TRACING_CHANNELS.renew);

/**
 * True when anyone listens on any of `channel`'s five channels. (Node 20.13
 * and later have `TracingChannel.hasSubscribers`; this works on every Node 20.)
 * @internal
 */
export function traced(channel: LockTracingChannel<object>): boolean {
  return (
    channel.start.hasSubscribers ||
    channel.end.hasSubscribers ||
    channel.asyncStart.hasSubscribers ||
    channel.asyncEnd.hasSubscribers ||
    channel.error.hasSubscribers
  );
}
