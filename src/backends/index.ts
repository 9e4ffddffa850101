import type { Driver } from '../clients/driver.js';
import type { ResolvedClientOptions } from '../options.js';
import type { LockBackend } from './backend.js';
import { HashBackend } from './hash.js';
import { LegacyBackend } from './legacy.js';
import { RedlockBackend } from './redlock.js';
import { ReplicaAckBackend } from './replica-ack.js';

/**
 * The storage layout a LockClient runs on, chosen by its `mode` option. The
 * lock, waiting and renewal logic is the same for every mode.
 */
export function createBackend(redis: Driver | readonly Driver[], options: ResolvedClientOptions): LockBackend {
  if (Array.isArray(redis)) {
    // redlock: the hash layout on every node (checked by LockClient: several independent servers).
    const nodes = redis.map((node: Driver) => new ReplicaAckBackend(new HashBackend(node, options.prefix), node));
    return new RedlockBackend(redis, nodes, options.prefix, options.redlock);
  }
  const client = redis as Driver;
  // Replica acknowledgement (WAIT after a grant) costs nothing when a request does not ask for it.
  return new ReplicaAckBackend(singleNodeBackend(client, options), client);
}

function singleNodeBackend(redis: Driver, options: ResolvedClientOptions): LockBackend {
  switch (options.mode) {
    case 'legacy':
    case 'bridge':
      return new LegacyBackend(redis, options.prefix, options.legacyKeys, options.mode);
    default:
      return new HashBackend(redis, options.prefix);
  }
}
