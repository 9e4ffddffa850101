import type { LockBackend } from './backend.js';
import { HashBackend } from './hash-backend.js';
import { LegacyBackend } from './legacy-backend.js';
import type { ResolvedClientOptions } from './options.js';
import type { RedisClient } from './redis.js';

/**
 * The storage layout a LockClient runs on, chosen by its `mode` option. The
 * lock, waiting and renewal logic is the same for every mode.
 */
export function createBackend(redis: RedisClient, options: ResolvedClientOptions): LockBackend {
  switch (options.mode) {
    case 'legacy':
    case 'bridge':
      return new LegacyBackend(redis, options.prefix, options.legacyKeys, options.mode);
    default:
      return new HashBackend(redis, options.prefix);
  }
}
