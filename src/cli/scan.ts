import type { CliRedis } from './cli-redis.js';

/**
 * Keys one SCAN step visits: 200 take ~0.2 ms of server time on 30,000 keys
 * (1,000 took 0.7-0.9 ms, over 1 ms on a busy machine), and Redis serves
 * nobody else meanwhile.
 */
const SCAN_COUNT = 200;

/**
 * Every key matching `match` (a SCAN glob) of Redis type `type`, on every
 * master. SCAN walks the keyspace in small steps, so it never blocks the
 * server the way KEYS would; a key created or deleted during the walk may or
 * may not be seen.
 */
export async function scanKeys(redis: CliRedis, match: string, type: string): Promise<string[]> {
  const found = await Promise.all(
    (await redis.masters()).map(async (node) => {
      const keys: string[] = [];
      let cursor = '0';
      do {
        const [next, batch] = (await node(['SCAN', cursor, 'MATCH', match, 'COUNT', SCAN_COUNT, 'TYPE', type])) as [string, string[]];
        keys.push(...batch);
        cursor = next;
      } while (cursor !== '0');
      return keys;
    }),
  );
  return [...new Set(found.flat())].sort();
}

/** `s` with the SCAN glob's special characters escaped. */
export function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
