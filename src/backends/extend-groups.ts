import type { LockKeys } from '../keys/keys.js';
import type { ExtendRequest } from './backend.js';

/**
 * Leases renewed by one script call at most: bounds how long one renewal
 * blocks the Redis server (each lease costs a handful of commands).
 */
export const EXTEND_BATCH = 2500;

/**
 * Renews leases with one call per group of requests (a node, or a slot), so
 * that a group that fails (its node unreachable, its slot moving) does not
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
  const settled = await Promise.allSettled(groups.map((indexes) => run(indexes, results)));
  const failed = settled.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed.length > 0 && failed.length === settled.length) throw failed[0]!.reason;
  return results;
}

/**
 * Extends the leases of one group in script calls of at most
 * {@link EXTEND_BATCH}, each call's KEYS and ARGV as the extend scripts take
 * them (lua/extend.lua): the first lock's keys (they route the call), then
 * per lease its lock's keys, owner and lease length. Writes each lease's
 * result into `results`.
 */
export async function extendInChunks<K extends LockKeys, Keys extends readonly string[]>(
  requests: readonly ExtendRequest<K>[],
  indexes: readonly number[],
  results: number[],
  names: (keys: K) => Keys,
  run: (keys: Keys, args: (string | number)[]) => Promise<number[]>,
): Promise<void> {
  for (let start = 0; start < indexes.length; start += EXTEND_BATCH) {
    const chunk = indexes.slice(start, start + EXTEND_BATCH);
    const args: (string | number)[] = [];
    for (const i of chunk) args.push(...names(requests[i]!.keys), requests[i]!.owner, requests[i]!.leaseMs);
    const reply = await run(names(requests[chunk[0]!]!.keys), args);
    chunk.forEach((i, k) => (results[i] = reply[k]!));
  }
}
