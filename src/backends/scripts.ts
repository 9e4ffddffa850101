import type { Writable } from 'node:stream';
import type { Cluster, Redis } from 'ioredis';
import { UnsupportedServerError } from '../errors.js';
import { LUA_SOURCES } from '../lua/scripts.generated.js';
import { isCluster, type RedisClient } from '../redis.js';

/** Keys per script; `undefined` means the caller passes the key count first (variadic). */
const NUMBER_OF_KEYS = {
  acquireRead: 3,
  acquireWrite: 3,
  release: 3,
  extend: undefined,
  inspect: 3,
  abandon: 3,
  fencedSet: 2,
  fencedGet: 2,
  forceRelease: undefined,
  legacyAcquireRead: 6,
  legacyAcquireWrite: 6,
  legacyRelease: 6,
  legacyExtend: undefined,
  legacyInspect: 6,
  legacyAbandon: 6,
} as const satisfies Record<keyof typeof LUA_SOURCES, number | undefined>;

export type ScriptName = keyof typeof LUA_SOURCES;

/** A hash-mode lock's keys, in their KEYS order: state, leases, queue. */
export type HashKeys = readonly [state: string, leases: string, queue: string];
/** A legacy/bridge lock's keys, in their KEYS order (see `legacyNames`). */
export type LegacyKeys = readonly [read: string, write: string, readers: string, state: string, leases: string, queue: string];
/** `'1'` or `'0'`: a flag as the scripts read it. */
type Flag = '0' | '1';
/** A variadic script's arguments: its key count first, then keys and arguments (see the script's header). */
type Variadic = readonly (string | number)[];

/** An acquire script's reply (lua/acquire-write.lua): the bare fence, or [1, fence, lease left] / [0, retry after, reason]. */
export type AcquireReply = number | [number, number, (number | string)?];

/**
 * Every script's arguments (its KEYS, then its ARGV, as the header of its
 * lua/ file lists them) and its reply. A script missing here does not
 * compile: `runScript` indexes this table by name.
 */
interface ScriptTable {
  acquireRead: [args: readonly [...HashKeys, owner: string, leaseMs: number, honourIntent: Flag, holdId: string], reply: AcquireReply];
  acquireWrite: [
    args: readonly [...HashKeys, owner: string, leaseMs: number, waitBeatMs: number, fair: Flag, holdId: string],
    reply: AcquireReply,
  ];
  release: [args: readonly [...HashKeys, owner: string, mode: string, holdId: string], reply: number];
  extend: [args: Variadic, reply: number[]];
  inspect: [args: HashKeys, reply: [nowMs: number, fields: string[], leases: string[], queue: string[]]];
  abandon: [args: readonly [...HashKeys, owner: string, drop: string, channel: string], reply: number];
  fencedSet: [
    args: readonly [key: string, fenceKey: string, value: string, fence: number, ttlMs: number],
    reply: [stored: number, lastFence: string],
  ];
  fencedGet: [args: readonly [key: string, fenceKey: string, fence: number], reply: string | null];
  forceRelease: [args: Variadic, reply: string[]];
  legacyAcquireRead: [
    args: readonly [...LegacyKeys, owner: string, leaseMs: number, honourIntent: Flag, holdId: string],
    reply: AcquireReply,
  ];
  legacyAcquireWrite: [
    args: readonly [...LegacyKeys, owner: string, leaseMs: number, waitBeatMs: number, fair: Flag, holdId: string],
    reply: AcquireReply,
  ];
  legacyRelease: [
    args: readonly [...LegacyKeys, owner: string, mode: string, channel: string, peerChannel: string, holdId: string],
    reply: number,
  ];
  legacyExtend: [args: Variadic, reply: number[]];
  legacyInspect: [
    args: LegacyKeys,
    reply: [
      nowMs: number,
      fields: string[],
      leases: string[],
      queue: string[],
      readValue: string | null,
      readTtl: number,
      writeValue: string | null,
      writeTtl: number,
      readers: string[],
    ],
  ];
  legacyAbandon: [args: readonly [...LegacyKeys, owner: string, drop: string, channel: string, peerChannel: string], reply: number];
}

/** The arguments of script `N`. */
export type ScriptArgs<N extends ScriptName> = ScriptTable[N][0];
/** The reply of script `N`. */
export type ScriptReply<N extends ScriptName> = ScriptTable[N][1];

/** The command name a script is defined under on a client: namespaced, so it cannot clash with the user's own. */
export const commandName = (name: ScriptName): string => `rwlock_${name}`;

/** Whatever knows the Cluster slot of a script's keys (read only on a Cluster: hashing costs). */
type SlotOf = { readonly slot: number };

type Invoke = (...args: readonly (string | number)[]) => Promise<unknown>;

const defined = new WeakSet<object>();

/**
 * Defines the scripts on `client` (once per client) with ioredis
 * `defineCommand`, which sends EVAL the first time on each connection and
 * EVALSHA after, and resends on NOSCRIPT (after SCRIPT FLUSH or a failover).
 */
export function defineScripts(client: RedisClient): void {
  if (defined.has(client)) return;
  for (const name of Object.keys(LUA_SOURCES) as ScriptName[]) {
    const numberOfKeys = NUMBER_OF_KEYS[name];
    client.defineCommand(
      commandName(name),
      numberOfKeys === undefined ? { lua: LUA_SOURCES[name] } : { lua: LUA_SOURCES[name], numberOfKeys },
    );
  }
  defined.add(client);
}

/**
 * How long the library tries a script call again while its slot migrates
 * between Cluster masters. ioredis follows ASK and MOVED and retries
 * TRYAGAIN itself, but gives up after `maxRedirections` (16 by default,
 * `retryDelayOnTryAgain` 100 ms apart: about 1.6 s of TRYAGAIN), and while
 * a slot migrates a script on a lock whose keys are not all on one side gets
 * TRYAGAIN until the migration ends. Each of the library's tries may take
 * ioredis' 1.6 s, so a call keeps trying for 3 to about 4.6 s in all (less
 * when the acquire's own bound, `waitMs` + 250 ms or `redisTimeoutMs`, ends
 * it first).
 */
export const MIGRATION_RETRY_MS = 3_000;

/**
 * A reply that proves the script did not run: the slot is being migrated
 * (TRYAGAIN), or ioredis ran out of redirections following one.
 */
const NOT_RUN_WHILE_MIGRATING = /^(?:TRYAGAIN|Too many Cluster redirections\. Last error: (?:ReplyError: )?(?:TRYAGAIN|ASK|MOVED) )/;

/**
 * Runs script `name` on `client`, which must have been passed to
 * {@link defineScripts}. On a Cluster, a call refused because its slot is
 * being migrated is tried again, with backoff, for up to {@link MIGRATION_RETRY_MS}.
 * (On one server the call's own promise is returned: no wrapper on the hot path.)
 * The call's write joins the others of this tick on its connection (see
 * {@link coalesceWrites}); on a Cluster only when `keys`, the lock's names,
 * tell the connection by their slot.
 */
export function runScript<N extends ScriptName>(client: RedisClient, name: N, args: ScriptArgs<N>, keys?: SlotOf): Promise<ScriptReply<N>> {
  const check = serverChecks.get(client);
  if (check !== true) return (check ?? checkServer(client)).then(() => runScript(client, name, args, keys));
  const invoke = (client as unknown as Record<string, Invoke>)[commandName(name)] as Invoke;
  if (!isCluster(client)) {
    coalesceWrites(client);
    return invoke.call(client, ...(args as readonly (string | number)[])) as Promise<ScriptReply<N>>;
  }
  if (keys !== undefined) coalesceWrites(masterOf(client, keys.slot));
  const first = invoke.call(client, ...(args as readonly (string | number)[])) as Promise<ScriptReply<N>>;
  return first.catch((error: unknown) => retryWhileMigrating(client, invoke, args as readonly (string | number)[], error)) as Promise<
    ScriptReply<N>
  >;
}

/** Commands a connection holds back within one tick before it writes them out together. */
const COALESCE_BATCH = 16;

/** ioredis' queue of the commands a connection sent and awaits answers to (not in its typings). */
type InFlight = { readonly commandQueue?: { readonly length: number } };

/** Connections holding back writes until the end of this tick, with how many commands each holds. */
const corked = new WeakMap<Writable, number>();

/**
 * Holds back the writes on `connection` (the next command is about to be
 * written to it) until the end of this tick, or until it holds
 * {@link COALESCE_BATCH} commands. At many cycles in flight, a socket write
 * per command was most of a cycle's client CPU, and the server reads a batch
 * in one go too; a batch of 16 keeps both busy (one batch per tick made
 * client and server wait for each other). The order of writes, the user's own
 * commands on the connection among them, stays as it was.
 *
 * A call on a connection with nothing in flight goes out at once: nothing
 * would join it, and synchronous work after it in the same tick (an
 * event-loop stall) must not keep it off the wire past its bound.
 */
function coalesceWrites(connection: Redis | undefined): void {
  const stream = connection?.stream as Writable | undefined;
  if (stream === undefined || !stream.writable) return;
  const held = corked.get(stream);
  if (held === undefined) {
    if ((connection as unknown as InFlight).commandQueue?.length === 0) return;
    stream.cork();
    process.nextTick(writeOut, stream);
  } else if (held === COALESCE_BATCH) {
    // A full batch goes now; this command starts the next.
    stream.uncork();
    stream.cork();
  }
  corked.set(stream, held === undefined || held === COALESCE_BATCH ? 1 : held + 1);
}

function writeOut(stream: Writable): void {
  corked.delete(stream);
  stream.uncork();
}

/** The connection to the master that a Cluster client sends `slot`'s commands to (its pool is not in ioredis' typings). */
function masterOf(cluster: Cluster, slot: number): Redis | undefined {
  const node = cluster.slots[slot]?.[0];
  const pool = (cluster as unknown as { connectionPool?: { getInstanceByKey?(key: string): Redis | undefined } }).connectionPool;
  return node === undefined ? undefined : pool?.getInstanceByKey?.(node);
}

/** Each client's server check: `true` once passed, its promise while it runs or after it failed for good. */
const serverChecks = new WeakMap<RedisClient, true | Promise<void>>();

/**
 * Checks, once per client before its first script, that the server has what
 * the scripts need: `SPUBLISH` (Redis 7.0, which also brought script flags).
 * On an older server the first acquire would be granted and its release
 * fail, leaving the lock held for a lease, so nothing runs until this passes.
 * A server that refuses `COMMAND INFO` (an ACL without it, a proxy) cannot
 * tell, and the scripts run: their own errors then say what failed.
 */
function checkServer(client: RedisClient): Promise<void> {
  const check = (client.call('COMMAND', 'INFO', 'SPUBLISH') as Promise<unknown>).then(
    (reply) => {
      if (Array.isArray(reply) && reply[0] == null) {
        throw new UnsupportedServerError(
          'the Redis server has no SPUBLISH command (COMMAND INFO SPUBLISH answered nothing); redis-rwlock needs Redis 7.0 ' +
            'or later, or a compatible server (Valkey 7.2 or later) with SPUBLISH and script flags: upgrade the server',
        );
      }
      serverChecks.set(client, true);
    },
    (error: unknown) => {
      if ((error as { name?: unknown }).name !== 'ReplyError') {
        serverChecks.delete(client); // not answered: check again on the next call
        throw error;
      }
      serverChecks.set(client, true);
    },
  );
  serverChecks.set(client, check);
  return check;
}

/** Tries a refused call again, with backoff, while the refusal says its slot is migrating. */
async function retryWhileMigrating(
  client: RedisClient,
  invoke: Invoke,
  args: readonly (string | number)[],
  error: unknown,
): Promise<unknown> {
  const deadline = performance.now() + MIGRATION_RETRY_MS;
  for (let delay = 25; ; delay = Math.min(2 * delay, 400)) {
    const message = error instanceof Error ? error.message : String(error);
    if (!NOT_RUN_WHILE_MIGRATING.test(message) || performance.now() + delay > deadline) throw error;
    await new Promise((resolve) => setTimeout(resolve, delay));
    try {
      return await invoke.call(client, ...args);
    } catch (next) {
      error = next;
    }
  }
}
