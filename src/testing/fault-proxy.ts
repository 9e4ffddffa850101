/**
 * A loopback TCP proxy that puts network faults between a Redis client and
 * its server, for tests: drop a connection right after the server replied to
 * one command (so the client resends it), hold one command's reply back (so
 * it lands late), hold one command back before the server sees it (a
 * subscription too), stall both directions, add delay,
 * reset every connection, refuse new ones. It reads just enough RESP to know
 * where each command and each reply ends.
 *
 * @example
 * ```ts
 * import { startFaultProxy, startRedisServer } from 'redis-rwlock/testing';
 * const server = await startRedisServer();
 * const proxy = await startFaultProxy({ target: { port: server.port } });
 * const redis = new Redis(proxy.port);            // talks through the proxy
 * const dropped = proxy.dropAfterReply({ command: 'incr' });
 * await redis.incr('n');                          // runs twice: the first reply was lost
 * await dropped;
 * ```
 *
 * @module
 */
import { once } from 'node:events';
import net from 'node:net';
import { LOOPBACK_HOST } from './ports.js';
import type { RedisClusterHandle } from './redis-cluster.js';

/** Options for {@link startFaultProxy}. */
export interface FaultProxyOptions {
  /** The server to forward to: loopback only. */
  target: {
    /** Default: 127.0.0.1. */
    host?: string;
    /** The server's port. */
    port: number;
  };
  /** Port to listen on (loopback). Default: a free one. */
  port?: number;
}

/**
 * Which command's reply {@link FaultProxy.dropAfterReply} drops, or
 * {@link FaultProxy.stallAtReply} holds back; which command
 * {@link FaultProxy.stallAtCommand} holds back.
 */
export interface DropMatch {
  /**
   * The command's name, any case (e.g. `evalsha`). Default: any command but
   * (un)subscribing, whose answers are pushes, not replies
   * ({@link FaultProxy.stallAtCommand}: any command).
   */
  command?: string;
  /**
   * A text one of its arguments must contain (e.g. a key name or a script's
   * sha), or a pattern one of them must match (e.g. `/^orders:\{42\}$/`:
   * that channel and no other that starts with it).
   */
  argument?: string | RegExp;
  /**
   * How the server's reply must begin, in RESP (e.g. `':'`, an integer): a
   * matching command whose reply begins otherwise is passed on, and the
   * drop waits for the next match. Default: any reply.
   */
  reply?: string;
}

/** What a proxy has seen and done. */
export interface FaultProxyStats {
  /** Connections accepted since the start. */
  readonly accepted: number;
  /** Connections open now. */
  readonly open: number;
  /** Connections dropped after a reply by {@link FaultProxy.dropAfterReply}. */
  readonly drops: number;
  /** Commands forwarded to the server, by lower-case name. */
  readonly commands: Readonly<Record<string, number>>;
}

/** A running proxy; see {@link startFaultProxy}. */
export interface FaultProxy {
  /** The loopback address the proxy listens on. */
  readonly host: string;
  /** The port the proxy listens on: point the Redis client here. */
  readonly port: number;
  /**
   * The next command that matches is forwarded and run by the server; its
   * reply is then withheld and the client's connection closed, as when a
   * network drops a reply. Resolves once that happened.
   */
  dropAfterReply(match?: DropMatch): Promise<void>;
  /**
   * The next command that matches is forwarded and run by the server; at its
   * reply the proxy stalls, as by {@link stall}, so that reply and everything
   * after it are held back until {@link resume}: a reply that lands late, as
   * behind a stalled network. Resolves once that reply is held. A drop and a
   * stall are not armed at once.
   */
  stallAtReply(match?: DropMatch): Promise<void>;
  /**
   * The next command that matches, (un)subscribing ones too, is held back
   * before the server sees it, and so is every command after it, on every
   * connection, until {@link resume}; what the server sends still comes
   * through (replies to what came before, messages). A server slow to
   * answer from that command on, e.g. to confirm one subscription (a
   * `reply` in the match is not looked at). Resolves once it is held. Not
   * armed at once with a drop or another stall.
   */
  stallAtCommand(match?: DropMatch): Promise<void>;
  /** Stops forwarding in both directions, on open and new connections, until {@link resume}. */
  stall(): void;
  /**
   * Silences every open connection that has subscribed to anything (a
   * subscriber link): from now on what either side sends on it is dropped,
   * and neither side is told, as by an idle timeout in a NAT or load
   * balancer. Other and new connections are not touched. Returns the
   * number of links silenced.
   */
  silenceSubscribers(): number;
  /** Forwards again what {@link stall} or {@link stallAtCommand} held back. */
  resume(): void;
  /** Delays every chunk, each way, by `ms` (0: none). */
  delay(ms: number): void;
  /** Resets every open connection (TCP RST). */
  reset(): void;
  /** Stops listening, so that connections are refused, and resets the open ones. */
  refuse(): Promise<void>;
  /** Listens again on the same port after {@link refuse}. */
  accept(): Promise<void>;
  /** What the proxy has seen and done so far. */
  readonly stats: FaultProxyStats;
  /** Closes the proxy and every connection. */
  close(): Promise<void>;
}

/**
 * Length of the first complete RESP2/RESP3 value in `buf` from `at`, or -1
 * when it is not complete yet.
 */
export function respLength(buf: Buffer, at = 0): number {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return -1;
  const type = String.fromCharCode(buf[at]!);
  const head = eol + 2 - at;
  switch (type) {
    case '+':
    case '-':
    case ':':
    case '_':
    case ',':
    case '#':
    case '(':
      return head;
    case '$':
    case '=':
    case '!': {
      const n = Number(buf.toString('latin1', at + 1, eol));
      if (n < 0) return head;
      return buf.length >= eol + 2 + n + 2 ? head + n + 2 : -1;
    }
    case '*':
    case '~':
    case '>':
    case '%':
    case '|': {
      const n = Number(buf.toString('latin1', at + 1, eol));
      if (n < 0) return head;
      let items = type === '%' || type === '|' ? 2 * n : n;
      if (type === '|') items++; // an attribute is followed by the value it describes
      let pos = eol + 2;
      for (let i = 0; i < items; i++) {
        const len = respLength(buf, pos);
        if (len < 0) return -1;
        pos += len;
      }
      return pos - at;
    }
    default:
      throw new Error(`fault proxy: not RESP at byte ${at} (${JSON.stringify(type)})`);
  }
}

/** The bulk strings of a command (a RESP array of bulk strings), as text. */
function commandParts(buf: Buffer): string[] {
  const parts: string[] = [];
  const eol = buf.indexOf('\r\n');
  const n = Number(buf.toString('latin1', 1, eol));
  let pos = eol + 2;
  for (let i = 0; i < n; i++) {
    const end = buf.indexOf('\r\n', pos);
    const len = Number(buf.toString('latin1', pos + 1, end));
    parts.push(buf.toString('utf8', end + 2, end + 2 + len));
    pos = end + 2 + len + 2;
  }
  return parts;
}

interface Armed {
  readonly match: DropMatch;
  /** What happens at the matching reply (dropped with the connection, or held back by a stall), or at the command itself (held back). */
  readonly action: 'drop' | 'stall' | 'hold';
  readonly done: () => void;
  taken: boolean;
}

/** A set of proxies that share their faults: a fault applied to the group applies to each. */
class Faults {
  stalled = false;
  /** What clients send is held back ({@link FaultProxy.stallAtCommand}). */
  holding = false;
  delayMs = 0;
  armed: Armed | undefined;
  drops = 0;
}

/** One client connection and its connection to the server. */
class Link {
  private readonly upstream: net.Socket;
  private fromClient = Buffer.alloc(0);
  private fromServer = Buffer.alloc(0);
  private sent = 0;
  private replied = 0;
  /** Index of the command whose reply is to be dropped or held back, and the fault it matched. */
  private armedAt: number | undefined;
  private armedHere: Armed | undefined;
  private held: { toServer: Buffer[]; toClient: Buffer[] } = { toServer: [], toClient: [] };
  private chain = { toServer: Promise.resolve(), toClient: Promise.resolve() };
  closed = false;
  /** The client subscribed to something on this connection. */
  subscriber = false;
  /** Everything sent either way is dropped ({@link FaultProxy.silenceSubscribers}). */
  silenced = false;

  constructor(
    readonly client: net.Socket,
    target: { host: string; port: number },
    private readonly faults: Faults,
    private readonly commands: Record<string, number>,
    private readonly onClose: (link: Link) => void,
  ) {
    this.upstream = net.connect(target.port, target.host);
    this.upstream.setNoDelay(true);
    client.setNoDelay(true);
    client.on('data', (chunk: Buffer) => this.onClientData(chunk));
    this.upstream.on('data', (chunk: Buffer) => this.onServerData(chunk));
    for (const socket of [client, this.upstream]) socket.on('error', () => this.destroy());
    // A side that closes has sent all it had: what is still delayed on its way reaches the other side first.
    client.on('close', () => void this.chain.toServer.then(() => this.destroy()));
    this.upstream.on('close', () => void this.chain.toClient.then(() => this.destroy()));
  }

  /** Forwards what a stall held back. */
  flush(): void {
    const { toServer, toClient } = this.held;
    this.held = { toServer: [], toClient: [] };
    for (const chunk of toServer) this.forward('toServer', chunk);
    for (const chunk of toClient) this.forward('toClient', chunk);
  }

  destroy(reset = false): void {
    if (this.closed) return;
    this.closed = true;
    if (reset) this.client.resetAndDestroy();
    else this.client.destroy();
    this.upstream.destroy();
    this.onClose(this);
  }

  private onClientData(chunk: Buffer): void {
    this.fromClient = Buffer.concat([this.fromClient, chunk]);
    let pos = 0;
    /** Where the commands not passed on yet begin. */
    let from = 0;
    for (let len: number; (len = respLength(this.fromClient, pos)) > 0; pos += len) {
      const command = this.fromClient.subarray(pos, pos + len);
      const parts = commandParts(command);
      const name = (parts[0] ?? '').toLowerCase();
      this.commands[name] = (this.commands[name] ?? 0) + 1;
      const armed = this.faults.armed;
      if (armed?.action === 'hold' && !armed.taken && matches(armed.match, name, parts)) {
        // What came before goes on; from this command on, send() holds back what clients send until resume().
        armed.taken = true;
        this.faults.armed = undefined;
        if (pos > from) this.send('toServer', this.fromClient.subarray(from, pos));
        from = pos;
        this.faults.holding = true;
        armed.done();
      }
      // (Un)subscribing is answered by RESP3 pushes, not replies: neither counted nor dropped.
      if (PUBSUB.test(name)) {
        if (!name.includes('un')) this.subscriber = true;
        continue;
      }
      if (armed && armed.action !== 'hold' && !armed.taken && this.armedAt === undefined && matches(armed.match, name, parts)) {
        armed.taken = true;
        this.faults.armed = undefined;
        this.armedAt = this.sent;
        this.armedHere = armed;
      }
      this.sent++;
    }
    const complete = this.fromClient.subarray(from, pos);
    this.fromClient = this.fromClient.subarray(pos);
    if (complete.length > 0) this.send('toServer', complete);
  }

  private onServerData(chunk: Buffer): void {
    this.fromServer = Buffer.concat([this.fromServer, chunk]);
    let pos = 0;
    for (let len: number; (len = respLength(this.fromServer, pos)) > 0; pos += len) {
      const push = this.fromServer[pos] === 0x3e; // '>': a RESP3 push answers no command
      if (!push && this.armedAt !== undefined && this.replied === this.armedAt) {
        const armed = this.armedHere!;
        this.armedAt = undefined;
        this.armedHere = undefined;
        const reply = this.fromServer.subarray(pos, pos + len).toString('latin1');
        if (armed.match.reply !== undefined && !reply.startsWith(armed.match.reply)) {
          armed.taken = false; // not the reply asked for: wait for the next match
          this.faults.armed ??= armed;
        } else if (armed.action === 'stall') {
          // From this reply on, send() holds everything back until resume().
          this.faults.stalled = true;
          armed.done();
        } else {
          // The server ran the command and replied: pass on what came before, drop the rest.
          if (pos > 0) this.send('toClient', this.fromServer.subarray(0, pos));
          this.faults.drops++;
          this.chain.toClient.then(() => {
            this.destroy();
            armed.done();
          });
          this.fromServer = Buffer.alloc(0);
          return;
        }
      }
      if (!push) this.replied++;
    }
    const complete = this.fromServer.subarray(0, pos);
    this.fromServer = this.fromServer.subarray(pos);
    if (complete.length > 0) this.send('toClient', complete);
  }

  private send(direction: 'toServer' | 'toClient', chunk: Buffer): void {
    if (this.silenced) return;
    if (this.faults.stalled || (this.faults.holding && direction === 'toServer')) this.held[direction].push(chunk);
    else this.forward(direction, chunk);
  }

  private forward(direction: 'toServer' | 'toClient', chunk: Buffer): void {
    const socket = direction === 'toServer' ? this.upstream : this.client;
    const due = performance.now() + this.faults.delayMs;
    // Chunks keep their order, and each is due the delay after it came: a latency, which chunks
    // that follow each other closely do not add up.
    this.chain[direction] = this.chain[direction].then(async () => {
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      if (!this.closed) socket.write(chunk);
    });
  }
}

const PUBSUB = /^[sp]?(un)?subscribe$/;

function matches(match: DropMatch, name: string, parts: string[]): boolean {
  if (match.command !== undefined && match.command.toLowerCase() !== name) return false;
  const { argument } = match;
  if (argument !== undefined && !parts.slice(1).some((p) => (typeof argument === 'string' ? p.includes(argument) : argument.test(p))))
    return false;
  return true;
}

function loopbackOnly(host: string): string {
  if (host !== '127.0.0.1' && host !== 'localhost' && host !== '::1') {
    throw new Error(`fault proxy: refusing target host ${host}; only loopback servers may be proxied`);
  }
  return host === 'localhost' ? LOOPBACK_HOST : host;
}

class FaultProxyImpl implements FaultProxy {
  readonly host = LOOPBACK_HOST;
  port = 0;
  private server: net.Server | undefined;
  private readonly links = new Set<Link>();
  private accepted = 0;
  private readonly commands: Record<string, number> = Object.create(null) as Record<string, number>;

  constructor(
    private readonly target: { host: string; port: number },
    readonly faults: Faults,
  ) {}

  async listen(port: number): Promise<void> {
    const server = net.createServer((socket) => {
      this.accepted++;
      const link = new Link(socket, this.target, this.faults, this.commands, (l) => this.links.delete(l));
      this.links.add(link);
    });
    server.listen(port, this.host);
    await once(server, 'listening');
    this.server = server;
    this.port = (server.address() as net.AddressInfo).port;
  }

  get stats(): FaultProxyStats {
    return { accepted: this.accepted, open: this.links.size, drops: this.faults.drops, commands: { ...this.commands } };
  }

  dropAfterReply(match: DropMatch = {}): Promise<void> {
    return arm(this.faults, match, 'drop');
  }

  stallAtReply(match: DropMatch = {}): Promise<void> {
    return arm(this.faults, match, 'stall');
  }

  stallAtCommand(match: DropMatch = {}): Promise<void> {
    return arm(this.faults, match, 'hold');
  }

  stall(): void {
    this.faults.stalled = true;
  }

  resume(): void {
    this.faults.stalled = false;
    this.faults.holding = false;
    for (const link of this.links) link.flush();
  }

  silenceSubscribers(): number {
    let silenced = 0;
    for (const link of this.links) {
      if (!link.subscriber || link.silenced) continue;
      link.silenced = true;
      silenced++;
    }
    return silenced;
  }

  delay(ms: number): void {
    this.faults.delayMs = ms;
  }

  reset(): void {
    for (const link of [...this.links]) link.destroy(true);
  }

  async refuse(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.reset();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async accept(): Promise<void> {
    if (!this.server) await this.listen(this.port);
  }

  async close(): Promise<void> {
    await this.refuse();
  }
}

function arm(faults: Faults, match: DropMatch, action: Armed['action']): Promise<void> {
  if (faults.armed && !faults.armed.taken) throw new Error(`fault proxy: a ${faults.armed.action} is already armed; await it first`);
  return new Promise((resolve) => {
    faults.armed = { match, action, done: resolve, taken: false };
  });
}

/** Starts a fault proxy in front of a loopback Redis server. */
export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const target = { host: loopbackOnly(options.target.host ?? LOOPBACK_HOST), port: options.target.port };
  const proxy = new FaultProxyImpl(target, new Faults());
  await proxy.listen(options.port ?? 0);
  return proxy;
}

/** Where a client reaches a node through its proxy (an entry of {@link ClusterFaultProxy.natMap}). */
export interface ProxiedAddress {
  /** The proxy's loopback address. */
  readonly host: string;
  /** The proxy's port. */
  readonly port: number;
}

/** Proxies in front of every node of a Cluster, sharing their faults; see {@link proxyCluster}. */
export interface ClusterFaultProxy extends Omit<FaultProxy, 'host' | 'port' | 'accept' | 'refuse'> {
  /** What the proxies have seen and done so far, summed. */
  readonly stats: FaultProxyStats;
  /** One proxy per node. */
  readonly proxies: readonly FaultProxy[];
  /** ioredis `natMap`: pass it with the Cluster's startup nodes so that every connection goes through a proxy. */
  readonly natMap: Readonly<Record<string, ProxiedAddress>>;
}

/**
 * A {@link FaultProxy} in front of each node of `cluster`, sharing one set of
 * faults (a drop takes the first matching command on any node). Give an
 * ioredis Cluster client `natMap` and it talks to the nodes only through
 * the proxies.
 */
export async function proxyCluster(cluster: RedisClusterHandle): Promise<ClusterFaultProxy> {
  const faults = new Faults();
  const proxies: FaultProxyImpl[] = [];
  const natMap: Record<string, ProxiedAddress> = {};
  for (const node of cluster.nodes) {
    const proxy = new FaultProxyImpl({ host: LOOPBACK_HOST, port: node.port }, faults);
    await proxy.listen(0);
    proxies.push(proxy);
    natMap[`${LOOPBACK_HOST}:${node.port}`] = { host: LOOPBACK_HOST, port: proxy.port };
  }
  return {
    proxies,
    natMap,
    get stats(): FaultProxyStats {
      const all = proxies.map((p) => p.stats);
      const commands: Record<string, number> = {};
      for (const s of all) for (const [name, n] of Object.entries(s.commands)) commands[name] = (commands[name] ?? 0) + n;
      return {
        accepted: all.reduce((a, s) => a + s.accepted, 0),
        open: all.reduce((a, s) => a + s.open, 0),
        drops: faults.drops,
        commands,
      };
    },
    dropAfterReply: (match = {}) => arm(faults, match, 'drop'),
    stallAtReply: (match = {}) => arm(faults, match, 'stall'),
    stallAtCommand: (match = {}) => arm(faults, match, 'hold'),
    stall: () => proxies.forEach((p) => p.stall()),
    silenceSubscribers: () => proxies.reduce((n, p) => n + p.silenceSubscribers(), 0),
    resume: () => proxies.forEach((p) => p.resume()),
    delay: (ms) => proxies.forEach((p) => p.delay(ms)),
    reset: () => proxies.forEach((p) => p.reset()),
    close: async () => {
      await Promise.all(proxies.map((p) => p.close()));
    },
  };
}
