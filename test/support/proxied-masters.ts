/**
 * Independent servers for `redlock` mode, each behind a fault proxy: the
 * mocha hooks of a suite that holds the library's connections through the
 * proxies and looks at the servers directly.
 */
import type { Redis } from 'ioredis';
import type { LockRedisClient } from '../../src/clients/index.js';
import { type Lease, LockClient, type LockClientOptions } from '../../src/index.js';
import { type FaultProxy, type RedisMastersHandle, startFaultProxy, startRedisMasters } from '../../src/testing/index.js';
import { type ClientKind, disconnect } from '../setup/topologies.js';
import { isGlide } from './glide-clients.js';
import { connectLockClient, targetThrough } from './targets.js';

/** GLIDE's way to send any command (its `exists` takes a list). */
interface GlideCommands {
  customCommand(args: string[]): Promise<unknown>;
}

/** What a suite's tests use; valid inside its tests. */
export interface ProxiedMasters {
  /** Direct connections to the servers, for the test's own look. */
  readonly admin: Redis[];
  /** One fault proxy per server, new for each test. */
  readonly proxies: FaultProxy[];
  /** The library's connections, one per server through its proxy, new for each test. */
  readonly through: LockRedisClient[];
  /** A LockClient on `clients`, closed after the test. */
  open(clients: LockRedisClient | readonly LockRedisClient[], options?: LockClientOptions): LockClient;
  /** How many servers hold `lease`'s hold (by its id, in the lock's hash `state`). */
  nodesHolding(lease: Lease, state: string): Promise<number>;
  /** A command on each of the library's connections: it runs after whatever the library sent on them before. */
  behindEverySent(): Promise<unknown>;
}

/** Registers the hooks for `n` servers, proxied, with the library's connections on `clientKind`. */
export function proxiedMasters(n: number, clientKind: ClientKind): ProxiedMasters {
  let masters: RedisMastersHandle;
  const closing: LockClient[] = [];
  const ctx = { admin: [] as Redis[], proxies: [] as FaultProxy[], through: [] as LockRedisClient[] };

  before(async function () {
    this.timeout(60_000);
    masters = await startRedisMasters(n);
    ctx.admin = masters.clients();
  });
  after(async () => {
    for (const a of ctx.admin) a.disconnect();
    await masters?.stop();
  });
  beforeEach(async () => {
    ctx.proxies = await Promise.all(masters.servers.map((server) => startFaultProxy({ target: { port: server.port } })));
    ctx.through = await Promise.all(ctx.proxies.map((proxy) => connectLockClient(targetThrough(proxy, clientKind))));
  });
  afterEach(async () => {
    for (const proxy of ctx.proxies) proxy.resume();
    for (const locks of closing.splice(0)) await locks.close();
    for (const c of ctx.through) disconnect(c);
    await Promise.all(ctx.proxies.map((proxy) => proxy.close()));
    await masters.flush();
  });

  return {
    get admin() {
      return ctx.admin;
    },
    get proxies() {
      return ctx.proxies;
    },
    get through() {
      return ctx.through;
    },
    open(clients, options = {}) {
      const locks = new LockClient(clients, options);
      closing.push(locks);
      return locks;
    },
    async nodesHolding(lease, state) {
      const fields = await Promise.all(ctx.admin.map((a) => a.hgetall(state)));
      return fields.filter((f) => Object.values(f).some((v) => ` ${v} `.includes(` ${lease.holdId} `))).length;
    },
    behindEverySent: () =>
      Promise.all(
        ctx.through.map((c) =>
          isGlide(c) ? (c as unknown as GlideCommands).customCommand(['EXISTS', 'nothing']) : (c as Redis).exists('nothing'),
        ),
      ),
  };
}
