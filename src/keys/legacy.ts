import calculateSlot from 'cluster-key-slot';
import { CrossSlotError, InvalidArgumentError } from '../errors.js';
import { CONTROL_CHARS, describe, hashTagOf, type LockKeys, lockKeys } from './keys.js';

/** The two keys an old two-key-scheme process locks `resource` with. */
export interface LegacyKeyPair {
  /** The read key's name. */
  readonly read: string;
  /** The write key's name. */
  readonly write: string;
}

/** Longest legacy key name accepted, in UTF-8 bytes. */
export const MAX_LEGACY_KEY_BYTES = 8192;

/**
 * The default legacy key names, `<resource>:read` and `<resource>:write`: the
 * most common spelling of the two-key scheme. Services that spelled theirs
 * differently (`lock:read:<resource>`, `<resource>:rlock`, ...) pass their own
 * `legacyKeys` function. On a Cluster both keys must share a slot: give them
 * a hash tag, e.g. `{<resource>}:read`.
 */
export function defaultLegacyKeys(resource: string): LegacyKeyPair {
  return { read: `${resource}:read`, write: `${resource}:write` };
}

/**
 * Every name of one lock in legacy or bridge mode: the hash-layout names
 * ({@link LockKeys}) of the state the library keeps for itself, plus the two
 * keys old processes use and the registry of readers they share.
 */
export interface LegacyLockKeys extends LockKeys {
  /** The old processes' read key. */
  readonly read: string;
  /** The old processes' write key. */
  readonly write: string;
  /**
   * Sorted set of everybody known to hold the read key (library readers of
   * every mode by token, old readers as the member `""`), score = deadline:
   * `<prefix>#readers:<read key>`.
   */
  readonly readers: string;
  /** A second channel every release also publishes on ('' for none): the other mode's waiters. */
  readonly peerChannel: string;
  /** `legacy` or `bridge`. */
  readonly layout: 'legacy' | 'bridge';
}

function legacyKey(value: unknown, which: 'read' | 'write', resource: string): string {
  const argument = `legacyKeys(${JSON.stringify(resource)}).${which}`;
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidArgumentError(argument, `must be a non-empty string, got ${describe(value)}`, { resource });
  }
  if (CONTROL_CHARS.test(value) || !value.isWellFormed()) {
    throw new InvalidArgumentError(argument, 'must not contain control characters or lone surrogates', { resource });
  }
  if (Buffer.byteLength(value) > MAX_LEGACY_KEY_BYTES) {
    throw new InvalidArgumentError(argument, `must be at most ${MAX_LEGACY_KEY_BYTES} bytes long`, { resource });
  }
  return value;
}

/** Calls the user's `legacyKeys` function and checks what it returns. */
export function resolveLegacyPair(fn: (resource: string) => LegacyKeyPair, resource: string): LegacyKeyPair {
  let pair: unknown;
  try {
    pair = fn(resource);
  } catch (error) {
    throw new InvalidArgumentError('legacyKeys', `threw for resource ${JSON.stringify(resource)}: ${String(error)}`, {
      resource,
      cause: error,
    });
  }
  if (pair === null || typeof pair !== 'object') {
    throw new InvalidArgumentError(
      'legacyKeys',
      `must return an object { read, write } of two key names, got ${describe(pair)} for ${JSON.stringify(resource)}`,
      { resource },
    );
  }
  const read = legacyKey((pair as { read?: unknown }).read, 'read', resource);
  const write = legacyKey((pair as { write?: unknown }).write, 'write', resource);
  if (read === write) {
    throw new InvalidArgumentError(
      'legacyKeys',
      `returned the same key ${JSON.stringify(read)} for read and write of ${JSON.stringify(resource)}; the two-key scheme needs two`,
      { resource },
    );
  }
  return { read, write };
}

/**
 * The names of one lock in legacy mode (`bridge` false) or bridge mode. In
 * legacy mode the library's own state lives beside the legacy keys, under
 * names derived from the read key (`<prefix>#legacy:<read key>` and its
 * `-leases`/`-queue` siblings), so only the legacy keys decide the slot; in
 * bridge mode it is the hash-mode lock itself (`<prefix>:{<resource>}`), so
 * hash-mode processes see bridge holders. `cluster` true checks that every
 * name shares one slot and throws {@link CrossSlotError} otherwise (a script
 * on a Cluster can only touch one slot); on one server any names work.
 */
export function legacyLockKeys(
  prefix: string,
  resource: string,
  pair: LegacyKeyPair,
  layout: 'legacy' | 'bridge',
  cluster: boolean,
): LegacyLockKeys {
  const { read, write } = pair;
  const hash = lockKeys(prefix, resource);
  const twin = legacyTwinNames(prefix, read);
  const legacyState = twin.state;
  const readers = readersKeyName(prefix, read);
  const own = layout === 'bridge' ? hash : { ...twin, channel: legacyState };
  for (const name of [read, write]) {
    if (name === hash.state || name === hash.leases || name === hash.queue || name === own.state || name === readers) {
      throw new InvalidArgumentError(
        'legacyKeys',
        `returned ${JSON.stringify(name)}, which is one of the library's own key names for ${JSON.stringify(resource)}; ` +
          'return the keys your old processes use',
        { resource },
      );
    }
  }
  const names = [read, write, readers, own.state, own.leases, own.queue, legacyState];
  const legacySlot = calculateSlot(read);
  const sameSlot = names.every((n) => calculateSlot(n) === legacySlot);
  if (cluster && !sameSlot) throw crossSlot(resource, pair, layout, own.state);
  // Legacy mode also wakes hash-mode and bridge waiters when it can reach their channel in one script.
  const peerChannel = layout === 'bridge' ? legacyState : !cluster || calculateSlot(hash.channel) === legacySlot ? hash.channel : '';
  return {
    ...own,
    slot: calculateSlot(own.state),
    read,
    write,
    readers,
    peerChannel: peerChannel === own.channel ? '' : peerChannel,
    layout,
  };
}

/** The names of the state a legacy-mode LockClient keeps beside the legacy keys whose read key is `read`. */
export function legacyTwinNames(prefix: string, read: string): { state: string; leases: string; queue: string } {
  return { state: `${prefix}#legacy:${read}`, leases: `${prefix}#legacy-leases:${read}`, queue: `${prefix}#legacy-queue:${read}` };
}

/** The registry of the read key's holders, shared by legacy-mode and bridge-mode clients. */
export function readersKeyName(prefix: string, read: string): string {
  return `${prefix}#readers:${read}`;
}

function crossSlot(resource: string, pair: LegacyKeyPair, layout: 'legacy' | 'bridge', state: string): CrossSlotError {
  const tag = hashTagOf(resource) ?? resource;
  const slots =
    `"${pair.read}" is in slot ${calculateSlot(pair.read)}, "${pair.write}" in slot ${calculateSlot(pair.write)}` +
    (layout === 'bridge' ? `, the lock "${state}" in slot ${calculateSlot(state)}` : '');
  const why =
    layout === 'bridge'
      ? 'bridge mode checks and writes the hash layout and both legacy keys in one script, and a script on a Redis Cluster can only touch one slot'
      : 'legacy mode checks one legacy key and sets the other in one script (as the old scripts did), and a script on a Redis Cluster can only touch one slot';
  return new CrossSlotError(
    `cannot lock "${resource}" in ${layout} mode on this Cluster: ${slots}; ${why}. ` +
      `Make legacyKeys return names with a common hash tag${layout === 'bridge' ? ` equal to the lock's, "{${tag}}"` : ''}, ` +
      `e.g. { read: "{${tag}}:read", write: "{${tag}}:write" }, and use the same names in the old processes` +
      (layout === 'bridge' ? `; or stay on one server until the migration is over (see docs/migration.md)` : ''),
    { resource },
  );
}

/** True for the names of a legacy-mode or bridge-mode lock. */
export function isLegacyLockKeys(keys: LockKeys): keys is LegacyLockKeys {
  const k = keys as Partial<LegacyLockKeys>;
  return typeof k.read === 'string' && typeof k.write === 'string' && typeof k.readers === 'string';
}
