import { InvalidArgumentError, type RWLockErrorContext } from './errors.js';
import { describe } from './keys/keys.js';
import { defaultLegacyKeys, type LegacyKeyPair } from './keys/legacy.js';

/** Longest duration accepted anywhere, in ms: the longest a Node timer can wait (~24.8 days). */
export const MAX_DURATION_MS = 2 ** 31 - 1;
/** Shortest lease accepted, in ms. */
export const MIN_LEASE_MS = 10;
/** Shortest `linkCheckMs` accepted: below it, event-loop lag on a busy process would pass for a silent link. */
export const MIN_LINK_CHECK_MS = 50;
/** Longest owner token accepted, in characters. */
export const MAX_OWNER_LENGTH = 256;

/** Options of a {@link LockClient}; every field is optional. */
export interface LockClientOptions {
  /** Prefix of every key and channel. Default `rwlock`. */
  prefix?: string;
  /**
   * Lease of acquisitions that give no `leaseMs` of their own; such leases are
   * renewed automatically every `leaseMs / 3` while held. Default 30 000.
   */
  leaseMs?: number;
  /** How long an acquire waits when the call gives no `waitMs`. Default 10 000. */
  waitMs?: number;
  /**
   * How long the library waits for Redis to answer one call, in ms: release,
   * extend, renewal and inspect reject with `RedisUnavailableError` after it.
   * An acquire settles by `waitMs` + 250 ms, or by this when that is later
   * (plus the `replicaAck` timeout, when asked for), whatever Redis or the
   * network does. A grant that arrives later is given back in the
   * background. Default 1 000.
   */
  redisTimeoutMs?: number;
  /**
   * Writer preference: new readers queue behind a waiting writer, so a stream
   * of readers cannot starve it. Default true.
   */
  writerPreference?: boolean;
  /**
   * A waiter re-checks the lock at least this often even without a wake-up
   * message, so a lost message costs at most this much. Default 500.
   */
  recheckMs?: number;
  /**
   * How often each wake-up subscriber link (one subscriber connection; on a
   * Cluster one per master with waiters) is checked by an echo: one
   * `SPUBLISH` per link and period, however many locks wait. A link that
   * goes silent (an idle timeout in a NAT, firewall or load balancer that
   * drops the connection and tells neither side, a host gone) is noticed
   * within twice this, and made again; its waiters re-check at once. Lower
   * it for faster detection, or below a NAT's idle timeout to keep the link
   * busy; raise it for fewer echoes. It also bounds the library's own
   * subscriber connections: their handshake (2×) and a subscription's
   * confirmation (4×). Default 2 500 (a silent link noticed within 5 s);
   * at least 50.
   */
  linkCheckMs?: number;
  /**
   * A release hands the lock to the longest-waiting writer either way. On,
   * a lock that frees without a release (a lease ran out) also goes only to
   * the longest-waiting writer: strict arrival order. Off (the default), any
   * writer already waiting may take such a lock, but a writer that is not
   * yet waiting never passes the waiting ones. See
   * docs/guide/readers-and-writers.md, "Waiting and fairness".
   */
  fair?: boolean;
  /**
   * The storage layout. `hash` (default): one hash per lock, on one server or
   * a Cluster. `legacy`: the two-key scheme of older services (a read key and
   * a write key), interoperating with processes that still run the old
   * scripts. `bridge`: both at once, for the migration window, so old
   * processes and hash-mode processes exclude each other. See docs/migration.md.
   * `redlock`: the lock is held on a majority of N independent servers or
   * Clusters, given to the LockClient as an array of clients. See docs/safety.md.
   */
  mode?: LockClientMode;
  /** `redlock` mode: clock drift allowance and node timeout. */
  redlock?: RedlockOptions;
  /**
   * Replica acknowledgement: after every grant, wait until this many replicas
   * of the lock's master acknowledged it (`WAIT`). Off by default; each
   * acquisition may turn it on or off (`replicaAck: false`). See docs/safety.md.
   */
  replicaAck?: ReplicaAckOptions;
  /**
   * `legacy` and `bridge` modes: the read key and write key that the old
   * processes use for `resource`. Default `<resource>:read` and
   * `<resource>:write`. On a Cluster both (in bridge mode: and the lock's own
   * slot) must share one slot: give them a hash tag.
   */
  legacyKeys?: (resource: string) => LegacyKeyPair;
  /**
   * What to do about a master that may evict lock keys (`maxmemory` set,
   * `maxmemory-policy` not `noeviction`), found by the server check at the
   * first use and after a reconnect or failover: an evicted lock can be taken
   * by a second owner while its holder still holds it (docs/production.md,
   * "Eviction"). `warn` (default): a process warning (`RWLOCK_EVICTION_RISK`,
   * once per master and policy), the `evictionRisk` event and
   * `stats().evictionRisks`. `refuse`: every acquire rejects with
   * `EvictionRiskError` instead, and writes nothing. `ignore`: no warning
   * (the event and stats still say it).
   */
  onEvictionRisk?: EvictionRiskAction;
}

/** What a LockClient does about a master that may evict lock keys; see {@link LockClientOptions.onEvictionRisk}. */
export type EvictionRiskAction = 'warn' | 'refuse' | 'ignore';
export const EVICTION_RISK_ACTIONS: readonly EvictionRiskAction[] = ['warn', 'refuse', 'ignore'];

/** The storage layouts a {@link LockClient} can run on. */
export type LockClientMode = 'hash' | 'legacy' | 'bridge' | 'redlock';
export const CLIENT_MODES: readonly LockClientMode[] = ['hash', 'legacy', 'bridge', 'redlock'];

/** `redlock` mode: how a majority grant is judged. */
export interface RedlockOptions {
  /**
   * Clock drift allowed for, as a fraction of the lease: a grant is valid for
   * `lease - elapsed - (lease * driftFactor + driftMs)`. Default 0.01.
   */
  driftFactor?: number;
  /** The fixed part of the drift allowance, in ms. Default 2. */
  driftMs?: number;
  /**
   * How long one node may take to answer before it counts as failed, in ms.
   * Grants, releases and renewals finish as soon as a majority decided; a
   * refused acquire waits for every node up to this long, so that it gives
   * back what it took before it returns. A renewal of many leases, or an
   * inspect of a lock of many holders, takes many calls per node: this
   * bounds the wait for each, not the whole.
   * Default 500.
   */
  nodeTimeoutMs?: number;
}

/** Replica acknowledgement of grants (`WAIT`); see {@link LockClientOptions.replicaAck}. */
export interface ReplicaAckOptions {
  /** Replicas of the lock's master that must acknowledge a grant (at least 1). */
  replicas: number;
  /** How long to wait for them, in ms (at least 1; `WAIT` with 0 would block forever). */
  timeoutMs: number;
  /**
   * Fewer replicas answered in time: `release` (default) releases the grant
   * and rejects with `ReplicaAckError`; `accept` keeps it and reports the
   * count in `lease.replicasAcked`.
   */
  onShortfall?: 'release' | 'accept';
}

/** {@link RedlockOptions} with the defaults filled in. */
export interface ResolvedRedlockOptions {
  /** See {@link RedlockOptions.driftFactor}. */
  readonly driftFactor: number;
  /** See {@link RedlockOptions.driftMs}. */
  readonly driftMs: number;
  /** See {@link RedlockOptions.nodeTimeoutMs}. */
  readonly nodeTimeoutMs: number;
}

/** {@link ReplicaAckOptions} with the defaults filled in. */
export interface ResolvedReplicaAck {
  /** See {@link ReplicaAckOptions.replicas}. */
  readonly replicas: number;
  /** See {@link ReplicaAckOptions.timeoutMs}. */
  readonly timeoutMs: number;
  /** See {@link ReplicaAckOptions.onShortfall}. */
  readonly onShortfall: 'release' | 'accept';
}

/** Options of one acquisition. */
export interface AcquireOptions {
  /** How long to wait for the lock, in ms; 0 tries once. Default: the client's `waitMs`. */
  waitMs?: number;
  /** Aborts the wait; the acquire then rejects with `AcquireAbortedError`. */
  signal?: AbortSignal;
  /**
   * Lease length in ms. Given, the lease is not renewed automatically and is
   * lost when it runs out; omitted, the client's `leaseMs` applies and the
   * lease is renewed while held.
   */
  leaseMs?: number;
  /**
   * Owner token: acquisitions with the same owner are the same holder
   * (reentrancy, upgrade, downgrade). Default: the owner of an enclosing
   * `withRead`/`withWrite` on the same resource, else a fresh uuid v4.
   */
  owner?: string;
  /** Replica acknowledgement of this grant; `false` turns the client's off. Default: the client's `replicaAck`. */
  replicaAck?: ReplicaAckOptions | false;
}

/** Options of a try-acquire: as {@link AcquireOptions}, without waiting. */
export type TryAcquireOptions = Omit<AcquireOptions, 'waitMs' | 'signal'>;

/** The options a {@link LockClient} runs with (`locks.options`): {@link LockClientOptions} with the defaults filled in. */
export interface ResolvedClientOptions {
  /** See {@link LockClientOptions.prefix}. */
  readonly prefix: string;
  /** See {@link LockClientOptions.leaseMs}. */
  readonly leaseMs: number;
  /** See {@link LockClientOptions.waitMs}. */
  readonly waitMs: number;
  /** See {@link LockClientOptions.redisTimeoutMs}. */
  readonly redisTimeoutMs: number;
  /** See {@link LockClientOptions.writerPreference}. */
  readonly writerPreference: boolean;
  /** See {@link LockClientOptions.recheckMs}. */
  readonly recheckMs: number;
  /** See {@link LockClientOptions.linkCheckMs}. */
  readonly linkCheckMs: number;
  /** See {@link LockClientOptions.fair}. */
  readonly fair: boolean;
  /** See {@link LockClientOptions.mode}. */
  readonly mode: LockClientMode;
  /** See {@link LockClientOptions.legacyKeys}. */
  readonly legacyKeys: (resource: string) => LegacyKeyPair;
  /** See {@link LockClientOptions.redlock}. */
  readonly redlock: ResolvedRedlockOptions;
  /** See {@link LockClientOptions.replicaAck}; undefined: off. */
  readonly replicaAck: ResolvedReplicaAck | undefined;
  /** See {@link LockClientOptions.onEvictionRisk}. */
  readonly onEvictionRisk: EvictionRiskAction;
}

export const CLIENT_DEFAULTS: ResolvedClientOptions = Object.freeze({
  prefix: 'rwlock',
  leaseMs: 30_000,
  waitMs: 10_000,
  redisTimeoutMs: 1_000,
  writerPreference: true,
  recheckMs: 500,
  linkCheckMs: 2_500,
  fair: false,
  mode: 'hash',
  legacyKeys: defaultLegacyKeys,
  redlock: Object.freeze({ driftFactor: 0.01, driftMs: 2, nodeTimeoutMs: 500 }),
  replicaAck: undefined,
  onEvictionRisk: 'warn',
});

/** What `ownOptions` returns for no options: shared, since every acquire without options gets it. */
const NO_OPTIONS: Readonly<Record<string, unknown>> = Object.freeze(Object.create(null) as Record<string, unknown>);

/**
 * The own properties of an options object, with unknown names refused (a typo
 * such as `leasems` would otherwise be silently ignored) and inherited ones
 * ignored, so a polluted prototype cannot inject options.
 */
export function ownOptions<K extends string>(
  value: unknown,
  allowed: readonly K[],
  argument: string,
  context: RWLockErrorContext = {},
): Partial<Record<K, unknown>> {
  if (value === undefined) return NO_OPTIONS as Partial<Record<K, unknown>>;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidArgumentError(argument, `must be an object, got ${describe(value)}`, context);
  }
  // No prototype: with a polluted Object.prototype, `out.leaseMs` of a plain {} would read the pollution.
  const out = Object.create(null) as Partial<Record<K, unknown>>;
  for (const name of Object.keys(value)) {
    if (!(allowed as readonly string[]).includes(name)) {
      throw new InvalidArgumentError(argument, `unknown option ${JSON.stringify(name)}; the options are ${allowed.join(', ')}`, context);
    }
    const v = (value as Record<string, unknown>)[name];
    if (v !== undefined) out[name as K] = v;
  }
  return out;
}

/** A whole number of ms within [min, MAX_DURATION_MS]. */
export function duration(name: string, value: unknown, min: number, context: RWLockErrorContext = {}): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_DURATION_MS) {
    throw new InvalidArgumentError(
      name,
      `must be a whole number of milliseconds from ${min} to ${MAX_DURATION_MS}, got ${describe(value)}`,
      context,
    );
  }
  return value;
}

/** The value old processes write to the legacy keys: in `legacy` and `bridge` mode it would be taken for theirs. */
export const LEGACY_MARKER = '1';

export function ownerToken(value: unknown, context: RWLockErrorContext = {}, mode?: LockClientMode): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_OWNER_LENGTH) {
    throw new InvalidArgumentError('owner', `must be a string of 1 to ${MAX_OWNER_LENGTH} characters, got ${describe(value)}`, context);
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value) || !value.isWellFormed()) {
    throw new InvalidArgumentError('owner', 'must not contain control characters or lone surrogates', context);
  }
  if (value === LEGACY_MARKER && (mode === 'legacy' || mode === 'bridge')) {
    throw new InvalidArgumentError(
      'owner',
      `must not be "${LEGACY_MARKER}" in mode "${mode}": that is the value old processes write to the legacy keys, ` +
        'so the lock would take an old holder for this owner; pick another token',
      context,
    );
  }
  return value;
}

function flag(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new InvalidArgumentError(name, `must be a boolean, got ${describe(value)}`);
  return value;
}

/** `value`, one of the strings `allowed` for option `name`. */
function oneOf<T extends string>(name: string, value: unknown, allowed: readonly T[]): T {
  if (!(allowed as readonly unknown[]).includes(value)) {
    throw new InvalidArgumentError(name, `must be one of ${allowed.map((a) => `"${a}"`).join(', ')}, got ${describe(value)}`);
  }
  return value as T;
}

function legacyKeysOption(value: unknown, mode: LockClientMode): (resource: string) => LegacyKeyPair {
  if (typeof value !== 'function') {
    throw new InvalidArgumentError('legacyKeys', `must be a function (resource) => ({ read, write }), got ${describe(value)}`);
  }
  if (mode !== 'legacy' && mode !== 'bridge') {
    throw new InvalidArgumentError('legacyKeys', `applies to mode "legacy" or "bridge" only; this client's mode is "${mode}"`);
  }
  return value as (resource: string) => LegacyKeyPair;
}

export function resolveClientOptions(options: unknown, validatePrefix: (p: unknown) => string): ResolvedClientOptions {
  const o = ownOptions(
    options,
    [
      'prefix',
      'leaseMs',
      'waitMs',
      'redisTimeoutMs',
      'writerPreference',
      'recheckMs',
      'linkCheckMs',
      'fair',
      'mode',
      'legacyKeys',
      'redlock',
      'replicaAck',
      'onEvictionRisk',
    ],
    'options',
  );
  const mode = o.mode === undefined ? CLIENT_DEFAULTS.mode : oneOf('mode', o.mode, CLIENT_MODES);
  return Object.freeze({
    prefix: o.prefix === undefined ? CLIENT_DEFAULTS.prefix : validatePrefix(o.prefix),
    leaseMs: o.leaseMs === undefined ? CLIENT_DEFAULTS.leaseMs : duration('leaseMs', o.leaseMs, MIN_LEASE_MS),
    waitMs: o.waitMs === undefined ? CLIENT_DEFAULTS.waitMs : duration('waitMs', o.waitMs, 0),
    redisTimeoutMs: o.redisTimeoutMs === undefined ? CLIENT_DEFAULTS.redisTimeoutMs : duration('redisTimeoutMs', o.redisTimeoutMs, 1),
    writerPreference: o.writerPreference === undefined ? CLIENT_DEFAULTS.writerPreference : flag('writerPreference', o.writerPreference),
    recheckMs: o.recheckMs === undefined ? CLIENT_DEFAULTS.recheckMs : duration('recheckMs', o.recheckMs, 1),
    linkCheckMs: o.linkCheckMs === undefined ? CLIENT_DEFAULTS.linkCheckMs : duration('linkCheckMs', o.linkCheckMs, MIN_LINK_CHECK_MS),
    fair: o.fair === undefined ? CLIENT_DEFAULTS.fair : flag('fair', o.fair),
    mode,
    legacyKeys: o.legacyKeys === undefined ? CLIENT_DEFAULTS.legacyKeys : legacyKeysOption(o.legacyKeys, mode),
    redlock: o.redlock === undefined ? CLIENT_DEFAULTS.redlock : redlockOptions(o.redlock, mode),
    replicaAck: o.replicaAck === undefined ? undefined : resolveReplicaAck(o.replicaAck),
    onEvictionRisk:
      o.onEvictionRisk === undefined ? CLIENT_DEFAULTS.onEvictionRisk : oneOf('onEvictionRisk', o.onEvictionRisk, EVICTION_RISK_ACTIONS),
  });
}

function redlockOptions(value: unknown, mode: LockClientMode): ResolvedRedlockOptions {
  if (mode !== 'redlock') {
    throw new InvalidArgumentError('redlock', `applies to mode "redlock" only; this client's mode is "${mode}"`);
  }
  const o = ownOptions(value, ['driftFactor', 'driftMs', 'nodeTimeoutMs'], 'redlock');
  const d = CLIENT_DEFAULTS.redlock;
  const factor = o.driftFactor ?? d.driftFactor;
  if (typeof factor !== 'number' || !(factor >= 0 && factor < 0.5)) {
    throw new InvalidArgumentError('redlock.driftFactor', `must be a number from 0 to below 0.5, got ${describe(factor)}`);
  }
  return Object.freeze({
    driftFactor: factor,
    driftMs: o.driftMs === undefined ? d.driftMs : duration('redlock.driftMs', o.driftMs, 0),
    nodeTimeoutMs: o.nodeTimeoutMs === undefined ? d.nodeTimeoutMs : duration('redlock.nodeTimeoutMs', o.nodeTimeoutMs, 1),
  });
}

/** A `replicaAck` option, of a client or of one acquisition; `false` turns it off. */
export function resolveReplicaAck(value: unknown, context: RWLockErrorContext = {}): ResolvedReplicaAck | undefined {
  if (value === false) return undefined;
  const o = ownOptions(value, ['replicas', 'timeoutMs', 'onShortfall'], 'replicaAck', context);
  const replicas = o.replicas;
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 1 || replicas > 1000) {
    throw new InvalidArgumentError('replicaAck.replicas', `must be a whole number from 1 to 1000, got ${describe(replicas)}`, context);
  }
  if (o.timeoutMs === undefined) {
    throw new InvalidArgumentError('replicaAck.timeoutMs', 'is required: how long to wait for the replicas, in ms', context);
  }
  const onShortfall = o.onShortfall ?? 'release';
  if (onShortfall !== 'release' && onShortfall !== 'accept') {
    throw new InvalidArgumentError('replicaAck.onShortfall', `must be "release" or "accept", got ${describe(onShortfall)}`, context);
  }
  return Object.freeze({ replicas, timeoutMs: duration('replicaAck.timeoutMs', o.timeoutMs, 1, context), onShortfall });
}
