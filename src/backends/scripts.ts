import type { Driver } from '../clients/driver.js';
import { UnsupportedServerError } from '../errors.js';
import type { LUA_SOURCES } from '../lua/scripts.generated.js';

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
  release: [args: readonly [...HashKeys, owner: string, mode: string, channel: string, holdId: string], reply: number];
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
 * Runs script `name` through `client`'s driver. On a Cluster, a call refused
 * because its slot is being migrated is tried again, with backoff, for up to
 * {@link MIGRATION_RETRY_MS}. (On one server the driver's own promise is
 * returned: no wrapper on the hot path.)
 */
export function runScript<N extends ScriptName>(client: Driver, name: N, args: ScriptArgs<N>): Promise<ScriptReply<N>> {
  const check = serverChecks.get(client);
  if (check !== true) return (check ?? checkServer(client)).then(() => runScript(client, name, args));
  const numberOfKeys = NUMBER_OF_KEYS[name];
  const flat = (numberOfKeys === undefined ? args : [numberOfKeys, ...args]) as readonly (string | number)[];
  const first = client.script(name, flat) as Promise<ScriptReply<N>>;
  if (!client.cluster) return first;
  return first.catch((error: unknown) => retryWhileMigrating(client, name, flat, error)) as Promise<ScriptReply<N>>;
}

/** Each client's server check: `true` once passed, its promise while it runs or after it failed for good. */
const serverChecks = new WeakMap<Driver, true | Promise<void>>();

/**
 * Checks, once per client before its first script, that the server has what
 * the scripts need: `SPUBLISH` (Redis 7.0, which also brought script flags).
 * On an older server the first acquire would be granted and its release
 * fail, leaving the lock held for a lease, so nothing runs until this passes.
 * A server that refuses `COMMAND INFO` (an ACL without it, a proxy) cannot
 * tell, and the scripts run: their own errors then say what failed.
 */
function checkServer(client: Driver): Promise<void> {
  const check = client.command(['COMMAND', 'INFO', 'SPUBLISH']).then(
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
      if (!client.isReplyError(error)) {
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
async function retryWhileMigrating(client: Driver, name: ScriptName, args: readonly (string | number)[], error: unknown): Promise<unknown> {
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
