/**
 * The CLI's Redis connection on whichever client library is installed:
 * ioredis (or, when it is absent, or `REDIS_RWLOCK_CLIENT=node-redis`
 * asks for it, node-redis). The library takes either; the commands need a
 * few commands of their own besides (SCAN on every master, EXISTS, GET ...),
 * which this runs on either.
 */
import type { Cluster, Redis } from 'ioredis';
import type { LockRedisClient } from '../clients/index.js';
import { Deadlines } from '../deadlines.js';
import type { ConnectionAuth } from './connect.js';

/** A command's arguments, its name first. */
export type CommandArgs = readonly [string, ...(string | number)[]];

/** One server, or one master of a Cluster: runs a command there. */
export type NodeRunner = (args: CommandArgs) => Promise<unknown>;

/** What a CLI command gets from `ctx.redis()`. */
export interface CliRedis {
  /** The client, for `LockClient` and the library's driver. */
  readonly client: LockRedisClient;
  /** Which library it is of. */
  readonly library: ClientLibrary;
  /** Runs a command; on a Cluster on the master of its first key (`args[1]`). */
  command(args: CommandArgs): Promise<unknown>;
  /** The server itself, or every master of the Cluster. */
  masters(): Promise<NodeRunner[]>;
  /**
   * `call`'s outcome, or an error naming `what` once it waited the target's
   * `timeoutMs` for Redis. `command` and `masters` bound their calls with it
   * already; a command bounds with it what it runs through the library's
   * backend.
   */
  bounded<T>(call: Promise<T>, what: string): Promise<T>;
  /** Closes the connection(s) at once. */
  disconnect(): void;
}

/** A client of either library as opened, before {@link withBounds} bounds its calls. */
export type UnboundedCli = Omit<CliRedis, 'bounded'>;

export type ClientLibrary = 'ioredis' | 'node-redis';

/** Where to connect, resolved: a URL (no credentials in it) or Cluster nodes, and how long to wait. */
export interface ConnectTarget extends ConnectionAuth {
  readonly url?: string | undefined;
  readonly cluster?: readonly { host: string; port: number }[] | undefined;
  readonly timeoutMs: number;
}

/** Said when neither client library is installed. */
export const NO_CLIENT_LIBRARY = 'no Redis client library is installed: npm install ioredis (or redis, node-redis 5 or 6)';

/**
 * The client library to use: `REDIS_RWLOCK_CLIENT` (`ioredis` or
 * `node-redis`) if set, else ioredis if it is installed, else node-redis.
 */
export async function loadLibrary(env: NodeJS.ProcessEnv): Promise<Loaded> {
  const wanted = env.REDIS_RWLOCK_CLIENT?.trim();
  if (wanted && wanted !== 'ioredis' && wanted !== 'node-redis') {
    throw new Error(`REDIS_RWLOCK_CLIENT: "${wanted}" is not a client library; use ioredis or node-redis`);
  }
  const order: ClientLibrary[] = wanted === 'node-redis' ? ['node-redis'] : wanted === 'ioredis' ? ['ioredis'] : ['ioredis', 'node-redis'];
  for (const library of order) {
    try {
      return library === 'ioredis'
        ? { library, module: await import('ioredis') }
        : { library, module: (await import('redis')) as unknown as NodeRedisModule };
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }
  throw new Error(
    wanted
      ? `REDIS_RWLOCK_CLIENT=${wanted}, but it is not installed: npm install ${wanted === 'ioredis' ? 'ioredis' : 'redis'}`
      : NO_CLIENT_LIBRARY,
  );
}

/** What the CLI uses of ioredis. */
interface IoredisModule {
  Redis: typeof Redis;
  Cluster: typeof Cluster;
}

type Loaded = { library: 'ioredis'; module: IoredisModule } | { library: 'node-redis'; module: NodeRedisModule };

function isNotFound(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND';
}

/**
 * A connected client of the loaded library, for `target`, whose every call
 * waits at most `target.timeoutMs` for its answer (node-redis has no command
 * timeout of its own, and a server that stops answering must not hang the
 * CLI); rejects (after closing it) if it cannot connect.
 */
export async function openClient(loaded: Loaded, target: ConnectTarget): Promise<CliRedis> {
  const cli = await (loaded.library === 'ioredis' ? openIoredis(loaded.module, target) : openNodeRedis(loaded.module, target));
  return withBounds(cli, target.timeoutMs);
}

/** `cli`, its calls bounded by `timeoutMs` each (see {@link CliRedis.bounded}). */
export function withBounds(cli: UnboundedCli, timeoutMs: number): CliRedis {
  const deadlines = new Deadlines();
  const bounded = <T>(call: Promise<T>, what: string) =>
    deadlines.race(call, performance.now() + timeoutMs, { late: () => new Error(`${what}: no answer within ${timeoutMs / 1000} s`) });
  const runBounded =
    (run: NodeRunner): NodeRunner =>
    (args) =>
      bounded(run(args), args[0]);
  return {
    ...cli,
    command: runBounded((args) => cli.command(args)),
    masters: async () => (await bounded(cli.masters(), 'finding the masters')).map(runBounded),
    bounded,
  };
}

async function openIoredis(ioredis: IoredisModule, target: ConnectTarget): Promise<UnboundedCli> {
  const common = {
    lazyConnect: true,
    connectTimeout: target.timeoutMs,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
    ...(target.username !== undefined ? { username: target.username } : {}),
    ...(target.password !== undefined ? { password: target.password } : {}),
    ...(target.tls !== undefined ? { tls: target.tls } : {}),
  };
  const client: Redis | Cluster = target.cluster
    ? new ioredis.Cluster(
        target.cluster.map((n) => ({ ...n })),
        {
          lazyConnect: true,
          clusterRetryStrategy: () => null,
          redisOptions: common,
          slotsRefreshTimeout: target.timeoutMs,
          // Over TLS, connect to the addresses the Cluster announces as they are (the certificate names them).
          ...(target.tls !== undefined
            ? { dnsLookup: (address: string, callback: (e: null, a: string) => void) => callback(null, address) }
            : {}),
        },
      )
    : new ioredis.Redis(target.url!, common);
  const cli = ioredisCli(client);
  await connecting(cli, (client as Redis).connect(), client, target.timeoutMs);
  return cli;
}

/** The CLI's view of an ioredis client (a server or a Cluster). */
export function ioredisCli(client: Redis | Cluster): UnboundedCli {
  const run = (node: Redis | Cluster) => (args: CommandArgs) => node.call(args[0], ...args.slice(1)) as Promise<unknown>;
  return {
    client,
    library: 'ioredis',
    command: run(client),
    masters: async () => ((client as Cluster).isCluster ? (client as Cluster).nodes('master') : [client as Redis]).map(run),
    disconnect: () => client.disconnect(),
  };
}

/** What the CLI uses of node-redis (typed here so that it builds without node-redis' types in the way). */
interface NodeRedisModule {
  createClient(options: object): NodeRedisConnection;
  createCluster(options: object): NodeRedisConnection & {
    readonly masters: readonly unknown[];
    nodeClient(node: unknown): Promise<NodeRedisConnection>;
  };
}

interface NodeRedisConnection {
  /** False once closed (destroy() throws then). */
  readonly isOpen: boolean;
  connect(): Promise<unknown>;
  destroy(): void;
  on(event: 'error', listener: (error: Error) => void): unknown;
  sendCommand(...args: unknown[]): Promise<unknown>;
}

async function openNodeRedis(redis: NodeRedisModule, target: ConnectTarget): Promise<UnboundedCli> {
  const tls = target.tls;
  const socket = {
    connectTimeout: target.timeoutMs,
    reconnectStrategy: false,
    ...(tls !== undefined ? { tls: true, ...tls } : {}),
  };
  const auth = {
    ...(target.username !== undefined ? { username: target.username } : {}),
    ...(target.password !== undefined ? { password: target.password } : {}),
  };
  const text = (args: CommandArgs) => args.map(String);
  let cli: UnboundedCli;
  let client: NodeRedisConnection;
  if (target.cluster) {
    const cluster = redis.createCluster({
      rootNodes: target.cluster.map((n) => ({ socket: { host: n.host, port: n.port, ...socket } })),
      defaults: { ...auth, socket },
      maxCommandRedirections: 16,
    });
    client = cluster;
    cli = {
      client: cluster as unknown as LockRedisClient,
      library: 'node-redis',
      command: (args) => cluster.sendCommand(args[1] === undefined ? undefined : String(args[1]), false, text(args)),
      masters: async () => {
        const nodes = await Promise.all(cluster.masters.map((master) => cluster.nodeClient(master)));
        return nodes.map((node) => (args: CommandArgs) => node.sendCommand(text(args)));
      },
      disconnect: () => cluster.isOpen && cluster.destroy(),
    };
  } else {
    const server = redis.createClient({ url: target.url, ...auth, socket });
    client = server;
    const run = (args: CommandArgs) => server.sendCommand(text(args));
    cli = {
      client: server as unknown as LockRedisClient,
      library: 'node-redis',
      command: run,
      masters: async () => [run],
      disconnect: () => server.isOpen && server.destroy(),
    };
  }
  // A PING on one server: node-redis' connect() sends nothing a server that wants a password refuses,
  // so a missing password would first show on a command, and on a script's EVAL as the server's
  // "Protocol error: unauthenticated bulk length". Only a login failure counts: an ACL user without
  // +ping (the documented ops rules) is logged in. (A Cluster's connect reads its slots: NOAUTH there.)
  const loggedIn = (error: unknown) => {
    if (/^(?:NOAUTH|WRONGPASS)\b/.test((error as Error).message ?? '')) throw error;
  };
  const ready = client.connect().then(() => (target.cluster ? undefined : cli.command(['PING']).then(() => undefined, loggedIn)));
  await connecting(cli, ready, client, target.timeoutMs);
  return cli;
}

/**
 * Waits for `connect` for at most `timeoutMs` in all: the client libraries'
 * own timeouts apply one after the other (the TCP connect, then a ready
 * check), and a server that accepts and never answers took ~10 s. On
 * failure closes the client and rejects with what went wrong, and the first
 * error the client emitted meanwhile if it says more.
 */
async function connecting(
  cli: UnboundedCli,
  connect: Promise<unknown>,
  emitter: { on(event: 'error', listener: (error: Error) => void): unknown },
  timeoutMs: number,
): Promise<void> {
  let cause: Error | undefined;
  emitter.on('error', (error: Error) => (cause ??= error)); // reported through the failing command
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      connect,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs / 1000} s`)), timeoutMs);
      }),
    ]);
  } catch (error) {
    cli.disconnect();
    const message = (error as Error).message;
    throw new Error(cause && cause !== error && cause.message !== message ? `${message} (${cause.message})` : message);
  } finally {
    clearTimeout(timer);
  }
}
