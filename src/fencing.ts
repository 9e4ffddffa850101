import calculateSlot from 'cluster-key-slot';
import { runScript } from './backends/scripts.js';
import { type Driver, driverFor, type LockRedisClient, notAClient } from './clients/index.js';
import { InvalidArgumentError, StaleFenceError } from './errors.js';
import { describe, hashTagOf } from './keys/keys.js';
import { duration } from './options.js';
import { redisFailure } from './redis.js';

/** Options of {@link fencedSet}. */
export interface FencedSetOptions {
  /**
   * Where the highest fence seen for the key is kept; it must share the key's
   * Cluster slot. Default: `<key>#fence` when the key has a hash tag, else
   * `{<key>}#fence`.
   */
  fenceKey?: string;
  /** Time to live of the written value, in ms. Default: none. The fence key never expires. */
  ttlMs?: number;
}

/**
 * The key that keeps the highest fence seen for `key`, in `key`'s Cluster
 * slot: `<key>#fence` when the key has a hash tag (the tag stays first),
 * else `{<key>}#fence` (the whole key becomes the tag).
 *
 * @throws InvalidArgumentError when no such name exists (a key without a hash
 *   tag that contains `}`): give the key a hash tag, or pass `fenceKey`.
 */
export function fenceKeyOf(key: string): string {
  const fenceKey = hashTagOf(key) === undefined ? `{${key}}#fence` : `${key}#fence`;
  if (calculateSlot(fenceKey) !== calculateSlot(key)) {
    throw new InvalidArgumentError(
      'key',
      `${describe(key)} has no hash tag and contains "}", so no fence key in its Cluster slot can be derived; ` +
        'give the key a hash tag such as {name}, or pass options.fenceKey',
    );
  }
  return fenceKey;
}

/**
 * Writes `value` to `key` unless the key has already seen a higher fence, in
 * one atomic script; the guarded resource for a lock's fencing tokens.
 *
 * Pass the `lease` (or its `fence`) of the write lock that guards `key`. A
 * read lease is refused with {@link InvalidArgumentError}:
 * readers share the lock, so a reader's fence cannot keep another reader's
 * write out. (A bare number is taken as a write lease's fence.)
 * Every later write grant of that lock carries a higher fence, so when a
 * holder is paused past its lease (GC, a stalled event loop, a slow network)
 * and another process takes the lock and writes, the paused holder's late
 * write is refused here with {@link StaleFenceError} instead of overwriting
 * the newer data. Redis checks the fence, not the client, so the check cannot
 * be raced.
 *
 * The fence is kept in a second key (see {@link fenceKeyOf}), in the key's
 * slot and without expiry; every writer of `key` must write through this
 * function, or a plain SET would skip the check.
 *
 * @example
 * ```ts
 * await locks.withWrite('report:42', async (lease) => {
 *   const report = await build();
 *   await fencedSet(redis, 'report:{42}', report, lease); // StaleFenceError if lease went stale
 * });
 * ```
 */
export async function fencedSet(
  redis: LockRedisClient,
  key: string,
  value: string | Buffer | number,
  fence: number | { readonly fence: number },
  options?: FencedSetOptions,
): Promise<void> {
  const { client, f, fenceKey } = fencedArguments(redis, key, fence, options?.fenceKey);
  if (typeof fence === 'object' && fence !== null && (fence as { readonly mode?: unknown }).mode === 'read') {
    throw new InvalidArgumentError(
      'fence',
      'is a read lease: readers share the lock, so a read lease cannot guard a write; acquire the write lock and pass its lease (or read with fencedGet)',
    );
  }
  if (typeof value !== 'string' && typeof value !== 'number' && !Buffer.isBuffer(value)) {
    throw new InvalidArgumentError('value', `must be a string, number or Buffer, got ${describe(value)}`);
  }
  const ttlMs = options?.ttlMs === undefined ? 0 : duration('ttlMs', options.ttlMs, 1);
  let reply: [number, string];
  try {
    reply = await runScript(client, 'fencedSet', [key, fenceKey], [value, f, ttlMs]);
  } catch (error) {
    throw redisFailure(`writing "${key}" with fence ${f}`, error, {});
  }
  if (reply[0] !== 1) throw new StaleFenceError(key, f, Number(reply[1]));
}

/**
 * Reads `key` as a holder of the read lock that guards it, raising the key's
 * fence to the reader's in the same atomic script: a writer whose lease ran
 * out before this reader was granted (a paused holder waking up late) holds a
 * lower fence, so its late {@link fencedSet} is refused from then on instead
 * of changing the data under the reader. Never refused itself: readers share
 * the lock, and another reader's higher fence says nothing against this one.
 *
 * Without it, a reader's fence never reaches the store, and only writers are
 * fenced against each other.
 *
 * @example
 * ```ts
 * const report = await locks.withRead('report:42', (lease) => fencedGet(redis, 'report:{42}', lease));
 * ```
 */
export async function fencedGet(
  redis: LockRedisClient,
  key: string,
  fence: number | { readonly fence: number },
  options?: Pick<FencedSetOptions, 'fenceKey'>,
): Promise<string | null> {
  const { client, f, fenceKey } = fencedArguments(redis, key, fence, options?.fenceKey);
  try {
    return await runScript(client, 'fencedGet', [key, fenceKey], [f]);
  } catch (error) {
    throw redisFailure(`reading "${key}" with fence ${f}`, error, {});
  }
}

/** The checked arguments of {@link fencedSet} and {@link fencedGet}, and the driver of `redis`. */
function fencedArguments(
  redis: LockRedisClient,
  key: string,
  fence: number | { readonly fence: number },
  fenceKeyOption: string | undefined,
): { client: Driver; f: number; fenceKey: string } {
  const client = driverFor(redis);
  if (!client) throw new InvalidArgumentError('redis', notAClient(redis));
  if (typeof key !== 'string' || key.length === 0)
    throw new InvalidArgumentError('key', `must be a non-empty string, got ${describe(key)}`);
  const f = typeof fence === 'object' && fence !== null ? fence.fence : fence;
  if (typeof f !== 'number' || !Number.isSafeInteger(f) || f < 0) {
    throw new InvalidArgumentError('fence', `must be a lease or its fence (a whole number), got ${describe(f)}`);
  }
  const fenceKey = fenceKeyOption ?? fenceKeyOf(key);
  if (typeof fenceKey !== 'string' || calculateSlot(fenceKey) !== calculateSlot(key) || fenceKey === key) {
    throw new InvalidArgumentError('fenceKey', `must be another key in the Cluster slot of ${describe(key)}, got ${describe(fenceKey)}`);
  }
  return { client, f, fenceKey };
}
