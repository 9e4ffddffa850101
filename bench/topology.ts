/**
 * The servers a bench run measures against, started from the same
 * `redis-server` harness as the integration tests (loopback ports only), and
 * the server-side counters the workloads read: INFO commandstats and
 * errorstats summed over the masters, SLOWLOG, MEMORY USAGE.
 */
import type { Writable } from 'node:stream';
import calculateSlot from 'cluster-key-slot';
import type { Cluster, Redis } from 'ioredis';
import type { RedisClient } from '../src/redis.js';
import { type RedisClusterHandle, type RedisServerHandle, startRedisCluster, startRedisServer } from '../src/testing/index.js';

export type TopologyKind = 'standalone' | 'cluster';

export interface Topology {
  readonly kind: TopologyKind;
  /**
   * A new client; every client made here is closed by `stop()`. With
   * `autoPipelining`, made with `enableAutoPipelining: true`.
   */
  client(options?: ClientOptions): RedisClient;
  /** One admin connection per master (for INFO, SLOWLOG, MEMORY, FLUSHALL). */
  masters(): Promise<Redis[]>;
  /** One admin connection per server process, replicas included (for INFO cpu). */
  allNodes(): Promise<Redis[]>;
  /** The master that holds `key`. */
  masterFor(key: string): Promise<Redis>;
  /**
   * One new client on each of three independent servers (this topology's
   * and two more), for `redlock` mode; undefined on a Cluster.
   */
  redlockNodes(): RedisClient[] | undefined;
  flush(): Promise<void>;
  stop(): Promise<void>;
}

export interface ClientOptions {
  readonly autoPipelining?: boolean;
}

export async function startTopology(kind: TopologyKind): Promise<Topology> {
  return kind === 'standalone'
    ? standalone(await startRedisServer(), await Promise.all([startRedisServer(), startRedisServer()]))
    : cluster(await startRedisCluster({ masters: 3, replicasPerMaster: 1 }));
}

/**
 * Drops a client from the set `stop()` disconnects once it has ended: a workload
 * disconnects its own, and a bench run makes hundreds, whose ~0.3 MB each kept
 * the heap growing to 170 MB by the Cluster's last runs, slowing every GC pause.
 */
function forgetOnEnd<C extends Redis | Cluster>(clients: Set<C>, c: C): void {
  c.once('end', () => clients.delete(c));
}

function standalone(server: RedisServerHandle, others: readonly RedisServerHandle[]): Topology {
  const clients = new Set<Redis>();
  const track = (c: Redis) => {
    clients.add(c);
    forgetOnEnd(clients, c);
    return c;
  };
  let admin: Redis | undefined;
  const adminClient = () => (admin ??= server.client());
  return {
    kind: 'standalone',
    client: (options = {}) => track(server.client({ maxRetriesPerRequest: 2, enableAutoPipelining: options.autoPipelining ?? false })),
    masters: async () => [adminClient()],
    allNodes: async () => [adminClient()],
    masterFor: async () => adminClient(),
    redlockNodes: () => [server, ...others].map((s) => track(s.client({ maxRetriesPerRequest: 2 }))),
    async flush() {
      await adminClient().flushall();
      await Promise.all(others.map((s) => s.flush()));
    },
    async stop() {
      for (const c of clients) c.disconnect();
      admin?.disconnect();
      await Promise.all([server, ...others].map((s) => s.stop()));
    },
  };
}

function cluster(handle: RedisClusterHandle): Topology {
  const clients = new Set<Cluster>();
  const admins = new Map<number, Redis>();
  const adminFor = (port: number) => {
    let c = admins.get(port);
    if (!c) admins.set(port, (c = handle.node(port).client()));
    return c;
  };
  let slotOwners: { start: number; end: number; port: number }[] | undefined;
  const owners = async () => {
    if (slotOwners) return slotOwners;
    const any = adminFor(handle.nodes[0]!.port);
    const slots = (await any.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
    return (slotOwners = slots.map(([start, end, [, port]]) => ({ start, end, port })));
  };
  return {
    kind: 'cluster',
    client(options = {}) {
      const c = handle.client({ enableAutoPipelining: options.autoPipelining ?? false, redisOptions: { maxRetriesPerRequest: 2 } });
      clients.add(c);
      forgetOnEnd(clients, c);
      return c;
    },
    async masters() {
      const ports = [...new Set((await owners()).map((o) => o.port))].sort((a, b) => a - b);
      return ports.map(adminFor);
    },
    allNodes: async () => handle.nodes.map((n) => adminFor(n.port)),
    redlockNodes: () => undefined,
    async masterFor(key: string) {
      const slot = calculateSlot(key);
      const owner = (await owners()).find((o) => slot >= o.start && slot <= o.end);
      if (!owner) throw new Error(`no master owns slot ${slot}`);
      return adminFor(owner.port);
    },
    flush: () => handle.flush(),
    async stop() {
      for (const c of clients) c.disconnect();
      for (const c of admins.values()) c.disconnect();
      await handle.stop();
    },
  };
}

/** Calls, total µs and errors of every command on one master, from INFO commandstats and errorstats. */
export interface ServerCounters {
  readonly calls: Map<string, { calls: number; usec: number }>;
  readonly errors: Map<string, number>;
}

export async function serverCounters(master: Redis): Promise<ServerCounters> {
  const [commandstats, errorstats] = await Promise.all([master.info('commandstats'), master.info('errorstats')]);
  const calls = new Map<string, { calls: number; usec: number }>();
  for (const m of commandstats.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    calls.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  const errors = new Map<string, number>();
  for (const m of errorstats.matchAll(/^errorstat_([^:]+):count=(\d+)/gm)) errors.set(m[1]!, Number(m[2]));
  return { calls, errors };
}

/** Counters of every master, for a before/after difference. */
export async function snapshot(topology: Topology): Promise<ServerCounters[]> {
  return Promise.all((await topology.masters()).map(serverCounters));
}

/** What happened on the masters between two snapshots (same master order). */
export interface CounterDelta {
  /** EVAL + EVALSHA calls, summed over masters. */
  readonly scriptCalls: number;
  /** µs the masters spent in EVAL + EVALSHA (the commands the scripts run included). */
  readonly scriptUsec: number;
  /** Script calls per master. */
  readonly scriptCallsPerMaster: number[];
  /** MOVED + ASK + TRYAGAIN replies. */
  readonly redirects: number;
  /** Every command's calls (nested script commands included), summed over masters. */
  readonly commands: Map<string, number>;
  /**
   * Every command's µs, summed over masters. A script's calls include the time of
   * the commands it runs, which Redis also counts under their own names.
   */
  readonly usec: Map<string, number>;
}

export function delta(before: ServerCounters[], after: ServerCounters[]): CounterDelta {
  let scriptCalls = 0;
  let scriptUsec = 0;
  let redirects = 0;
  const perMaster: number[] = [];
  const commands = new Map<string, number>();
  const usec = new Map<string, number>();
  after.forEach((a, i) => {
    const b = before[i]!;
    let mine = 0;
    for (const [name, v] of a.calls) {
      const d = v.calls - (b.calls.get(name)?.calls ?? 0);
      const du = v.usec - (b.calls.get(name)?.usec ?? 0);
      if (d !== 0) commands.set(name, (commands.get(name) ?? 0) + d);
      if (du !== 0) usec.set(name, (usec.get(name) ?? 0) + du);
      if (name === 'eval' || name === 'evalsha') {
        mine += d;
        scriptUsec += du;
      }
    }
    for (const name of ['MOVED', 'ASK', 'TRYAGAIN']) redirects += (a.errors.get(name) ?? 0) - (b.errors.get(name) ?? 0);
    scriptCalls += mine;
    perMaster.push(mine);
  });
  return { scriptCalls, scriptUsec, scriptCallsPerMaster: perMaster, redirects, commands, usec };
}

/**
 * Counts the commands a client actually writes to its sockets (every
 * redirect retry and NOSCRIPT fallback included), by wrapping `sendCommand`
 * of the connection (standalone) or of every node connection (Cluster); and
 * the socket writes and reads those connections make, by wrapping their
 * streams' own write functions (what is written, after any cork, goes
 * through one of them) and counting their `data` events. A write is a round
 * trip: the server answers what it carried; at one call in flight a cycle
 * is two, and batching lowers it.
 */
export class SentCounter {
  count = 0;
  readonly byName = new Map<string, number>();
  /** Socket writes (`_write` or `_writev` calls) of the client's connections. */
  writes = 0;
  /** Reads (`data` events) on the client's connections. */
  reads = 0;
  private readonly connections = new Set<Redis>();

  attach(client: RedisClient): void {
    const wrap = (redis: Redis) => {
      const marked = redis as Redis & { __benchCounted?: boolean };
      if (marked.__benchCounted) return;
      marked.__benchCounted = true;
      this.connections.add(redis);
      const send = redis.sendCommand.bind(redis);
      redis.sendCommand = ((command: { name: string }, ...rest: unknown[]) => {
        this.count++;
        this.byName.set(command.name, (this.byName.get(command.name) ?? 0) + 1);
        return (send as (...a: unknown[]) => unknown)(command, ...rest);
      }) as Redis['sendCommand'];
    };
    if ((client as { isCluster?: boolean }).isCluster) {
      const c = client as Cluster;
      for (const node of c.nodes('all')) wrap(node);
      c.on('+node', (node: Redis) => wrap(node));
    } else {
      wrap(client as Redis);
    }
  }

  /** Zeroes the counts, and counts the socket I/O of every connection made by now (their streams exist once connected). */
  reset(): void {
    this.count = 0;
    this.byName.clear();
    this.writes = 0;
    this.reads = 0;
    for (const redis of this.connections) this.watch(redis.stream as CountedStream | undefined);
  }

  private watch(stream: CountedStream | undefined): void {
    if (stream === undefined || stream.__benchCounter === this) return;
    stream.__benchCounter = this;
    const write = stream._write.bind(stream);
    stream._write = (...args) => {
      this.writes++;
      write(...args);
    };
    const writev = stream._writev?.bind(stream);
    if (writev) {
      stream._writev = (...args) => {
        this.writes++;
        writev(...args);
      };
    }
    stream.on('data', () => this.reads++);
  }
}

type CountedStream = Writable & {
  _write: Writable['_write'];
  _writev?: Writable['_writev'];
  __benchCounter?: SentCounter;
};

/** CPU seconds (user + sys) every server process has used so far, summed (INFO cpu). */
export async function serverCpuSeconds(topology: Topology): Promise<number> {
  let total = 0;
  for (const node of await topology.allNodes()) {
    const info = await node.info('cpu');
    total += Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1] ?? 0) + Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1] ?? 0);
  }
  return total;
}

/** Waits until a client is connected (and, for a Cluster, knows the slot map). */
export async function ready(client: RedisClient): Promise<void> {
  if (client.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve);
    client.once('error', reject);
  });
}

/** The longest SLOWLOG entries (µs, command) of every master since the last reset, and resets them. */
export async function slowlog(topology: Topology, count = 5): Promise<{ usec: number; command: string }[]> {
  const out: { usec: number; command: string }[] = [];
  for (const m of await topology.masters()) {
    // Every entry (GET <n> gives the newest n, not the longest).
    const entries = (await m.call('SLOWLOG', 'GET', -1)) as [number, number, number, string[]][];
    for (const e of entries) out.push({ usec: e[2], command: e[3].slice(0, 3).join(' ').slice(0, 80) });
    await m.call('SLOWLOG', 'RESET');
  }
  return out.sort((a, b) => b.usec - a.usec).slice(0, count);
}

/** Makes every master log commands slower than `usec` to SLOWLOG (up to 4,096 of them). */
export async function setSlowlogThreshold(topology: Topology, usec: number): Promise<void> {
  for (const m of await topology.masters()) {
    await m.config('SET', 'slowlog-log-slower-than', String(usec));
    await m.config('SET', 'slowlog-max-len', '4096');
    await m.call('SLOWLOG', 'RESET');
  }
}
