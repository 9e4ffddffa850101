/**
 * The locks the bench compares, behind one small interface: a waiting
 * exclusive (or shared) acquire, and a release.
 *
 * - floor: ioredis `SET key token NX PX` plus an owner-checked release
 *   script (GET == token then DEL), the cheapest correct exclusive lock; a
 *   blocked floor waiter polls every `fastRetryMs`.
 * - floor-spin: the same, polling in a tight loop with no sleep (the next
 *   SET NX as soon as the last one answered): the fastest handoff a client
 *   can get, at the price of dozens of commands per grant.
 * - floor-immediate: the same, polling on `setImmediate` (the next SET NX
 *   after one turn of the event loop), which lets the process handle other
 *   replies between tries and hands over faster than floor-spin on a small
 *   machine. The handoff target is judged against the faster of the two.
 * - semaphore / semaphore-fast: redis-semaphore `Mutex`, default settings
 *   (retryInterval 10 ms) and fastest retry (retryInterval 1 ms).
 * - redlock / redlock-fast: @sesamecare-oss/redlock on the one server (or
 *   Cluster client), default settings (retryDelay 200 ms, jitter 100 ms,
 *   retryCount 10) and fastest retry (retryDelay 1 ms, no jitter).
 * - rwlock-write / rwlock-read / rwlock-mix: this library's LockClient with
 *   default options (auto-renewed 30 s leases); mix is 90 % read, 10 % write.
 *   rwlock-traced: rwlock-write with a subscriber (no-op handlers) on every
 *   event of the four tracing channels, subscribed during its own timed
 *   slices only, so the same run shows the cycle with and without one.
 *   rwlock-with: the write lock through `withWrite` (its function holds the
 *   cycle's lock until the cycle releases it), in the uncontended workload.
 *   rwlock-fair: the write lock with `fair: true` (strict arrival order),
 *   in the contended workloads only. rwlock-redlock: the write lock in
 *   `redlock` mode on three independent servers, in the contended workloads
 *   on the standalone topology only (a Cluster is one server to redlock).
 * - rwlock-node-redis / rwlock-node-redis-read: rwlock-write and rwlock-read on a node-redis 5 client (createClient,
 *   or createCluster on a Cluster) to the same servers, in the uncontended
 *   and contended workloads: the two client libraries side by side. (Its commands go
 *   through node-redis, so the run's sent-per-cycle count, which counts
 *   ioredis' writes, does not see them; the masters' script counts do.)
 * - floor-ap / semaphore-ap / rwlock-write-ap / rwlock-read-ap: floor,
 *   semaphore, rwlock-write and rwlock-read on a client made with
 *   `enableAutoPipelining: true` (the Cluster's option of that name on a
 *   Cluster), in the uncontended workload, in the same round-robin as the
 *   others: an application that autopipelines, against a floor and a Mutex
 *   that autopipeline too.
 * - rwlock-base: rwlock-write from another checkout of this library (`npm
 *   run bench -- --baseline <checkout>`), so one run compares a change with
 *   the code before it; left out without --baseline. rwlock-redlock-base:
 *   the same for rwlock-redlock, rwlock-base-ap for rwlock-write-ap,
 *   rwlock-base-read(-ap) for rwlock-read(-ap), rwlock-base-node-redis(-read)
 *   for rwlock-node-redis(-read).
 * - ref-string / ref-hash / ref-hash-args: references for the uncontended
 *   cycle, no library code at all. Two bare scripts that run just the
 *   commands of redis-rwlock's fresh grant and release, on a string key set
 *   with one SET NX PX (ref-string), on a hash (ref-hash), and on a hash with
 *   the keys and arguments redis-rwlock sends (ref-hash-args). Each step from
 *   the floor prices one thing: a script per operation, the hash, the
 *   arguments; from ref-hash-args to rwlock-write, the library's client work.
 * - ref-set-time / ref-multi: a fenced grant with no script, as a user would
 *   write it: `SET NX PX` and `TIME` for the fence in one pipeline
 *   (ref-set-time: not atomic, a force-release between the two could give a
 *   later holder the smaller fence), or in `MULTI`/`EXEC` (ref-multi); the
 *   floor's release script. They price a lock layout whose free lock is
 *   granted by native commands.
 * - fenced-floor / fenced-floor-ap: the cheapest lock with this library's
 *   guarantees for a free lock: `SET NX PX` and the server's clock (the fence)
 *   in one script, and the floor's compare-and-delete release; on an
 *   autopipelining client too. The anchor of the targets a bare `SET NX PX`
 *   cannot be (bench/targets.ts).
 */
import { randomUUID } from 'node:crypto';
import { tracingChannel } from 'node:diagnostics_channel';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redlock } from '@sesamecare-oss/redlock';
import type { Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { Mutex } from 'redis-semaphore';
import { LockClient, TRACING_CHANNELS } from '../src/index.js';
import { isCluster, type RedisClient } from '../src/redis.js';

export type LibName =
  | 'floor'
  | 'floor-spin'
  | 'floor-immediate'
  | 'semaphore'
  | 'semaphore-fast'
  | 'redlock'
  | 'redlock-fast'
  | 'rwlock-write'
  | 'rwlock-fair'
  | 'rwlock-redlock'
  | 'rwlock-read'
  | 'rwlock-mix'
  | 'rwlock-traced'
  | 'rwlock-with'
  | 'rwlock-base'
  | 'rwlock-base-ap'
  | 'rwlock-redlock-base'
  | 'rwlock-node-redis'
  | 'rwlock-node-redis-read'
  | 'rwlock-base-read'
  | 'rwlock-base-read-ap'
  | 'rwlock-base-node-redis'
  | 'rwlock-base-node-redis-read'
  | 'floor-ap'
  | 'semaphore-ap'
  | 'rwlock-write-ap'
  | 'rwlock-read-ap'
  | 'ref-string'
  | 'ref-hash'
  | 'ref-hash-args'
  | 'ref-set-time'
  | 'ref-multi'
  | 'fenced-floor'
  | 'fenced-floor-ap';

export const EXCLUSIVE_LIBS: readonly LibName[] = [
  'floor',
  'floor-spin',
  'floor-immediate',
  'semaphore',
  'semaphore-fast',
  'redlock',
  'redlock-fast',
  'rwlock-write',
  'rwlock-fair',
  'rwlock-redlock',
  'rwlock-base',
  'rwlock-redlock-base',
  'rwlock-node-redis',
];
/** In uncontended cycles the retry settings never come into play, so only the defaults are run. */
export const UNCONTENDED_LIBS: readonly LibName[] = [
  'floor',
  'semaphore',
  'redlock',
  'rwlock-write',
  'rwlock-read',
  'rwlock-mix',
  'rwlock-traced',
  'rwlock-with',
  'rwlock-base',
  'rwlock-base-read',
  'rwlock-node-redis',
  'rwlock-node-redis-read',
  'rwlock-base-node-redis',
  'rwlock-base-node-redis-read',
  'ref-string',
  'ref-hash',
  'ref-hash-args',
  'ref-set-time',
  'ref-multi',
  'fenced-floor',
  'floor-ap',
  'fenced-floor-ap',
  'semaphore-ap',
  'rwlock-write-ap',
  'rwlock-read-ap',
  'rwlock-base-ap',
  'rwlock-base-read-ap',
];

/** The libraries run on a client with `enableAutoPipelining: true`: the uncontended ones named `-ap`. */
export const AUTOPIPELINED_LIBS: readonly LibName[] = UNCONTENDED_LIBS.filter((lib) => lib.endsWith('-ap'));

/** The fenced floor a lock is compared with, on an autopipelining client when the lock is on one. */
export function fencedPeerOf(lib: LibName): LibName {
  return AUTOPIPELINED_LIBS.includes(lib) ? 'fenced-floor-ap' : 'fenced-floor';
}

/** The floor or redis-semaphore a lock is compared with: for an autopipelining one, on an autopipelining client too. */
export function peerOf(lib: LibName, peer: 'floor' | 'semaphore'): LibName {
  return AUTOPIPELINED_LIBS.includes(lib) ? `${peer}-ap` : peer;
}

export const LIB_LABEL: Record<LibName, string> = {
  floor: 'floor (SET NX PX)',
  'floor-spin': 'floor, busy polling (no sleep)',
  'floor-immediate': 'floor, polling on setImmediate (no sleep)',
  semaphore: 'redis-semaphore Mutex',
  'semaphore-fast': 'redis-semaphore Mutex (retry 1 ms)',
  redlock: 'redlock',
  'redlock-fast': 'redlock (retry 1 ms)',
  'rwlock-write': 'redis-rwlock write',
  'rwlock-fair': 'redis-rwlock write (fair: true)',
  'rwlock-redlock': "redis-rwlock write, mode 'redlock' on 3 servers",
  'rwlock-read': 'redis-rwlock read',
  'rwlock-mix': 'redis-rwlock 90/10 mix',
  'rwlock-traced': 'redis-rwlock write, tracing channels subscribed',
  'rwlock-with': 'redis-rwlock write, through withWrite',
  'rwlock-base': 'redis-rwlock write, the baseline checkout (--baseline)',
  'rwlock-base-ap': 'redis-rwlock write, the baseline checkout (--baseline), autopipelining',
  'rwlock-redlock-base': "redis-rwlock write, mode 'redlock', the baseline checkout",
  'rwlock-node-redis': 'redis-rwlock write, on node-redis 5',
  'rwlock-node-redis-read': 'redis-rwlock read, on node-redis 5',
  'rwlock-base-read': 'redis-rwlock read, the baseline checkout (--baseline)',
  'rwlock-base-read-ap': 'redis-rwlock read, the baseline checkout (--baseline), autopipelining',
  'rwlock-base-node-redis': 'redis-rwlock write on node-redis 5, the baseline checkout (--baseline)',
  'rwlock-base-node-redis-read': 'redis-rwlock read on node-redis 5, the baseline checkout (--baseline)',
  'ref-string': 'reference: bare grant + release scripts, string key',
  'ref-hash': "reference: the same on a hash (redis-rwlock's commands)",
  'ref-hash-args': "reference: the same with redis-rwlock's keys and arguments",
  'ref-set-time': 'reference: SET NX PX + TIME in one pipeline, no script',
  'ref-multi': 'reference: SET NX PX + TIME in MULTI/EXEC, no script',
  'fenced-floor': 'fenced floor (SET NX PX + TIME in one script)',
  'fenced-floor-ap': 'fenced floor (SET NX PX + TIME in one script), autopipelining',
  'floor-ap': 'floor (SET NX PX), autopipelining',
  'semaphore-ap': 'redis-semaphore Mutex, autopipelining',
  'rwlock-write-ap': 'redis-rwlock write, autopipelining',
  'rwlock-read-ap': 'redis-rwlock read, autopipelining',
};

export interface Held {
  release(): Promise<void>;
}

export interface AcquireSpec {
  /** Shared (read) or exclusive; only the rwlock adapters can share. */
  readonly mode: 'read' | 'write';
  /** Ends a wait early (the acquire then rejects). */
  readonly signal?: AbortSignal;
}

export interface LockAdapter {
  /** Waits for the lock (with the library's own wait limit); rejects when it gives up. */
  acquire(resource: string, spec: AcquireSpec): Promise<Held>;
  close(): Promise<void>;
  /** Called with true before each of this library's timed slices (and its warm-up), with false after. */
  measuring?(on: boolean): void;
}

/** How long the exclusive locks are taken for (the rwlock adapters use their default, also 30 s, auto-renewed). */
export const LOCK_TTL_MS = 30_000;
/** How long a floor waiter polls before it gives up (as redis-semaphore's default acquireTimeout). */
const FLOOR_WAIT_MS = 10_000;

const RELEASE_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

type FloorClient = RedisClient & { benchFloorRelease(key: string, token: string): Promise<number> };

/** The fenced floor's grant: SET NX PX and, when it took the lock, the server's clock in µs as the fence (0: taken). */
export const FENCED_GRANT_LUA = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  return t[1] * 1000000 + t[2]
end
return 0`;

type FencedClient = FloorClient & { benchFencedGrant(key: string, token: string, ms: number): Promise<number> };

/**
 * The commands of lua/includes/fresh-grant.lua and of release.lua's sole-holder
 * path, with no other logic (hash), and the same grant on a string key holding
 * `<fence>:<owner>` (string). KEYS: state, leases; ARGV: owner, leaseMs.
 */
const REF_SCRIPTS = {
  hash: {
    grant: `if redis.call('EXISTS', KEYS[1], KEYS[2]) == 0 then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'f', t[1] .. string.sub('00000' .. t[2], -6), 'o', ARGV[1], 'v', '2')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return t[1] * 1000000 + t[2]
end
return 0`,
    release: `if redis.call('HGET', KEYS[1], 'o') == ARGV[1] then redis.call('DEL', KEYS[1]) return 0 end
return -1`,
  },
  string: {
    grant: `local t = redis.call('TIME')
local fence = t[1] .. string.sub('00000' .. t[2], -6)
if redis.call('SET', KEYS[1], fence .. ':' .. ARGV[1], 'NX', 'PX', ARGV[2]) then return t[1] * 1000000 + t[2] end
return 0`,
    release: `local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 18) == ARGV[1] then redis.call('DEL', KEYS[1]) return 0 end
return -1`,
  },
} as const;

type RefClient = RedisClient & Record<string, (...args: (string | number)[]) => Promise<number>>;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The LockClient of the baseline checkout, once {@link loadBaseline} ran. */
let Baseline: typeof LockClient | undefined;

/**
 * Loads the library from another checkout (its `src/`, with its generated
 * Lua: run `node scripts/gen-lua.mjs` there first) for `rwlock-base`.
 */
export async function loadBaseline(checkout: string): Promise<void> {
  const entry = path.resolve(checkout, 'src', 'index.ts');
  Baseline = ((await import(pathToFileURL(entry).href)) as { LockClient: typeof LockClient }).LockClient;
}

/** True once a baseline checkout is loaded. */
export const hasBaseline = (): boolean => Baseline !== undefined;

/** The baseline checkout's LockClient, once loaded. */
export const baselineLockClient = (): typeof LockClient | undefined => Baseline;

/** The libraries of the baseline checkout, run only with --baseline. */
export const BASELINE_LIBS: readonly LibName[] = [
  'rwlock-base',
  'rwlock-base-ap',
  'rwlock-base-read',
  'rwlock-base-read-ap',
  'rwlock-base-node-redis',
  'rwlock-base-node-redis-read',
  'rwlock-redlock-base',
];

/** The libraries that run in `redlock` mode, on one client per server. */
export const REDLOCK_LIBS: readonly LibName[] = ['rwlock-redlock', 'rwlock-redlock-base'];

/** `redis` is one client, or for {@link REDLOCK_LIBS} one client on each of its servers. */
export function makeAdapter(lib: LibName, redis: RedisClient | readonly RedisClient[], fastRetryMs: number): LockAdapter {
  if (Array.isArray(redis)) {
    if (lib === 'rwlock-redlock') return rwlockAdapter(new LockClient(redis, { mode: 'redlock' }));
    if (lib !== 'rwlock-redlock-base') throw new Error(`${lib} runs on one client`);
    if (!Baseline) throw new Error('rwlock-redlock-base needs --baseline <checkout>');
    return rwlockAdapter(new Baseline(redis, { mode: 'redlock' }) as LockClient);
  }
  return singleClientAdapter(lib, redis as RedisClient, fastRetryMs);
}

function singleClientAdapter(lib: LibName, redis: RedisClient, fastRetryMs: number): LockAdapter {
  switch (lib) {
    case 'floor':
    case 'floor-ap':
    case 'floor-spin':
    case 'floor-immediate': {
      redis.defineCommand('benchFloorRelease', { numberOfKeys: 1, lua: RELEASE_LUA });
      const pause =
        lib === 'floor-spin'
          ? undefined
          : lib === 'floor-immediate'
            ? () => new Promise<void>((resolve) => setImmediate(resolve))
            : () => sleep(fastRetryMs);
      const client = redis as FloorClient;
      return {
        async acquire(resource, { signal }) {
          const key = `floor:${resource}`;
          const token = randomUUID();
          const deadline = performance.now() + FLOOR_WAIT_MS;
          for (;;) {
            if ((await client.set(key, token, 'PX', LOCK_TTL_MS, 'NX')) === 'OK') {
              return { release: async () => void (await client.benchFloorRelease(key, token)) };
            }
            signal?.throwIfAborted();
            if (performance.now() > deadline) throw new Error(`floor: timed out waiting for ${key}`);
            if (pause) await pause();
          }
        },
        close: async () => undefined,
      };
    }
    case 'semaphore':
    case 'semaphore-ap':
    case 'semaphore-fast': {
      const options = lib === 'semaphore-fast' ? { retryInterval: fastRetryMs } : {};
      return {
        async acquire(resource, { signal }) {
          const mutex = new Mutex(redis as Redis, `semaphore:${resource}`, options);
          await mutex.acquire(signal);
          return { release: () => mutex.release() };
        },
        close: async () => undefined,
      };
    }
    case 'redlock':
    case 'redlock-fast': {
      const redlock = new Redlock([redis], lib === 'redlock' ? {} : { retryDelay: fastRetryMs, retryJitter: 0, retryCount: 10_000 });
      // Redlock emits 'error' for every refused attempt; they are expected here.
      redlock.on('error', () => undefined);
      return {
        async acquire(resource) {
          const lock = await redlock.acquire([`redlock:${resource}`], LOCK_TTL_MS);
          return { release: async () => void (await lock.release()) };
        },
        close: async () => undefined,
      };
    }
    case 'ref-string':
    case 'ref-hash':
    case 'ref-hash-args': {
      const layout = lib === 'ref-string' ? 'string' : 'hash';
      // ref-hash-args declares and sends what redis-rwlock's write scripts do: KEYS
      // state, leases, queue; the grant's ARGV owner, leaseMs, waitBeatMs, fair; the
      // release's owner, mode, channel. The scripts ignore the extra ones.
      const full = lib === 'ref-hash-args';
      const grant = `benchRef_${lib}_grant`;
      const release = `benchRef_${lib}_release`;
      redis.defineCommand(grant, { numberOfKeys: full ? 3 : 2, lua: REF_SCRIPTS[layout].grant });
      redis.defineCommand(release, { numberOfKeys: full ? 3 : 1, lua: REF_SCRIPTS[layout].release });
      const client = redis as RefClient;
      return {
        async acquire(resource) {
          const key = `${lib}:{${resource}}`;
          const owner = randomUUID();
          const granted = full
            ? await client[grant]!(key, `${key}:leases`, `${key}:queue`, owner, LOCK_TTL_MS, 0, '0')
            : await client[grant]!(key, `${key}:leases`, owner, LOCK_TTL_MS);
          if (granted === 0) throw new Error(`${lib}: ${key} is taken`);
          return {
            release: async () =>
              void (full
                ? await client[release]!(key, `${key}:leases`, `${key}:queue`, owner, 'write', `${key}:wake`)
                : await client[release]!(key, owner)),
          };
        },
        close: async () => undefined,
      };
    }
    case 'fenced-floor':
    case 'fenced-floor-ap': {
      redis.defineCommand('benchFloorRelease', { numberOfKeys: 1, lua: RELEASE_LUA });
      redis.defineCommand('benchFencedGrant', { numberOfKeys: 1, lua: FENCED_GRANT_LUA });
      const client = redis as FencedClient;
      return {
        async acquire(resource) {
          const key = `fenced:${resource}`;
          const token = randomUUID();
          if ((await client.benchFencedGrant(key, token, LOCK_TTL_MS)) === 0) throw new Error(`${lib}: ${key} is taken`);
          return { release: async () => void (await client.benchFloorRelease(key, token)) };
        },
        close: async () => undefined,
      };
    }
    case 'ref-set-time':
    case 'ref-multi': {
      redis.defineCommand('benchFloorRelease', { numberOfKeys: 1, lua: RELEASE_LUA });
      const floor = redis as FloorClient;
      return {
        async acquire(resource) {
          const key = `${lib}:{${resource}}`;
          const owner = randomUUID();
          const batch = lib === 'ref-multi' ? redis.multi() : redis.pipeline();
          const replies = await batch.set(key, owner, 'PX', LOCK_TTL_MS, 'NX').time().exec();
          if (replies?.[0]?.[1] !== 'OK') throw new Error(`${lib}: ${key} is taken`);
          return { release: async () => void (await floor.benchFloorRelease(key, owner)) };
        },
        close: async () => undefined,
      };
    }
    case 'rwlock-base':
    case 'rwlock-base-ap':
    case 'rwlock-base-read':
    case 'rwlock-base-read-ap': {
      if (!Baseline) throw new Error(`${lib} needs --baseline <checkout>`);
      return rwlockAdapter(new Baseline(redis) as LockClient);
    }
    case 'rwlock-redlock':
    case 'rwlock-redlock-base':
      throw new Error(`${lib} runs on one client per server: pass them all`);
    case 'rwlock-node-redis':
    case 'rwlock-node-redis-read':
    case 'rwlock-base-node-redis':
    case 'rwlock-base-node-redis-read': {
      const Locks = lib.startsWith('rwlock-base') ? Baseline : LockClient;
      if (!Locks) throw new Error(`${lib} needs --baseline <checkout>`);
      // A node-redis client to the same server or Cluster as `redis`, connected during the warm-up's first cycle.
      const client = isCluster(redis)
        ? createCluster({ rootNodes: redis.nodes('master').map((n) => ({ socket: { host: n.options.host, port: n.options.port } })) })
        : createClient({ socket: { host: redis.options.host, port: redis.options.port } });
      let locks: LockClient | undefined;
      const connected = client.connect().then(() => (locks = new Locks(client)));
      return {
        async acquire(resource, { mode, signal }) {
          const lock = (locks ?? (await connected)).lock(resource);
          const lease = await (mode === 'read' ? lock.acquireRead({ signal }) : lock.acquireWrite({ signal }));
          return { release: () => lease.release() };
        },
        close: async () => {
          await (await connected).close();
          client.destroy();
        },
      };
    }
    case 'rwlock-write':
    case 'rwlock-fair':
    case 'rwlock-read':
    case 'rwlock-mix':
    case 'rwlock-traced':
    case 'rwlock-write-ap':
    case 'rwlock-read-ap':
      return rwlockAdapter(new LockClient(redis, lib === 'rwlock-fair' ? { fair: true } : {}), lib === 'rwlock-traced');
    case 'rwlock-with':
      return withWriteAdapter(new LockClient(redis));
  }
}

/** The write lock as `withWrite` gives it: held while its function runs, which ends at the cycle's release. */
function withWriteAdapter(locks: LockClient): LockAdapter {
  return {
    async acquire(resource, { signal }) {
      let entered!: () => void;
      let leave!: () => void;
      const inside = new Promise<void>((resolve) => (entered = resolve));
      const left = new Promise<void>((resolve) => (leave = resolve));
      const call = locks.withWrite(
        resource,
        () => {
          entered();
          return left;
        },
        { signal },
      );
      await Promise.race([inside, call]); // a failed acquire rejects `call`
      return {
        release: () => {
          leave();
          return call;
        },
      };
    },
    close: () => locks.close(),
  };
}

function rwlockAdapter(locks: LockClient, traced = false): LockAdapter {
  const subscriber = traced ? tracingSubscriber() : undefined;
  return {
    async acquire(resource, { mode, signal }) {
      const lock = locks.lock(resource);
      const lease = await (mode === 'read' ? lock.acquireRead({ signal }) : lock.acquireWrite({ signal }));
      return { release: () => lease.release() };
    },
    close: async () => {
      subscriber?.(false);
      await locks.close();
    },
    ...(subscriber && { measuring: subscriber }),
  };
}

/** Subscribes (true) or unsubscribes (false) no-op handlers on every event of the library's tracing channels. */
function tracingSubscriber(): (on: boolean) => void {
  const noop = () => undefined;
  const handlers = { start: noop, end: noop, asyncStart: noop, asyncEnd: noop, error: noop };
  const channels = Object.values(TRACING_CHANNELS).map((name) => tracingChannel(name));
  let subscribed = false;
  return (on) => {
    if (on === subscribed) return;
    subscribed = on;
    for (const channel of channels) on ? channel.subscribe(handlers) : channel.unsubscribe(handlers);
  };
}

/** The mode a cycle of `lib` takes: the mix draws 10 % writes. */
export function modeOf(lib: LibName): 'read' | 'write' {
  if (lib.endsWith('-read') || lib.endsWith('-read-ap')) return 'read';
  if (lib === 'rwlock-mix') return Math.random() < 0.9 ? 'read' : 'write';
  return 'write';
}
