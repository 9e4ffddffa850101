import type { Cluster, Redis } from 'ioredis';
import { ClientClosedError, RedisUnavailableError, RWLockError, type RWLockErrorContext } from './errors.js';

/** The ioredis clients a {@link LockClient} runs on. */
export type RedisClient = Redis | Cluster;

/** Duck-typed, so that a Cluster from another copy of ioredis is recognised too. */
export function isCluster(client: RedisClient): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true;
}

export function isUsableClient(value: unknown): value is RedisClient {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { defineCommand?: unknown }).defineCommand === 'function' &&
    typeof (value as { duplicate?: unknown }).duplicate === 'function'
  );
}

/**
 * True once the user's client was closed with quit() or disconnect() for good
 * (a Cluster can stay 'disconnecting' after quit() resolved, and then queues
 * commands forever).
 */
export function isClosed(client: RedisClient): boolean {
  // After `await redis.quit()` a Redis client still says 'ready' until its socket closes; ioredis
  // marks it manuallyClosing from the moment quit() or disconnect() is called.
  return client.status === 'end' || client.status === 'disconnecting' || (client as unknown as { manuallyClosing?: boolean }).manuallyClosing === true;
}

/** Wraps an ioredis failure into a typed error that says what to do. */
export function redisFailure(what: string, cause: unknown, context: RWLockErrorContext, client?: RedisClient): RWLockError {
  if (cause instanceof RWLockError) return cause;
  const message = cause instanceof Error ? cause.message : String(cause);
  // "Connection is closed." is also what a Cluster answers for commands in flight to a master
  // that just died: a transient failure, unless the client itself was closed.
  if (client !== undefined && isClosed(client)) {
    return new ClientClosedError(`${what} failed: the Redis client was closed (${message}); use an open client`, {
      ...context,
      cause,
    });
  }
  return new RedisUnavailableError(`${what} failed: ${message}; the operation may be retried`, { ...context, cause });
}
