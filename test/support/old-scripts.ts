/**
 * The two-key locking scheme that services ran before redis-rwlock, verbatim:
 * a read key and a write key per resource on one Redis server, value `1`, set
 * from Lua scripts with `SET ... EX`, released with `DEL`. Tests send these
 * with EVAL to simulate a process that still runs the old code next to the
 * library in `legacy` or `bridge` mode. Do not "fix" them: their flaws (a
 * reader's release frees the read key for every reader; release deletes
 * whatever is there) are what the library has to live with.
 */
import type { RedisClient } from '../../src/redis.js';

/** KEYS[1] read key, KEYS[2] write key, ARGV[1] ttl in seconds. 1 = acquired. */
export const OLD_READ_ACQUIRE = `
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('SET', KEYS[1], 1, 'EX', ARGV[1])
return 1
`;

/** KEYS[1] read key, KEYS[2] write key, ARGV[1] ttl in seconds. 1 = acquired. */
export const OLD_WRITE_ACQUIRE = `
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if redis.call('SET', KEYS[2], 1, 'EX', ARGV[1], 'NX') then
  return 1
end
return 0
`;

/** KEYS[1] the key to release (read or write key). */
export const OLD_RELEASE = `
return redis.call('DEL', KEYS[1])
`;

/** One old process's view of one resource: its two keys, its TTL. */
export class OldLocker {
  constructor(
    private readonly redis: RedisClient,
    readonly readKey: string,
    readonly writeKey: string,
    private readonly ttlSeconds = 30,
  ) {}

  async tryRead(): Promise<boolean> {
    return (await this.redis.eval(OLD_READ_ACQUIRE, 2, this.readKey, this.writeKey, this.ttlSeconds)) === 1;
  }

  async tryWrite(): Promise<boolean> {
    return (await this.redis.eval(OLD_WRITE_ACQUIRE, 2, this.readKey, this.writeKey, this.ttlSeconds)) === 1;
  }

  async releaseRead(): Promise<void> {
    await this.redis.eval(OLD_RELEASE, 1, this.readKey);
  }

  async releaseWrite(): Promise<void> {
    await this.redis.eval(OLD_RELEASE, 1, this.writeKey);
  }
}

/**
 * Legacy key names with the resource as hash tag: both keys, and the
 * hash-mode lock of a tagless resource, share one Cluster slot.
 */
export const taggedLegacyKeys = (resource: string) => ({ read: `{${resource}}:read`, write: `{${resource}}:write` });
