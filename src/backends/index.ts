import type { Cleanups } from '../cleanups.js';
import type { Driver } from '../clients/driver.js';
import type { ResolvedClientOptions } from '../options.js';
import type { LockBackend } from './backend.js';
import { hashLayout, legacyLayout } from './layouts.js';
import { RedlockBackend } from './redlock.js';
import { ScriptedBackend } from './scripted.js';

/**
 * The storage layout a LockClient runs on, chosen by its `mode` option. The
 * lock, waiting and renewal logic is the same for every mode. `close()`
 * waits for the clean-ups a backend sends in the background (`cleanups`).
 */
export function createBackend(redis: Driver | readonly Driver[], options: ResolvedClientOptions, cleanups: Cleanups): LockBackend {
  const refusesEviction = options.onEvictionRisk === 'refuse';
  if (Array.isArray(redis)) {
    // redlock: the hash layout on every node (checked by LockClient: several independent servers).
    const nodes = redis.map((node: Driver) => new ScriptedBackend(node, hashLayout(options.prefix), refusesEviction));
    return new RedlockBackend(redis, nodes, options.prefix, options.redlock, cleanups);
  }
  return singleNodeBackend(redis as Driver, options, refusesEviction);
}

function singleNodeBackend(redis: Driver, options: ResolvedClientOptions, refusesEviction: boolean): LockBackend {
  switch (options.mode) {
    case 'legacy':
    case 'bridge':
      return new ScriptedBackend(redis, legacyLayout(options.prefix, options.legacyKeys, options.mode, redis.cluster), refusesEviction);
    default:
      return new ScriptedBackend(redis, hashLayout(options.prefix), refusesEviction);
  }
}
