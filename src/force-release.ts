import { runScript } from './backends/scripts.js';
import type { Driver } from './clients/driver.js';
import type { LockKeys } from './keys/keys.js';
import { isLegacyLockKeys, legacyTwinNames } from './keys/legacy.js';

/** What {@link LockClient.forceRelease} did. */
export interface ForcedRelease {
  /** The resource whose lock was force-released. */
  readonly resource: string;
  /** The keys that existed and were deleted (in `redlock` mode, on any node). Empty: the lock had no keys. */
  readonly deleted: readonly string[];
}

/**
 * Every key and wake-up channel of one lock: its own, and in legacy and
 * bridge mode the legacy keys, their readers' registry and the state
 * legacy-mode clients keep beside them (one Cluster slot, as lock() checked).
 */
export function lockFootprint(keys: LockKeys, prefix: string): { names: string[]; channels: string[] } {
  const names = [keys.state, keys.leases, keys.queue];
  const channels = [keys.channel];
  if (isLegacyLockKeys(keys)) {
    const twin = legacyTwinNames(prefix, keys.read);
    names.push(keys.read, keys.write, keys.readers, twin.state, twin.leases, twin.queue);
    channels.push(twin.state);
    if (keys.peerChannel !== '') channels.push(keys.peerChannel);
  }
  return { names: [...new Set(names)], channels: [...new Set(channels)] };
}

/** Deletes the lock's keys on one server (one script: atomic) and wakes its waiters; the names deleted. */
export async function forceReleaseOn(client: Driver, names: readonly string[], channels: readonly string[]): Promise<string[]> {
  return runScript(client, 'forceRelease', names, channels);
}
