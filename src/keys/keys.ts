import calculateSlot from 'cluster-key-slot';
import { InvalidArgumentError } from '../errors.js';

/** Longest resource name accepted, in UTF-8 bytes. */
export const MAX_RESOURCE_BYTES = 4096;
/** Longest key prefix accepted, in UTF-8 bytes. */
export const MAX_PREFIX_BYTES = 256;

// eslint-disable-next-line no-control-regex
export const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
const PREFIX_FORBIDDEN = /[{}#\s]/;

/** Every Redis name one lock uses. They all hash to `slot`. */
export interface LockKeys {
  /**
   * The hash holding the lock's state: `<prefix>:{<resource>}`, or
   * `<prefix>:<resource>` for a resource with a hash tag of its own.
   */
  readonly state: string;
  /** The sorted set of owner deadlines: `<prefix>#leases:` and the resource, as in `state`. */
  readonly leases: string;
  /** The sorted set of waiting writers in arrival order: `<prefix>#queue:` and the resource, as in `state`. */
  readonly queue: string;
  /** The sharded pub/sub channel on which releases wake waiters (same name as `state`). */
  readonly channel: string;
  /** The Cluster slot of all of the above. */
  readonly slot: number;
}

/**
 * The hash tag Redis Cluster would hash for `name`: the text between the first
 * `{` and the first `}` after it, if non-empty; otherwise undefined.
 */
export function hashTagOf(name: string): string | undefined {
  const open = name.indexOf('{');
  if (open < 0) return undefined;
  const close = name.indexOf('}', open + 1);
  if (close < 0 || close === open + 1) return undefined;
  return name.slice(open + 1, close);
}

/**
 * The part of every key that decides the slot. A resource that already carries
 * a non-empty hash tag (`user:{42}:profile`) is kept as it is, so the lock
 * lands in the slot of the user's own data; any other resource (no braces,
 * `{}` first, an unmatched `{`) is wrapped whole in braces. Wrapped, the first
 * `{` is ours and the first `}` after it lies inside the wrapper, so the tag is
 * always within this part and every name built from it shares one slot.
 */
export function slotPart(resource: string): string {
  return hashTagOf(resource) === undefined ? `{${resource}}` : resource;
}

export function validatePrefix(prefix: unknown): string {
  if (typeof prefix !== 'string' || prefix.length === 0) {
    throw new InvalidArgumentError('prefix', `must be a non-empty string, got ${describe(prefix)}`);
  }
  if (!prefix.isWellFormed()) {
    throw new InvalidArgumentError(
      'prefix',
      'contains a lone UTF-16 surrogate; two such prefixes could map to the same Redis keys, so use well-formed text',
    );
  }
  if (PREFIX_FORBIDDEN.test(prefix) || CONTROL_CHARS.test(prefix)) {
    throw new InvalidArgumentError(
      'prefix',
      `must not contain braces, "#", white space or control characters, got ${JSON.stringify(prefix)}; ` +
        'braces would change the Cluster slot and "#" separates the lock\'s own keys',
    );
  }
  if (Buffer.byteLength(prefix) > MAX_PREFIX_BYTES) {
    throw new InvalidArgumentError('prefix', `must be at most ${MAX_PREFIX_BYTES} bytes long`);
  }
  return prefix;
}

export function validateResource(resource: unknown): string {
  if (typeof resource !== 'string' || resource.length === 0) {
    throw new InvalidArgumentError('resource', `must be a non-empty string, got ${describe(resource)}`);
  }
  if (!resource.isWellFormed()) {
    throw new InvalidArgumentError(
      'resource',
      'contains a lone UTF-16 surrogate; two such names could map to the same Redis key, so use well-formed text',
      { resource },
    );
  }
  if (CONTROL_CHARS.test(resource)) {
    throw new InvalidArgumentError('resource', 'must not contain control characters', { resource });
  }
  // A UTF-16 code unit is at most 3 UTF-8 bytes: a name that short needs no count (0.1 µs a call).
  const bytes = resource.length * 3 <= MAX_RESOURCE_BYTES ? 0 : Buffer.byteLength(resource);
  if (bytes > MAX_RESOURCE_BYTES) {
    throw new InvalidArgumentError(
      'resource',
      `is ${bytes} bytes long; at most ${MAX_RESOURCE_BYTES} are allowed (hash long names yourself)`,
      { resource: `${resource.slice(0, 64)}…` },
    );
  }
  if (resource.charCodeAt(0) === 0x7d && hashTagOf(resource) === undefined) throw emptyTag(resource);
  return resource;
}

/**
 * A resource that starts with `}` and has no hash tag of its own would give
 * its lock's names an empty hash tag (`rwlock:{}x}`). Redis hashes such a
 * name whole, so the lock's names would land in different Cluster slots,
 * while cluster-key-slot (which ioredis routes by) reads the tag up to the
 * next `}`: refused on every topology, so a name works on one server exactly
 * when it works on a Cluster.
 */
function emptyTag(resource: string): InvalidArgumentError {
  return new InvalidArgumentError(
    'resource',
    'starts with "}" and has no hash tag of its own, so its lock\'s Redis names would have an empty hash tag, ' +
      'which Redis places in a different Cluster slot for each name; give it a hash tag, e.g. "{orders}" + resource',
    { resource },
  );
}

/**
 * The names of one lock. The prefix has no braces, so all of them share the
 * hash tag of `slotPart(resource)` and with it one Cluster slot, computed
 * once from the tag by Redis's own rule (test/unit/keys.property.test.ts
 * checks every name against a reference of Redis's keyHashSlot).
 */
export function lockKeys(prefix: string, resource: string): LockKeys {
  const part = slotPart(resource);
  const tag = hashTagOf(part);
  if (tag === undefined) throw emptyTag(resource);
  return new HashLockKeys(`${prefix}:${part}`, `${prefix}#leases:${part}`, `${prefix}#queue:${part}`, tag);
}

/**
 * A lock's names, its slot hashed on first use: one server never needs it,
 * and the hash cost more than building all the names.
 */
class HashLockKeys implements LockKeys {
  readonly channel: string;
  readonly #tag: string;
  #slot: number | undefined;

  constructor(
    readonly state: string,
    readonly leases: string,
    readonly queue: string,
    tag: string,
  ) {
    this.channel = state;
    this.#tag = tag;
  }

  get slot(): number {
    // The tag holds no "}", so cluster-key-slot hashes all of it, as Redis does.
    return (this.#slot ??= calculateSlot(this.#tag));
  }
}

/**
 * The channel on which a release hands the lock to a waiting writer of the
 * LockClient `clientId` (lua/includes/release-body.lua reads the id from the
 * writer's hold id, `<clientId>.<counter>`): only that client hears it,
 * however many wait. The lock's channel has a hash tag, so this name shares
 * its Cluster slot; a newline never appears in a resource name, so it is no
 * other lock's channel.
 */
export function handedChannel(channel: string, clientId: string): string {
  return `${channel}\n${clientId}`;
}

/** A short description of a bad value for error messages. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
