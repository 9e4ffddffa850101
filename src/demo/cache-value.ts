/**
 * The demo's cached value: a version, N parts and a checksum over the parts,
 * each in its own key. A rebuild writes the parts one by one and the checksum
 * last, so a value read in the middle of a rebuild has parts from two versions
 * or a checksum that does not match: it is half-built, and the reader can tell.
 *
 * All keys of one value share the lock's hash tag, so on a Cluster one MGET
 * reads them all, atomically, from the master that also holds the lock.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
import type { CachedValueNames } from './protocol.js';

/** The names of cached value `i` (1-based): resource `cache:{report-<i>}`, data keys `rwlock-demo:data:{report-<i>}:...`. */
export function cachedValueNames(i: number, parts: number): CachedValueNames {
  const tag = `{report-${i}}`;
  const data = `rwlock-demo:data:${tag}`;
  return {
    resource: `cache:${tag}`,
    meta: `${data}:meta`,
    parts: Array.from({ length: parts }, (_, p) => `${data}:part:${p}`),
  };
}

/** The checksum of a version's parts, as stored in the meta key. */
export function checksum(parts: readonly string[]): string {
  return createHash('sha256').update(parts.join('\n')).digest('hex').slice(0, 16);
}

/** Part `p` of version `version`: what a rebuild "computes" in one step. */
export function partValue(version: number, p: number): string {
  return `${version}:report part ${p} of version ${version}, built at ${Date.now()} by pid ${process.pid}`;
}

/** The meta value that seals version `version` with its parts. */
export function metaValue(version: number, parts: readonly string[]): string {
  return `${version}:${checksum(parts)}`;
}

/** The version in a meta or part value, or undefined when it is missing or malformed. */
export function versionOf(value: string | null | undefined): number | undefined {
  if (value == null) return undefined;
  const version = Number(value.slice(0, value.indexOf(':')));
  return Number.isSafeInteger(version) ? version : undefined;
}

/**
 * Checks one read of a value: `[meta, ...parts]` as MGET returned them.
 *
 * @returns undefined when the value is whole, else what is wrong with it
 */
export function checkValue(values: readonly (string | null)[]): string | undefined {
  const [meta, ...parts] = values;
  const version = versionOf(meta);
  if (version === undefined) return `meta is ${meta === null ? 'missing' : `malformed (${JSON.stringify(meta)})`}`;
  const versions = parts.map(versionOf);
  if (versions.some((v) => v !== version)) {
    return `meta says version ${version}, parts are versions [${versions.map((v) => v ?? 'missing').join(', ')}]`;
  }
  const expected = meta!.slice(meta!.indexOf(':') + 1);
  const actual = checksum(parts as string[]);
  if (actual !== expected) return `version ${version}: checksum ${actual} of the parts does not match ${expected} in meta`;
  return undefined;
}

/**
 * Replaces a value in several steps, as a rebuild does: each part, with a
 * pause for "computing" the next one, then the meta key that seals the new
 * version. Call it under the value's write lock. A rebuild that has begun
 * runs to its end even when the demo is stopping, so it never leaves a
 * half-built value behind.
 *
 * @returns the new version
 */
export async function rebuildValue(redis: Redis | Cluster, value: CachedValueNames, stepMs: number): Promise<number> {
  const version = (versionOf(await redis.get(value.meta)) ?? 0) + 1;
  const parts: string[] = [];
  for (const [p, key] of value.parts.entries()) {
    const part = partValue(version, p);
    await redis.set(key, part);
    parts.push(part);
    if (stepMs > 0) await sleep(stepMs); // computing the next part
  }
  await redis.set(value.meta, metaValue(version, parts));
  return version;
}
