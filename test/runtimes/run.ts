/**
 * The black-box runtime check (`npm run test:runtimes`): run by Bun
 * (`bun test/runtimes/run.ts`) and by Deno (`deno run -A test/runtimes/run.ts`),
 * against the built package (`redis-rwlock` and `redis-rwlock/testing`
 * resolve to dist/ through package.json's exports), on ioredis, node-redis 5,
 * node-redis 6 and GLIDE, each on one server and on a 6-node Cluster that the
 * testing helper starts from this same runtime. What it exercises, per
 * client and topology, is what the lock, hand-over, renewal and bound suites
 * cover on Node: shared reads and an exclusive write; a release that hands
 * the lock to a waiting writer, and one that wakes every waiting reader, by
 * the wake-up message (the waiters re-check only every 10 s, so a poll
 * cannot pass); renewal that keeps a lease past three lease periods; and
 * `waitMs` rejecting an acquire in time. No mocha: the runner asks nothing
 * of the runtime beyond what the library and its clients use.
 *
 * Prints one line per check and a summary; exits 1 if any check failed.
 * `RUNTIME_CLIENTS=ioredis,node-redis6` and `RUNTIME_TOPOLOGIES=server`
 * narrow the run; `TEST_SERVER=valkey` runs it on Valkey.
 */
import { strict as assert } from 'node:assert';
import { GlideClient, GlideClusterClient } from '@valkey/valkey-glide';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { createClient as createClient6, createCluster as createCluster6 } from 'redis6';
import type * as Library from '../../src/index.js';
import type * as Testing from '../../src/testing/index.js';

// The built package, by its name: the types are the source's (so that a type-check needs no build).
const packageName = 'redis-rwlock';
const { LockClient, AcquireTimeoutError, InvalidArgumentError } = (await import(packageName)) as typeof Library;
const { startRedisCluster, startRedisServer, stopAllServers } = (await import(`${packageName}/testing`)) as typeof Testing;

type Client = Library.LockRedisClient;
type Lease = Library.Lease;

const SERVERS = { redis: ['redis-server', 'redis-cli'], valkey: ['valkey-server', 'valkey-cli'] } as const;
const server = (process.env.TEST_SERVER || 'redis') as keyof typeof SERVERS;
if (!Object.hasOwn(SERVERS, server)) throw new Error(`TEST_SERVER=${server}: use redis or valkey`);
process.env.REDIS_SERVER_BIN ??= SERVERS[server][0];
process.env.REDIS_CLI_BIN ??= SERVERS[server][1];

const runtime = runtimeName();
/** Waiters re-check this seldom: a hand-over faster than this came by its wake-up message. */
const RECHECK_MS = 10_000;
/** How long a woken waiter may take on a loaded CI machine (it takes a few ms here). */
const WAKE_BOUND_MS = 1_500;

interface Connected {
  readonly client: Client;
  close(): Promise<void>;
}
type Connect = (where: Where) => Promise<Connected>;
type Where = { readonly cluster: false; readonly port: number } | { readonly cluster: true; readonly ports: readonly number[] };

const CLIENTS: Record<string, Connect> = {
  ioredis: async (where) => {
    const client = where.cluster
      ? new Cluster(where.ports.map((port) => ({ host: '127.0.0.1', port })))
      : new Redis({ host: '127.0.0.1', port: where.port });
    return { client, close: async () => void client.disconnect() };
  },
  'node-redis5': async (where) => {
    const client = where.cluster
      ? await createCluster({ rootNodes: where.ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })) }).connect()
      : await createClient({ url: `redis://127.0.0.1:${where.port}` }).connect();
    client.on('error', () => undefined); // the library reports what matters; an unheard 'error' would throw
    return { client: client as unknown as Client, close: () => client.close() };
  },
  'node-redis6': async (where) => {
    const client = where.cluster
      ? await createCluster6({ rootNodes: where.ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })) }).connect()
      : await createClient6({ url: `redis://127.0.0.1:${where.port}` }).connect();
    client.on('error', () => undefined);
    return { client: client as unknown as Client, close: () => client.close() };
  },
  glide: async (where) => {
    const client = where.cluster
      ? await GlideClusterClient.createClient({
          addresses: where.ports.map((port) => ({ host: '127.0.0.1', port })),
          requestTimeout: 2_000,
        })
      : await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: where.port }], requestTimeout: 2_000 });
    return { client, close: async () => client.close() };
  },
};

/** A LockClient on `redis`, closed after the check. */
type Locks = (redis: Client, options?: Library.LockClientOptions) => Library.LockClient;
/** One check: given two clients (two "processes") on the same servers and a fresh resource name. */
type Check = (locks: Locks, a: Client, b: Client, resource: string) => Promise<void>;

const CHECKS: Record<string, Check> = {
  'readers share the lock, a writer excludes them and is excluded': async (locks, a, b, resource) => {
    const locksA = locks(a);
    const locksB = locks(b);
    const r1 = await locksA.lock(resource).acquireRead({ waitMs: 0 });
    const r2 = await locksB.lock(resource).acquireRead({ waitMs: 0 });
    assert.equal(await locksB.lock(resource).tryAcquireWrite(), null, 'a writer got in beside two readers');
    await r1.release();
    await r2.release();
    const w = await locksB.lock(resource).tryAcquireWrite();
    assert.ok(w, 'the free lock was refused to a writer');
    assert.ok(w.fence > r2.fence, `fence ${w.fence} after ${r2.fence}`);
    assert.equal(await locksA.lock(resource).tryAcquireRead(), null, 'a reader got in beside a writer');
    await w.release();
    assert.equal(w.held, false);
  },

  'a release hands the lock to the waiting writer, by its wake-up': async (locks, a, b, resource) => {
    const holder = locks(a);
    const waiter = locks(b, { recheckMs: RECHECK_MS });
    const read = await holder.lock(resource).acquireRead({ waitMs: 0 });
    const writing = waiter.lock(resource).acquireWrite({ waitMs: 8_000 });
    await settle(writing, 300); // queued and subscribed
    assert.equal(await holder.lock(resource).tryAcquireRead(), null, 'a new reader passed the waiting writer');
    await read.release();
    const released = performance.now();
    const write = await writing;
    const waited = performance.now() - released;
    assert.ok(waited < WAKE_BOUND_MS, `handed over ${Math.round(waited)} ms after the release (re-checks every ${RECHECK_MS} ms)`);
    assert.equal(write.mode, 'write');
    assert.ok(write.fence > read.fence);
    await write.release();
  },

  "a writer's release wakes every waiting reader": async (locks, a, b, resource) => {
    const holder = locks(a);
    const waiter = locks(b, { recheckMs: RECHECK_MS });
    const write = await holder.lock(resource).acquireWrite({ waitMs: 0 });
    const readers = [1, 2, 3].map(() => waiter.lock(resource).acquireRead({ waitMs: 8_000 }));
    await settle(Promise.all(readers), 300);
    await write.release();
    const released = performance.now();
    const reads = await Promise.all(readers);
    const waited = performance.now() - released;
    assert.ok(waited < WAKE_BOUND_MS, `readers woken ${Math.round(waited)} ms after the release (re-checks every ${RECHECK_MS} ms)`);
    for (const read of reads) await read.release();
  },

  'renewal keeps a lease past three lease periods': async (locks, a, b, resource) => {
    const leaseMs = 500;
    const holder = locks(a, { leaseMs });
    const other = locks(b);
    const lease = await holder.lock(resource).acquireWrite({ waitMs: 0 });
    await sleep(3 * leaseMs + 200);
    assert.ok(lease.held, 'the lease ran out');
    assert.equal(lease.signal.aborted, false, `the lease's signal aborted: ${String(lease.signal.reason)}`);
    assert.equal(await other.lock(resource).tryAcquireRead(), null, 'another client got in: the lease was not renewed');
    await lease.extend();
    await lease.release();
    const next = await other.lock(resource).tryAcquireWrite();
    assert.ok(next, 'the released lock was refused');
    await next.release();
  },

  'waitMs bounds an acquire that cannot succeed': async (locks, a, b, resource) => {
    const holder = locks(a);
    const waiter = locks(b);
    const write = await holder.lock(resource).acquireWrite({ waitMs: 0 });
    for (const mode of ['read', 'write'] as const) {
      const waitMs = 400;
      const start = performance.now();
      const error = await (mode === 'read'
        ? waiter.lock(resource).acquireRead({ waitMs })
        : waiter.lock(resource).acquireWrite({ waitMs })
      ).then(
        (lease: Lease) => lease,
        (e: unknown) => e,
      );
      const took = performance.now() - start;
      assert.ok(error instanceof AcquireTimeoutError, `${mode}: expected AcquireTimeoutError, got ${String(error)}`);
      assert.ok(took >= waitMs - 5 && took < waitMs + 1_000, `${mode}: rejected after ${Math.round(took)} ms for waitMs ${waitMs}`);
    }
    assert.ok(write.held);
    await write.release();
  },
};

const wanted = (name: string, list: string[]) => {
  const only = process.env[name]?.split(',').filter(Boolean);
  // An unknown name would leave its checks out, and a run of no check would pass.
  const unknown = only?.filter((x) => !list.includes(x)) ?? [];
  if (unknown.length > 0) throw new Error(`${name}: unknown ${unknown.join(', ')}; use ${list.join(', ')}`);
  return only?.length ? list.filter((x) => only.includes(x)) : list;
};
const clients = wanted('RUNTIME_CLIENTS', Object.keys(CLIENTS));
const topologies = wanted('RUNTIME_TOPOLOGIES', ['server', 'cluster']);

let passed = 0;
let failed = 0;
const started = performance.now();
try {
  for (const topology of topologies) {
    const where: Where =
      topology === 'server'
        ? { cluster: false, port: (await startRedisServer()).port }
        : { cluster: true, ports: (await startRedisCluster()).startupNodes.map((n) => n.port) };
    for (const name of clients) {
      const connect = CLIENTS[name]!;
      const a = await connect(where);
      const b = await connect(where);
      try {
        for (const [check, run] of Object.entries(CHECKS)) {
          const label = `${runtime} ${name} ${topology}: ${check}`;
          const start = performance.now();
          const made: Library.LockClient[] = [];
          const locks: Locks = (redis, options) => {
            const client = new LockClient(redis, options);
            made.push(client);
            return client;
          };
          try {
            await run(locks, a.client, b.client, `rt:${runtime}:${name}:${topology}:${passed + failed}`);
            await Promise.all(made.map((m) => m.close()));
            passed++;
            console.log(`  ok    ${label} (${Math.round(performance.now() - start)} ms)`);
          } catch (error) {
            failed++;
            await Promise.all(made.map((m) => m.close().catch(() => undefined)));
            console.log(`  FAIL  ${label}\n        ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
          }
        }
      } finally {
        await a.close();
        await b.close();
      }
    }
  }
  if (passed + failed === 0) throw new Error('no client check ran: a run that checked nothing does not pass');
  if (runtime.startsWith('bun')) await bunRedisClientRefused();
} finally {
  await stopAllServers();
}
console.log(
  `${runtime} (${server}): ${passed} passing, ${failed} failing; clients ${clients.join(', ')}; ${topologies.join(', ')}; ` +
    `${Math.round((performance.now() - started) / 1000)} s`,
);
process.exit(failed === 0 && passed > 0 ? 0 : 1);

/**
 * Bun's built-in `RedisClient` runs scripts (`send('EVALSHA', ...)`) but
 * cannot carry the library's wake-ups: it has no sharded subscribe, hands a
 * `send('SSUBSCRIBE')`'s messages to no listener, and tells no address for a
 * subscriber of the library's own. So `new LockClient()` refuses it with a
 * typed error. Checked here so that a Bun that delivers sharded messages
 * fails this check, and a driver for it can be written then.
 */
async function bunRedisClientRefused(): Promise<void> {
  const label = `${runtime} RedisClient: refused, and its sharded messages still go nowhere`;
  interface BunRedisClient {
    connect(): Promise<void>;
    close(): void;
    send(command: string, args: string[]): Promise<unknown>;
    subscribe(channel: string, listener: (message: string) => void): Promise<number>;
  }
  const bun = 'bun'; // not a static import: Deno and the type-check have no 'bun' module
  const { RedisClient } = (await import(bun)) as { RedisClient: new (url: string) => BunRedisClient };
  const { port } = await startRedisServer();
  const url = `redis://127.0.0.1:${port}`;
  const [client, subscriber] = [new RedisClient(url), new RedisClient(url)];
  try {
    await client.connect();
    await subscriber.connect();
    assert.throws(() => new LockClient(client as never), InvalidArgumentError);
    const heard: string[] = [];
    await subscriber.subscribe('{rt}wake', (message) => heard.push(message)); // a listener on the same name
    await subscriber.send('SSUBSCRIBE', ['{rt}wake']);
    assert.equal(await client.send('SPUBLISH', ['{rt}wake', 'release']), 1, 'the server saw no sharded subscriber');
    assert.equal(await client.send('PUBLISH', ['{rt}wake', 'ping']), 1, 'the plain subscription is gone');
    await waitUntil(() => heard.includes('ping'), 2_000);
    assert.deepEqual(heard, ['ping'], 'Bun delivered a sharded message: a driver for RedisClient may now be possible');
    passed++;
    console.log(`  ok    ${label}`);
  } catch (error) {
    failed++;
    console.log(`  FAIL  ${label}\n        ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    client.close();
    subscriber.close();
  }
}

/** Resolves once `done()` holds, failing after `ms`. */
async function waitUntil(done: () => boolean, ms: number): Promise<void> {
  const until = performance.now() + ms;
  while (!done()) {
    if (performance.now() > until) throw new Error(`not done within ${ms} ms`);
    await sleep(10);
  }
}

function runtimeName(): string {
  const g = globalThis as { Bun?: { version: string }; Deno?: { version: { deno: string } } };
  if (g.Bun) return `bun ${g.Bun.version}`;
  if (g.Deno) return `deno ${g.Deno.version.deno}`;
  return `node ${process.versions.node}`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Waits `ms`, failing at once if `pending` settles meanwhile (a waiter that should still be waiting). */
async function settle(pending: Promise<unknown>, ms: number): Promise<void> {
  const early = await Promise.race([
    pending.then(
      () => 'resolved',
      (e: unknown) => `rejected (${String(e)})`,
    ),
    sleep(ms).then(() => undefined),
  ]);
  if (early !== undefined) throw new Error(`the waiter ${early} before the release`);
}
