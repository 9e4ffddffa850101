/**
 * Every error the library throws is an {@link RWLockError}; each subclass says
 * what happened and, in its message, what to do about it, and carries a stable
 * {@link RWLockErrorCode} in `code` for code that cannot rely on `instanceof`.
 */

/** The mode of a hold, as stored in Redis. */
export type LockMode = 'read' | 'write';

/** Context carried by every {@link RWLockError}. */
export interface RWLockErrorContext {
  /** The resource name passed to `lock()`, when the error concerns one lock. */
  resource?: string | undefined;
  /** The mode of the acquisition or lease concerned. */
  mode?: LockMode | undefined;
  /** The owner token concerned. */
  owner?: string | undefined;
  /** The underlying error, if any. */
  cause?: unknown;
}

/**
 * The `code` of each error class: stable across releases, and the same whether
 * the package was loaded with `import` or `require`.
 */
export type RWLockErrorCode =
  | 'RWLOCK_ERROR'
  | 'RWLOCK_INVALID_ARGUMENT'
  | 'RWLOCK_CROSS_SLOT'
  | 'RWLOCK_ACQUIRE_TIMEOUT'
  | 'RWLOCK_ACQUIRE_ABORTED'
  | 'RWLOCK_UPGRADE_CONFLICT'
  | 'RWLOCK_NOT_HELD'
  | 'RWLOCK_LOCK_LOST'
  | 'RWLOCK_CLIENT_CLOSED'
  | 'RWLOCK_REDIS_UNAVAILABLE'
  | 'RWLOCK_NO_QUORUM'
  | 'RWLOCK_REPLICA_ACK'
  | 'RWLOCK_STALE_FENCE'
  | 'RWLOCK_UNSUPPORTED_SERVER'
  | 'RWLOCK_NO_PERMISSION'
  | 'RWLOCK_SERVER_REFUSED'
  | 'RWLOCK_SERVER_OUT_OF_MEMORY'
  | 'RWLOCK_LAYOUT_VERSION'
  | 'RWLOCK_EVICTION_RISK';

/** Base class of every error thrown by redis-rwlock. */
export class RWLockError extends Error {
  /** What kind of error this is; see {@link RWLockErrorCode}. */
  readonly code: RWLockErrorCode = 'RWLOCK_ERROR';
  /** The resource name passed to `lock()`, when the error concerns one lock. */
  readonly resource: string | undefined;
  /** The mode of the acquisition or lease concerned, if any. */
  readonly mode: LockMode | undefined;
  /** The owner token concerned, if any. */
  readonly owner: string | undefined;

  constructor(message: string, context: RWLockErrorContext = {}) {
    super(message, context.cause === undefined ? undefined : { cause: context.cause });
    this.name = new.target.name;
    this.resource = context.resource;
    this.mode = context.mode;
    this.owner = context.owner;
    Error.captureStackTrace?.(this, new.target);
  }
}

/** A bad argument or option; nothing was sent to Redis. */
export class InvalidArgumentError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_INVALID_ARGUMENT';
  /** The name of the offending argument or option. */
  readonly argument: string;

  constructor(argument: string, message: string, context: RWLockErrorContext = {}) {
    super(`${argument}: ${message}`, context);
    this.argument = argument;
  }
}

/** The keys or channel of one lock would land in different Cluster slots. */
export class CrossSlotError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_CROSS_SLOT';
}

/** An acquisition did not succeed within `waitMs`. */
export class AcquireTimeoutError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_ACQUIRE_TIMEOUT';
  /** How long the acquisition waited, in ms. */
  readonly waitMs: number;

  constructor(waitMs: number, reason: string, context: RWLockErrorContext) {
    super(
      `could not acquire the ${context.mode} lock on "${context.resource}" within ${waitMs} ms (${reason}); ` +
        'raise waitMs, or find the holder with LockClient.inspect()',
      context,
    );
    this.waitMs = waitMs;
  }
}

/** An acquisition was aborted through its AbortSignal; `cause` is the signal's reason. */
export class AcquireAbortedError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_ACQUIRE_ABORTED';
}

/**
 * A reader asked to upgrade to write while another reader of the same lock was
 * already waiting to upgrade. Waiting would deadlock both, so this one fails at
 * once: release the read lease and acquire write afresh.
 */
export class UpgradeConflictError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_UPGRADE_CONFLICT';
}

/** The lease is not held (released already, expired, or never held by this owner). */
export class LockNotHeldError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_NOT_HELD';
}

/** The lock was lost: it expired or was taken over before it was released. */
export class LockLostError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_LOCK_LOST';
}

/** The {@link LockClient} (or the Redis client under it) was closed. */
export class ClientClosedError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_CLIENT_CLOSED';
}

/**
 * Redis could not be reached, or answered with an error, so the outcome of the
 * operation is unknown; `cause` holds the ioredis error. An acquire that fails
 * this way has already tried to release whatever it may have taken.
 */
export class RedisUnavailableError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_REDIS_UNAVAILABLE';
}

/**
 * The Redis server lacks what the library needs: Redis 7.0 or later, or a
 * compatible server (such as Valkey 7.2 or later) with `SPUBLISH` and script
 * flags. Found by the first operation on each client; nothing was changed.
 * Also a Redis Cluster node reached through a plain connection (a `Redis` or
 * `createClient()` where a `Cluster` or `createCluster()` is needed): found
 * the same way, or by a MOVED or ASK reply.
 */
export class UnsupportedServerError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_UNSUPPORTED_SERVER';
}

/** What a plain connection to a Cluster node is told, before anything is written, and on a MOVED or ASK reply. @internal */
export const PLAIN_CLUSTER_NODE =
  "the server is a Redis Cluster node, but the client is a plain connection to it, which reaches that node's slots only: " +
  'connect with new Cluster([{ host, port }]) (ioredis, iovalkey) or createCluster({ rootNodes: [{ url }] }) (node-redis); ' +
  'retrying will not help';

/**
 * The server's ACL refused the operation (`NOPERM`): the Redis user the
 * client logs in as may not run a command the library needs, or touch the
 * lock's keys or channel (a prefix outside its patterns). Retrying does not
 * help; grant what `permission` names (docs/operations.md gives the rule).
 * Also a refused login (`permission` is `login`: WRONGPASS, NOAUTH), which
 * a retry cannot fix either: give the client the right credentials.
 * Like every {@link RedisUnavailableError}, an acquire that fails this way
 * has tried to give back whatever it may have taken.
 */
export class NoPermissionError extends RedisUnavailableError {
  override readonly code: RWLockErrorCode = 'RWLOCK_NO_PERMISSION';
  /**
   * What is missing, as far as the server said: `command spublish`, `keys`,
   * `channels`, or `unknown`; `login` when the server refused the client's
   * credentials (WRONGPASS, NOAUTH: a wrong or missing password).
   */
  readonly permission: string;

  constructor(message: string, permission: string, context: RWLockErrorContext = {}) {
    super(message, context);
    this.permission = permission;
  }
}

/**
 * What a Redis server is doing when it refuses commands for a condition of its
 * own ({@link ServerRefusedError}): `out-of-memory` (maxmemory reached, `OOM`),
 * `busy` (another client's script or function runs past
 * `busy-reply-threshold`, `BUSY`), `save-failed` (a failed background save
 * with `stop-writes-on-bgsave-error`, `MISCONF`), `too-few-replicas`
 * (`min-replicas-to-write`, `NOREPLICAS`), `loading` (its data set, `LOADING`),
 * `maxclients` (no room for another connection).
 */
export type ServerCondition = 'out-of-memory' | 'busy' | 'save-failed' | 'too-few-replicas' | 'loading' | 'maxclients';

/**
 * The Redis server refused the call for a condition of its own, before it ran
 * anything: nothing was written. `condition` names it and the message says
 * what to do. Retrying helps once the condition ends, so a waiting acquire
 * keeps trying until its `waitMs` and rejects with this only then. Like every
 * {@link RedisUnavailableError}, it is worth a retry with backoff.
 */
export class ServerRefusedError extends RedisUnavailableError {
  override readonly code: RWLockErrorCode = 'RWLOCK_SERVER_REFUSED';
  /** The server's condition. */
  readonly condition: ServerCondition;

  constructor(message: string, condition: ServerCondition, context: RWLockErrorContext = {}) {
    super(message, context);
    this.condition = condition;
  }
}

/**
 * The Redis server is out of memory (`used_memory` past `maxmemory`, and
 * nothing it may evict): it grants no new lock, and a waiting writer keeps
 * its place until memory is freed or its `waitMs` ends. Leases already held
 * are renewed, released and given back as before: those scripts only
 * rewrite or delete what is there. Raise `maxmemory`, free memory, or give
 * the locks a Redis server of their own.
 */
export class ServerOutOfMemoryError extends ServerRefusedError {
  override readonly code: RWLockErrorCode = 'RWLOCK_SERVER_OUT_OF_MEMORY';

  constructor(message: string, context: RWLockErrorContext = {}) {
    super(message, 'out-of-memory', context);
  }
}

/** Each server condition: how its refusal reads, what it is, what to do. */
const SERVER_CONDITIONS: readonly { condition: ServerCondition; reply: RegExp; is: string; fix: string }[] = [
  {
    condition: 'out-of-memory',
    reply: /^(?:ERR )?OOM\b/,
    is: 'the Redis server is out of memory (used_memory reached maxmemory, and it may evict nothing)',
    fix:
      'leases already held are still renewed and released, but no lock is granted until memory is freed: ' +
      'raise maxmemory, free memory, or give the locks a Redis server of their own',
  },
  {
    condition: 'busy',
    reply: /^(?:ERR )?BUSY\b/,
    is: "the Redis server is running another client's script or function past busy-reply-threshold, and answers nothing else until it ends",
    fix:
      'end it with SCRIPT KILL (FUNCTION KILL), and fix the script that runs so long; ' +
      'a lease whose renewal is refused for longer than it lasts is lost',
  },
  {
    condition: 'save-failed',
    reply: /^(?:ERR )?MISCONF\b/,
    is: 'the Redis server refuses writes because its last background save failed (stop-writes-on-bgsave-error)',
    fix:
      "fix what makes the save fail (the server's log says: disk space, the permissions of its dir), " +
      'or set stop-writes-on-bgsave-error no; until then no lock is granted, renewed or released',
  },
  {
    condition: 'too-few-replicas',
    reply: /^(?:ERR )?NOREPLICAS\b/,
    is: 'the Redis server refuses writes because fewer replicas than min-replicas-to-write are connected',
    fix: 'bring the replicas back, or lower min-replicas-to-write; until then no lock is granted, renewed or released',
  },
  {
    condition: 'loading',
    reply: /^(?:ERR )?LOADING\b/,
    is: 'the Redis server is still loading its data set into memory',
    fix: 'wait until it has loaded',
  },
  {
    condition: 'maxclients',
    reply: /max(?:imum)? number of clients reached/i,
    is: 'the Redis server has as many connections as maxclients allows, and refused another',
    fix: 'raise maxclients, or close idle connections: the library opens one subscriber connection of its own per server (per master on a Cluster) for wake-ups',
  },
];

/**
 * `message` (a server's error reply, or a client library's error that
 * carries it) as the {@link ServerRefusedError} of the condition it names,
 * or undefined when it names none. `what`: the operation, as an error
 * message begins ("acquiring the write lock on "r"").
 */
export function serverRefusal(what: string, message: string, context: RWLockErrorContext = {}): ServerRefusedError | undefined {
  const text = message.trim();
  const known = SERVER_CONDITIONS.find((c) => c.reply.test(text));
  if (known === undefined) return undefined;
  const said = `${what} was refused: ${known.is} (${text.replace(/\.+$/, '')}); ${known.fix}; the operation may be retried`;
  return known.condition === 'out-of-memory'
    ? new ServerOutOfMemoryError(said, context)
    : new ServerRefusedError(said, known.condition, context);
}

/**
 * The lock's state was written by a version of redis-rwlock with another
 * storage layout (its layout version, docs/upgrades.md), which this one
 * cannot share safely, so it was refused before anything was written. Seen
 * during a rolling deploy across a layout change; retrying helps only once
 * every process that uses the lock runs the same layout.
 */
export class LayoutVersionError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_LAYOUT_VERSION';
  /** The layout version the lock's state was written by. */
  readonly lockLayout: number;
  /** The layout version of this library, the only one it shares a lock with. */
  readonly libraryLayout: number;

  /** `lock`: how the message names the lock (its resource, else its key). */
  constructor(lockLayout: number, libraryLayout: number, lock: string, context: RWLockErrorContext = {}) {
    super(
      `refused the lock ${lock}: it was written by redis-rwlock's storage layout ${lockLayout}, and this library runs layout ` +
        `${libraryLayout}; versions of different layouts cannot share a lock, so nothing was written. ` +
        (lockLayout > libraryLayout
          ? `A newer version uses this lock: upgrade this process to a version of layout ${lockLayout}, or roll the newer ones back`
          : `An older version uses this lock: upgrade or stop the processes that run layout ${lockLayout}`) +
        '; retrying helps once every process that uses the lock runs one layout (docs/upgrades.md)',
      context,
    );
    this.lockLayout = lockLayout;
    this.libraryLayout = libraryLayout;
  }
}

/** What one node of a `redlock` client did in one operation; see {@link QuorumError}. */
export interface NodeOutcome {
  /** The node's index in the array of clients given to the LockClient. */
  readonly node: number;
  /** The node's address, e.g. `127.0.0.1:6379` (a Cluster: its first startup node). */
  readonly address: string;
  /**
   * `ok`: it answered and agreed (granted, released, extended); `refused`: it
   * answered no (the lock is taken there, or not held there); `error`: its
   * command failed; `timeout`: it did not answer within `redlock.nodeTimeoutMs`;
   * `pending`: it had not answered yet when the other nodes had decided, so it
   * was not waited for (it did not fail).
   */
  readonly outcome: 'ok' | 'refused' | 'error' | 'timeout' | 'pending';
  /** What happened, in words. */
  readonly reason: string;
}

/**
 * `redlock` mode: too few nodes answered for a majority to decide, so the
 * operation's outcome is unknown. `nodes` says what every node did and why.
 * An acquire that fails this way has given back what the nodes that answered
 * granted; a node that answers later has its grant given back then.
 */
export class QuorumError extends RedisUnavailableError {
  override readonly code: RWLockErrorCode = 'RWLOCK_NO_QUORUM';
  /** Nodes that must agree: a majority of them. */
  readonly quorum: number;
  /** Every node's outcome, in the order of the LockClient's clients. */
  readonly nodes: readonly NodeOutcome[];

  constructor(what: string, quorum: number, nodes: readonly NodeOutcome[], context: RWLockErrorContext = {}, problem?: string) {
    const failed = nodes.filter((n) => n.outcome === 'error' || n.outcome === 'timeout').length;
    super(
      `${what} needs a majority, ${quorum} of ${nodes.length} Redis nodes, but ${problem ?? `${failed} did not answer`} ` +
        `(${nodes.map((n) => `node ${n.node} ${n.address}: ${n.reason}`).join('; ')}); ` +
        'bring the failed nodes back or check the network to them; the operation may be retried',
      context,
    );
    this.quorum = quorum;
    this.nodes = nodes;
  }
}

/**
 * `replicaAck` with `onShortfall: 'release'`: the lock was granted, but fewer
 * replicas than asked for acknowledged the grant in time, so it was released
 * again. A failover now could have lost the grant.
 */
export class ReplicaAckError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_REPLICA_ACK';
  /** Replicas asked for. */
  readonly replicas: number;
  /** Replicas that acknowledged within `timeoutMs`. */
  readonly acked: number;
  /** How long the grant waited for the acknowledgements, in ms. */
  readonly timeoutMs: number;

  constructor(replicas: number, acked: number, timeoutMs: number, context: RWLockErrorContext) {
    super(
      `the ${context.mode} lock on "${context.resource}" was granted, but only ${acked} of the ${replicas} replicas ` +
        `asked for acknowledged it within ${timeoutMs} ms, so it was released again; check the replicas ` +
        "(INFO replication on the lock's master), or lower replicaAck.replicas, or use onShortfall: 'accept'",
      context,
    );
    this.replicas = replicas;
    this.acked = acked;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * A fenced write was refused: a write with a higher fence reached the key
 * first, so the writer's lease was lost (it expired or was taken over) before
 * it wrote. Do not retry the write with the same lease.
 */
export class StaleFenceError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_STALE_FENCE';
  /** The key the write was refused for. */
  readonly key: string;
  /** The refused write's fence. */
  readonly fence: number;
  /** The highest fence the key has seen. */
  readonly lastFence: number;

  constructor(key: string, fence: number, lastFence: number, context: RWLockErrorContext = {}) {
    super(
      `refused the write to "${key}": its fence ${fence} is lower than ${lastFence}, the last one the key has seen, ` +
        "so a newer holder of the lock has written since and this writer's lease is stale; re-acquire the lock and re-read before writing",
      context,
    );
    this.key = key;
    this.fence = fence;
    this.lastFence = lastFence;
  }
}

/** A master whose memory policy may evict lock keys, as `INFO memory` said it; see {@link EvictionRiskError}. */
export interface EvictionRisk {
  /** The master's address, `host:port`, as the Redis client names it. */
  readonly node: string;
  /** Its `maxmemory-policy`: anything but `noeviction` (`allkeys-*` may evict any key; `volatile-*` keys with a TTL, as lock keys are). */
  readonly policy: string;
  /** Its `maxmemory`, in bytes: above 0 (0 is no limit, which evicts nothing). */
  readonly maxmemoryBytes: number;
}

/** `maxmemory` as Redis' configuration writes it: `100mb`, `2gb`, else in bytes. @internal */
export function memoryOf(bytes: number): string {
  for (const [unit, size] of [
    ['gb', 2 ** 30],
    ['mb', 2 ** 20],
    ['kb', 2 ** 10],
  ] as const) {
    if (bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return `${bytes} bytes`;
}

/**
 * What a master that may evict lock keys risks, in words: the warning's and
 * the refusal's. @internal
 */
export function evictionRiskText(risk: EvictionRisk): string {
  return (
    `the Redis master ${risk.node} has maxmemory ${memoryOf(risk.maxmemoryBytes)} and maxmemory-policy ${risk.policy}, ` +
    "so under memory pressure it may evict a held lock's key, and another owner can then take the lock while its holder " +
    'still holds it (the holder learns at its next renewal, up to a third of the lease later)'
  );
}

/** What to do about a master that may evict lock keys. @internal */
export const EVICTION_REMEDY =
  'set maxmemory-policy noeviction on that master (CONFIG SET maxmemory-policy noeviction, or the parameter group of a managed service), ' +
  'or keep the locks on a Redis of their own';

/**
 * The LockClient option `onEvictionRisk: 'refuse'`: the acquire was refused,
 * before anything was written, because a master of the LockClient's Redis
 * client may evict lock keys (`maxmemory` set, `maxmemory-policy` not
 * `noeviction`). An evicted lock can be taken by a second owner while the
 * first still holds it. Retrying helps once the policy is `noeviction`.
 */
export class EvictionRiskError extends RWLockError {
  override readonly code: RWLockErrorCode = 'RWLOCK_EVICTION_RISK';
  /** The master's address. */
  readonly node: string;
  /** Its `maxmemory-policy`. */
  readonly policy: string;
  /** Its `maxmemory`, in bytes. */
  readonly maxmemoryBytes: number;

  constructor(risk: EvictionRisk, context: RWLockErrorContext) {
    super(
      `refused to acquire the ${context.mode} lock on "${context.resource}", and wrote nothing: ${evictionRiskText(risk)}; ` +
        `${EVICTION_REMEDY}, or accept the risk with the LockClient option onEvictionRisk: 'warn' or 'ignore'`,
      context,
    );
    this.node = risk.node;
    this.policy = risk.policy;
    this.maxmemoryBytes = risk.maxmemoryBytes;
  }
}
