import { type Driver, refusedForGood, type ScriptArg, type SlotOf } from '../clients/driver.js';
import { type LockMode, PLAIN_CLUSTER_NODE, type RWLockErrorContext, UnsupportedServerError } from '../errors.js';
import type { LUA_SOURCES } from '../lua/scripts.generated.js';
import { checkMemory, refuseIfEvicting } from './eviction.js';

export type ScriptName = keyof typeof LUA_SOURCES;

/** A hash-mode lock's keys, in their KEYS order. */
export type HashKeys = readonly [state: string, leases: string, queue: string];
/** A legacy/bridge lock's keys, in their KEYS order (lua/legacy-acquire-read.lua). */
export type LegacyKeys = readonly [state: string, leases: string, queue: string, read: string, write: string, readers: string];
/** The KEYS of a lock operation's script: its layout's keys ({@link HashKeys} or {@link LegacyKeys}). */
export type LayoutKeys = HashKeys | LegacyKeys;
/** `'1'` or `'0'`: a flag as the scripts read it. */
type Flag = '0' | '1';
/** A write acquire's queueing: fair or not, then 'h' when a release may hand the lock to it (lua/acquire-write.lua). */
export type Queueing = `${Flag}${'' | 'h'}`;
/** The wake-up channels a release or abandon publishes on besides the lock's own (named as its state key): in legacy/bridge mode its peer's. */
type Channels = readonly string[];

/**
 * An acquire script's reply (lua/acquire-write.lua): the bare fence, or [1, fence, lease left] /
 * [0, retry after, reason], with the queue heartbeat deadline of a writer that queued.
 */
export type AcquireReply = number | [number, number, (number | string)?, number?, string?];
/**
 * When a call that stops after a budget of server time started (server µs),
 * how long it ran by its clock (µs; 0 where the clock stands still:
 * lua/includes/clock.lua), and what it did (inspect: full steps read).
 */
export type CallClock = [startUs: number, elapsedUs: number, units: number];
/** The hash-mode inspect script's reply (lua/inspect.lua): one page of the lock's state. */
export type InspectReply = [nowMs: number, cursor: string, fields: string[], deadlines: string[], queue: string[], clock: CallClock];
/** The legacy/bridge inspect script's reply: the hash-mode one, then the old keys (lua/legacy-inspect.lua). */
export type LegacyInspectReply = [
  ...InspectReply,
  readValue: string | null,
  readTtl: number,
  writeValue: string | null,
  writeTtl: number,
  readers: string[],
];

/** An inspect script's arguments: where to read from (`'0'`: the start), its budget of server time, and the full steps it may read. */
type InspectArgs = readonly [cursor: string, budgetUs: number, maxSteps: number];

/**
 * A hold as the scripts name it, '<w|r> <holdId> <owner>' (see {@link holderArg}): a free
 * lock keeps this string as its sole holder, and its release compares it whole.
 */
export type HolderArg = string;

/** The script argument naming one hold of `owner` in `mode`: its mode's letter, the acquire's hold id, and the owner, last (it may hold spaces). */
export function holderArg(mode: LockMode, holdId: string, owner: string): HolderArg {
  return `${mode === 'write' ? 'w' : 'r'} ${holdId} ${owner}`;
}

/** The arguments and reply of each lock operation, whatever the layout: the layouts' scripts differ only in their KEYS and channels. */
interface LockOperations {
  acquireRead: [args: readonly [leaseMs: number, holder: HolderArg, honourIntent: Flag], reply: AcquireReply];
  acquireWrite: [
    args:
      | readonly [leaseMs: number, holder: HolderArg, waitBeatMs: number, queueing: Queueing]
      | readonly [leaseMs: number, holder: HolderArg, waitBeatMs: number, queueing: Queueing, placeUs: number],
    reply: AcquireReply,
  ];
  /** Hash mode may add a waiting writer's placeUs, beatMs and leaseMs, to keep it queued (redlock mode). */
  release: [
    args:
      | readonly [holder: HolderArg, ...channels: Channels]
      | readonly [holder: HolderArg, placeUs: number, beatMs: number, leaseMs: number],
    reply: number,
  ];
  /**
   * KEYS: every lease's lock's keys, in order (the table below names one lock's: they pick the layout);
   * ARGV: the budget, then per lease the owner and the lease length.
   * Reply: the call's start (server µs) and its run by its clock (µs), then the lease left of each lock reached (lua/extend.lua).
   */
  extend: [args: readonly (string | number)[], reply: number[]];
  abandon: [args: readonly [owner: string, drop: string, ...channels: Channels], reply: number];
}

/**
 * Every script's KEYS, ARGV (as the header of its lua/ file lists them) and
 * reply. A script missing here does not compile: `runScript` indexes this
 * table by name. The key count is the length of the keys passed.
 */
interface ScriptTable {
  acquireRead: [HashKeys, ...LockOperations['acquireRead']];
  acquireWrite: [HashKeys, ...LockOperations['acquireWrite']];
  release: [HashKeys, ...LockOperations['release']];
  extend: [HashKeys, ...LockOperations['extend']];
  /**
   * KEYS: the first lock's keys (they route the call); ARGV: the budget, then per lease its lock's keys, owner and
   * lease length, undeclared (lua/extend-across-slots.lua: a Cluster that allows it, only).
   */
  extendAcrossSlots: [HashKeys, args: readonly (string | number)[], reply: number[]];
  abandon: [HashKeys, ...LockOperations['abandon']];
  /**
   * A waiting writer's heartbeat, moved on while the server refuses its tries for memory (any layout: the queue is in
   * the hash-mode keys of each); the reply is the new heartbeat deadline (server ms), 0 without a live place.
   */
  keepPlace: [HashKeys, args: readonly [owner: string, beatMs: number], reply: number];
  inspect: [HashKeys, args: InspectArgs, reply: InspectReply];
  legacyAcquireRead: [LegacyKeys, ...LockOperations['acquireRead']];
  legacyAcquireWrite: [LegacyKeys, ...LockOperations['acquireWrite']];
  legacyRelease: [LegacyKeys, ...LockOperations['release']];
  legacyExtend: [LegacyKeys, ...LockOperations['extend']];
  legacyAbandon: [LegacyKeys, ...LockOperations['abandon']];
  legacyInspect: [LegacyKeys, args: InspectArgs, reply: LegacyInspectReply];
  fencedSet: [
    keys: readonly [key: string, fenceKey: string],
    args: readonly [value: string | Buffer | number, fence: number, ttlMs: number],
    reply: [stored: number, lastFence: string],
  ];
  fencedGet: [keys: readonly [key: string, fenceKey: string], args: readonly [fence: number], reply: string | null];
  /** KEYS: every key of one lock; ARGV: the channels to wake. */
  forceRelease: [keys: readonly string[], args: Channels, reply: string[]];
}

/**
 * The scripts that run lock operation `Op` on a layout whose KEYS are `Keys`:
 * those whose arguments and reply are exactly the operation's.
 */
export type OperationScript<Op extends LockOperation, Keys extends LayoutKeys = LayoutKeys> = {
  [N in ScriptName]: ScriptTable[N][0] extends Keys
    ? [ScriptTable[N][1], ScriptTable[N][2]] extends LockOperations[Op]
      ? LockOperations[Op] extends [ScriptTable[N][1], ScriptTable[N][2]]
        ? N
        : never
      : never
    : never;
}[ScriptName];

/** An operation every layout runs with a script of its own. */
export type LockOperation = keyof LockOperations;

/** The KEYS of script `N`: the extend scripts take the keys of every lock they renew, one lock's after another. */
export type ScriptKeys<N extends ScriptName> = N extends 'extend' | 'legacyExtend' ? readonly string[] : ScriptTable[N][0];
/** The arguments (ARGV) of script `N`. */
export type ScriptArgs<N extends ScriptName> = ScriptTable[N][1];
/** The reply of script `N`. */
export type ScriptReply<N extends ScriptName> = ScriptTable[N][2];

/**
 * How long the library tries a script call again while its slot migrates
 * between Cluster masters. ioredis follows ASK and MOVED and retries
 * TRYAGAIN itself, but gives up after `maxRedirections` (16 by default,
 * `retryDelayOnTryAgain` 100 ms apart: about 1.6 s of TRYAGAIN), and while
 * a slot migrates a script on a lock whose keys are not all on one side gets
 * TRYAGAIN until the migration ends. Each of the library's tries may take
 * ioredis' 1.6 s, so a call keeps trying for 3 to about 4.6 s in all (less
 * when the acquire's own bound, `waitMs` + 250 ms or `redisTimeoutMs`, ends
 * it first). node-redis follows ASK and MOVED (16 redirections) but passes
 * TRYAGAIN on at once: there the library's tries are all there is.
 */
export const MIGRATION_RETRY_MS = 3_000;

/**
 * Runs script `name` through `client`'s driver, with its KEYS and ARGV (the
 * key count first: EVALSHA's arguments). `lock`, when given, is the lock the
 * keys are of: its slot (read only on a Cluster, where it names the
 * connection) lets the driver join the call's write to others of the same
 * tick. On a Cluster, a call refused because its slot is being migrated is
 * tried again, with backoff, for up to {@link MIGRATION_RETRY_MS}. (On one
 * server the driver's own promise is returned: no wrapper on the hot path.)
 */
export function runScript<N extends ScriptName>(
  client: Driver,
  name: N,
  keys: ScriptKeys<N>,
  args: ScriptArgs<N>,
  lock?: SlotOf,
): Promise<ScriptReply<N>> {
  const check = serverChecks.get(client);
  if (check === undefined) return checkServer(client).then(() => runScript(client, name, keys, args, lock));
  if (check !== true)
    return check.then(
      () => runScript(client, name, keys, args, lock),
      (error: unknown) => recheck(client, check, error, () => runScript(client, name, keys, args, lock)),
    );
  const flat: ScriptArg[] = [keys.length, ...keys, ...args];
  const first = client.script(name, flat, lock) as Promise<ScriptReply<N>>;
  if (!client.cluster) return first;
  return first.catch((error: unknown) => retryWhileMigrating(client, name, flat, error)) as Promise<ScriptReply<N>>;
}

/** Each client's server check: `true` once passed, its promise while it runs or after it failed for good. */
const serverChecks = new WeakMap<Driver, true | Promise<void>>();

/** The commands the server check asks for, and what each is needed for. */
const NEEDED_COMMANDS = {
  SPUBLISH: 'sharded pub/sub, for wake-ups',
  PEXPIRETIME: "the deadline of a holder kept in the lock's hash",
  TIME: 'leases and fences, which are read from the server clock inside the scripts',
} as const;

/**
 * Checks, once per client before its first script, that the server has what
 * the scripts need: `SPUBLISH` and `PEXPIRETIME` (Redis 7.0, which also
 * brought script flags), and `TIME` (some services leave it out). On a server
 * without them the first acquire could be granted and its release fail,
 * leaving the lock held for a lease, so nothing runs until this passes. A
 * server that refuses `COMMAND INFO` (an ACL without it, a proxy) cannot
 * tell, and the scripts run: their own errors then say what failed. One
 * that cannot answer now (BUSY, LOADING) is checked again on the next call.
 * It also begins reading every master's memory policy (`eviction.ts`; on a
 * Cluster once the client answered, and knows its masters), which no script
 * waits for.
 */
function checkServer(client: Driver): Promise<void> {
  const names = Object.keys(NEEDED_COMMANDS) as (keyof typeof NEEDED_COMMANDS)[];
  const commandInfo = client.command(['COMMAND', 'INFO', ...names]);
  checkMemory(client, client.cluster ? commandInfo : Promise.resolve());
  const check = Promise.all([commandInfo, client.cluster ? null : clusterNode(client)]).then(
    ([reply]) => {
      const missing = Array.isArray(reply) ? names.filter((_, i) => reply[i] == null) : [];
      if (missing.length > 0) {
        const needs = missing.map((name) => `${name} (${NEEDED_COMMANDS[name]})`).join(', ');
        throw new UnsupportedServerError(
          `the Redis server has no ${missing.join(' or ')} command (COMMAND INFO answered nothing for it); redis-rwlock needs ${needs}: ` +
            'Redis 7.0 or later, or a compatible server (Valkey 7.2 or later) with these commands and script flags: upgrade the server, or choose another',
        );
      }
      serverChecks.set(client, true);
    },
    (error: unknown) => {
      if (!refusedForGood(client, error)) {
        serverChecks.delete(client); // not answered, or not now (BUSY, LOADING): check again on the next call
        throw error;
      }
      serverChecks.set(client, true);
    },
  );
  serverChecks.set(client, check);
  return check;
}

/**
 * `onEvictionRisk: 'refuse'`, before an acquire's script: throws
 * `EvictionRiskError` when a master of `client` may evict lock keys (a
 * promise of it while the server check's first read of them runs, which this
 * begins if no call did yet); undefined when none may.
 */
export function refusedForEviction(client: Driver, context: RWLockErrorContext): Promise<void> | undefined {
  if (!serverChecks.has(client)) checkServer(client).catch(() => undefined); // its failure is the script's to report
  return refuseIfEvicting(client, context);
}

/**
 * A call that joined another's server check, which then went unanswered
 * (sent before an outage, it timed out on the client while this call is
 * newer): checks again for this call, once, or joins the check already
 * started again. A check that failed for good fails the call.
 */
function recheck<T>(client: Driver, joined: Promise<void>, error: unknown, then: () => Promise<T>): Promise<T> {
  const now = serverChecks.get(client);
  if (now === joined) throw error;
  return now === true ? then() : (now ?? checkServer(client)).then(then);
}

/**
 * Refuses a plain connection to a Redis Cluster node (`INFO cluster` says
 * `cluster_enabled:1`): it would see that node's slots only, and every lock
 * of another slot would fail with MOVED. A server that refuses `INFO`
 * cannot tell (MOVED then says it, through `redisFailure`).
 */
async function clusterNode(client: Driver): Promise<void> {
  const info = await client.command(['INFO', 'cluster']).catch((error: unknown) => {
    if (refusedForGood(client, error)) return '';
    throw error;
  });
  if (typeof info === 'string' && /^cluster_enabled:1\s*$/m.test(info))
    throw new UnsupportedServerError(`INFO cluster says cluster_enabled:1: ${PLAIN_CLUSTER_NODE}`);
}

/** Tries a refused call again, with backoff, while the refusal says its slot is migrating. */
async function retryWhileMigrating(client: Driver, name: ScriptName, args: ScriptArg[], error: unknown): Promise<unknown> {
  const deadline = performance.now() + MIGRATION_RETRY_MS;
  for (let delay = 25; ; delay = Math.min(2 * delay, 400)) {
    if (!client.notRunWhileMigrating(error) || performance.now() + delay > deadline) throw error;
    await new Promise((resolve) => setTimeout(resolve, delay));
    try {
      return await client.script(name, args);
    } catch (next) {
      error = next;
    }
  }
}
