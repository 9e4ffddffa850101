/**
 * Every error the library throws is an {@link RWLockError}; each subclass says
 * what happened and, in its message, what to do about it.
 */

/** The mode of a hold, as stored in Redis. */
export type LockMode = 'read' | 'write';

/** Context carried by every {@link RWLockError}. */
export interface RWLockErrorContext {
  /** The resource name passed to `lock()`, when the error concerns one lock. */
  resource?: string | undefined;
  /** The mode of the acquisition or lease concerned. */
  mode?: LockMode | undefined;
  /** The owner token concerned. */
  owner?: string | undefined;
  /** The underlying error, if any. */
  cause?: unknown;
}

/** Base class of every error thrown by redis-rwlock. */
export class RWLockError extends Error {
  readonly resource: string | undefined;
  readonly mode: LockMode | undefined;
  readonly owner: string | undefined;

  constructor(message: string, context: RWLockErrorContext = {}) {
    super(message, context.cause === undefined ? undefined : { cause: context.cause });
    this.name = new.target.name;
    this.resource = context.resource;
    this.mode = context.mode;
    this.owner = context.owner;
    Error.captureStackTrace?.(this, new.target);
  }
}

/** A bad argument or option; nothing was sent to Redis. */
export class InvalidArgumentError extends RWLockError {
  /** The name of the offending argument or option. */
  readonly argument: string;

  constructor(argument: string, message: string, context: RWLockErrorContext = {}) {
    super(`${argument}: ${message}`, context);
    this.argument = argument;
  }
}

/** The keys or channel of one lock would land in different Cluster slots. */
export class CrossSlotError extends RWLockError {}

/** An acquisition did not succeed within `waitMs`. */
export class AcquireTimeoutError extends RWLockError {
  readonly waitMs: number;

  constructor(waitMs: number, reason: string, context: RWLockErrorContext) {
    super(
      `could not acquire the ${context.mode} lock on "${context.resource}" within ${waitMs} ms (${reason}); ` +
        'raise waitMs, or find the holder with LockClient.inspect()',
      context,
    );
    this.waitMs = waitMs;
  }
}

/** An acquisition was aborted through its AbortSignal; `cause` is the signal's reason. */
export class AcquireAbortedError extends RWLockError {}

/**
 * A reader asked to upgrade to write while another reader of the same lock was
 * already waiting to upgrade. Waiting would deadlock both, so this one fails at
 * once: release the read lease and acquire write afresh.
 */
export class UpgradeConflictError extends RWLockError {}

/** The lease is not held (released already, expired, or never held by this owner). */
export class LockNotHeldError extends RWLockError {}

/** The lock was lost: it expired or was taken over before it was released. */
export class LockLostError extends RWLockError {}

/** The {@link LockClient} (or the Redis client under it) was closed. */
export class ClientClosedError extends RWLockError {}

/**
 * Redis could not be reached, or answered with an error, so the outcome of the
 * operation is unknown; `cause` holds the ioredis error. An acquire that fails
 * this way has already tried to release whatever it may have taken.
 */
export class RedisUnavailableError extends RWLockError {}
