import calculateSlot from 'cluster-key-slot';
import type { ScriptName } from '../backends/scripts.js';
import { ClientClosedError, RedisUnavailableError } from '../errors.js';
import { LUA_SOURCES } from '../lua/scripts.generated.js';
import {
  addressOf,
  askNode,
  closedWithClient,
  type Driver,
  type MasterReply,
  type NodeChanged,
  refusedWhileMigrating,
  type ScriptArg,
  type SlotOf,
  type Subscriber,
  type SubscriberEvents,
  sendable,
} from './driver.js';
import { NodeScripts, shaOf } from './script-shas.js';

/**
 * A node-redis 5 or 6 client, what `createClient()` (from `redis` or
 * `@redis/client`) returns, connected: `await createClient(...).connect()`.
 * Taken by its shape (no import of node-redis), so any copy of it fits;
 * the library sends its scripts with `sendCommand` (EVALSHA, EVAL on
 * NOSCRIPT), and subscribes to wake-ups on a `duplicate()` of it.
 */
export interface NodeRedisCompatibleClient {
  /** False before `connect()` and after `close()`/`destroy()`: such a client is refused. */
  readonly isOpen: boolean;
  /** Any command as an array of strings: the library's scripts (`EVALSHA`, `EVAL`), `WAIT`, `COMMAND INFO`. */
  sendCommand(args: never, ...rest: never[]): Promise<unknown>;
  /** A new connection with the same options: the library's wake-up subscriber. */
  duplicate(...args: never[]): unknown;
  /** Sharded pub/sub with a listener: how a waiter hears a release (on the duplicate). */
  sSubscribe(...args: never[]): Promise<unknown>;
}

/**
 * A node-redis 5 or 6 Cluster client, what `createCluster()` returns, connected.
 * The library routes its scripts with `sendCommand(firstKey, ...)`, sends
 * `WAIT` through `nodeClient()` of a slot's master, and subscribes to
 * wake-ups with its `sSubscribe` (a connection per master, which node-redis
 * moves with the slots).
 */
export interface NodeRedisCompatibleCluster {
  /** False before `connect()` and after `close()`/`destroy()`: such a client is refused. */
  readonly isOpen: boolean;
  /** A command routed by its first key: the library's scripts, routed by the lock's state key. */
  sendCommand(firstKey: never, ...rest: never[]): Promise<unknown>;
  /** The client of one node: `WAIT` on the master that wrote a grant. */
  nodeClient(node: never): Promise<unknown>;
  /** The masters as the client knows them: renewal groups leases by master. */
  readonly masters: readonly unknown[];
  /** Sharded pub/sub with a listener, on the connection of the channel's master: how a waiter hears a release. */
  sSubscribe(...args: never[]): Promise<unknown>;
}

/** The part of node-redis' options the library reads: where a client connects. */
interface ConnectOptions {
  url?: string;
  socket?: { host?: string; port?: number; path?: string };
}

type Listener = (message: string, channel: string) => void;

/** A node-redis client as the library uses it inside. */
interface NodeRedisApi {
  readonly isOpen: boolean;
  readonly options?: ConnectOptions;
  sendCommand(args: readonly (string | Buffer)[]): Promise<unknown>;
  duplicate(): NodeRedisApi;
  connect(): Promise<unknown>;
  destroy(): void;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'reconnecting' | 'ready', listener: () => void): unknown;
  once(event: 'end', listener: () => void): unknown;
  off(event: 'end', listener: () => void): unknown;
  sSubscribe(channel: string, listener: Listener): Promise<void>;
  sUnsubscribe(channel: string, listener: Listener): Promise<void>;
}

/** A Cluster master as node-redis describes it. */
interface MasterNode {
  readonly address: string;
  /** Not in node-redis' typings: the master's sharded pub/sub connection, once made. */
  readonly pubSub?: { readonly client?: PubSubConnection };
}

/** A master's sharded pub/sub connection inside a node-redis Cluster client. */
interface PubSubConnection {
  readonly isReady?: boolean;
  on(event: 'reconnecting' | 'ready', listener: () => void): unknown;
  off(event: 'reconnecting' | 'ready', listener: () => void): unknown;
}

/** How long a Cluster subscription waits for its master's pub/sub connection to be back, at most (the hub bounds it too). */
const PUB_SUB_READY_MS = 10_000;
/** node-redis 5 names its event so; node-redis 6 fixed the spelling. */
const MOVE_FAILED_EVENTS = ['sharded-shannel-moved-error', 'sharded-channel-moved-error'] as const;

/** A node-redis Cluster client as the library uses it inside. */
interface NodeRedisClusterApi {
  readonly isOpen: boolean;
  readonly _options: { readonly rootNodes: readonly ConnectOptions[] };
  readonly slots: readonly ({ readonly master: MasterNode } | undefined)[];
  readonly masters: readonly MasterNode[];
  sendCommand(firstKey: string | undefined, isReadonly: boolean, args: readonly (string | Buffer)[]): Promise<unknown>;
  nodeClient(node: MasterNode): Promise<NodeRedisApi>;
  sSubscribe(channel: string, listener: Listener): Promise<void>;
  sUnsubscribe(channel: string, listener: Listener): Promise<void>;
  on(event: string, listener: (...args: never[]) => void): unknown;
  off(event: string, listener: (...args: never[]) => void): unknown;
}

/** Whether `value` has node-redis' client shape (a Cluster too: see {@link isNodeRedisCluster}). */
export function isNodeRedisClient(value: object): boolean {
  const v = value as Record<string, unknown>;
  return typeof v.sendCommand === 'function' && typeof v.sSubscribe === 'function' && typeof v.isOpen === 'boolean';
}

/** Whether a node-redis client is a Cluster client. */
export function isNodeRedisCluster(value: object): boolean {
  return typeof (value as { nodeClient?: unknown }).nodeClient === 'function';
}

/** A script call as node-redis sends it: `EVALSHA` (or `EVAL`), the SHA (or text), then its arguments. */
type ScriptCommand = (string | Buffer)[];

/**
 * `EVALSHA <sha> <args>`, every argument a string or a Buffer (node-redis
 * sends those only); the SHA is swapped for the script's text when it goes
 * as `EVAL` ({@link scriptCall}).
 */
function evalSha(name: ScriptName, args: readonly ScriptArg[]): ScriptCommand {
  const command: ScriptCommand = new Array<string | Buffer>(args.length + 2);
  command[0] = 'EVALSHA';
  command[1] = shaOf(name);
  for (let i = 0; i < args.length; i++) command[i + 2] = sendable(args[i]!);
  return command;
}

/**
 * How often one script call lost with its connection is sent again: ioredis'
 * default `maxRetriesPerRequest`. Each resend waits in node-redis' offline
 * queue for the next connection; the caller's bound (`redisTimeoutMs`) ends
 * the wait.
 */
const MAX_RESENDS = 20;

/**
 * Script `name` on the node `scripts` are of, `EVAL` only as they allow
 * (once per node, and once more after it lost its scripts: SCRIPT FLUSH, a
 * restart, a failover).
 */
function scriptCall(
  scripts: NodeScripts,
  name: ScriptName,
  command: ScriptCommand,
  send: (command: ScriptCommand) => Promise<unknown>,
  client: { readonly isOpen: boolean },
): Promise<unknown> {
  return scripts.run(
    name,
    (asEval) => {
      command[0] = asEval ? 'EVAL' : 'EVALSHA';
      command[1] = asEval ? LUA_SOURCES[name] : shaOf(name);
      return sendScript(command, send, client);
    },
    isErrorReply,
  );
}

/**
 * Sends a script call, and again when the connection was lost with the
 * call on it: node-redis fails such calls where ioredis resends them
 * (`autoResendUnfulfilledCommands`), and every script is safe to run twice
 * (hold ids), so a dropped reply costs a resend, not an unknown outcome.
 * A call failed by the user's own `destroy()` is `ClientClosedError`.
 */
function sendScript(command: ScriptCommand, send: (command: ScriptCommand) => Promise<unknown>, client: { readonly isOpen: boolean }) {
  let resends = 0;
  const attempt = (): Promise<unknown> =>
    send(command).catch((error: unknown) => {
      if (!client.isOpen && errorName(error) === 'DisconnectsClientError')
        throw new ClientClosedError('the Redis client was closed (destroy()) with the call in flight; use an open client', {
          cause: error,
        });
      // DisconnectsClientError with the user's client open: a Cluster's rediscovery (a failover) destroyed the
      // node's client with the call on it; node-redis routes the resend where the slot lives now.
      const lost = lostWithConnection(error) || errorName(error) === 'DisconnectsClientError';
      if (client.isOpen && lost && resends++ < MAX_RESENDS) return attempt();
      throw error;
    });
  return attempt();
}

/** The class name of a node-redis error (the library does not import node-redis). */
function errorName(error: unknown): string | undefined {
  return error instanceof Error ? error.constructor.name : undefined;
}

/**
 * Whether a call failed because its connection was lost (closed, reset, timed
 * out) after it may have been sent: not a reply of the server, not the user's
 * close, not node-redis refusing a call while offline (`disableOfflineQueue`).
 */
function lostWithConnection(error: unknown): boolean {
  const name = errorName(error);
  if (name === 'SocketClosedUnexpectedlyError' || name === 'SocketTimeoutError') return true;
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code); // ECONNRESET, EPIPE, ETIMEDOUT...
}

/** Whether `error` is one of node-redis' error replies (`ErrorReply`, `SimpleError`, `BlobError`): the server answered. */
function isErrorReply(error: unknown): boolean {
  for (let p = error instanceof Error ? Object.getPrototypeOf(error) : null; p && p !== Error.prototype; p = Object.getPrototypeOf(p)) {
    if ((p as { constructor?: { name?: string } }).constructor?.name === 'ErrorReply') return true;
  }
  return false;
}

/** Where a node-redis client (or a Cluster's root node) connects. */
function addressesOf(options: ConnectOptions | undefined): string {
  if (options?.socket?.path) return `unix:${options.socket.path}`;
  if (options?.url) {
    const url = new URL(options.url);
    return addressOf(url.hostname.replace(/^\[|\]$/g, '') || undefined, url.port ? Number(url.port) : undefined);
  }
  return addressOf(options?.socket?.host, options?.socket?.port);
}

/** node-redis 5 or 6 on one server. */
export class NodeRedisDriver implements Driver {
  readonly cluster = false;
  readonly keyPrefix = '';
  private readonly client: NodeRedisApi;
  private changed: NodeChanged = () => undefined;
  private readonly scripts = new NodeScripts(() => this.changed());
  private readonly send: (command: ScriptCommand) => Promise<unknown>;

  constructor(client: NodeRedisCompatibleClient) {
    const api = (this.client = client as unknown as NodeRedisApi);
    this.send = (command) => api.sendCommand(command);
  }

  get closed(): boolean {
    return !this.client.isOpen;
  }

  script(name: ScriptName, args: readonly ScriptArg[]): Promise<unknown> {
    return scriptCall(this.scripts, name, evalSha(name, args), this.send, this.client);
  }

  command(args: readonly string[]): Promise<unknown> {
    return this.client.sendCommand(args);
  }

  async everyMaster(args: readonly string[]): Promise<MasterReply[]> {
    return [await askNode(this.addresses()[0]!, () => this.client.sendCommand(args))];
  }

  watchNodes(changed: NodeChanged): void {
    this.changed = changed;
    this.client.on('ready', () => changed()); // each reconnect: it may be another server behind the same name
  }

  async publish(channel: string, message: string): Promise<number> {
    return Number(await this.client.sendCommand(['SPUBLISH', channel, message]));
  }

  async waitForReplicas(_slot: number, replicas: number, timeoutMs: number): Promise<number> {
    return Number(await this.client.sendCommand(['WAIT', String(replicas), String(timeoutMs)]));
  }

  masterOf(): string {
    return '';
  }

  addresses(): string[] {
    return [addressesOf(this.client.options)];
  }

  subscriber(events: SubscriberEvents): Subscriber {
    return closedWithClient(this.client, new ServerSubscriber(this.client, events));
  }

  isReplyError(error: unknown): boolean {
    return isErrorReply(error);
  }

  notRunWhileMigrating(): boolean {
    return false;
  }
}

/** node-redis 5 or 6 on a Cluster: node-redis follows MOVED and ASK; TRYAGAIN comes back to the library. */
export class NodeRedisClusterDriver implements Driver {
  readonly cluster = true;
  readonly keyPrefix = '';
  private readonly client: NodeRedisClusterApi;
  /** The scripts of each master, by address: a new master (a failover) starts with none. */
  private readonly nodes = new Map<string, NodeScripts>();
  private changed: NodeChanged = () => undefined;

  constructor(client: NodeRedisCompatibleCluster) {
    this.client = client as unknown as NodeRedisClusterApi;
  }

  get closed(): boolean {
    return !this.client.isOpen;
  }

  script(name: ScriptName, args: readonly ScriptArg[], lock?: SlotOf): Promise<unknown> {
    const command = evalSha(name, args);
    const key = command[3] as string | undefined; // after EVALSHA, the SHA and the key count: the first key routes the call
    const slot = lock?.slot ?? (key === undefined ? undefined : calculateSlot(key));
    const master = slot === undefined ? undefined : this.client.slots[slot]?.master.address;
    let scripts = this.nodes.get(master ?? '');
    if (scripts === undefined) {
      this.nodes.set(master ?? '', (scripts = new NodeScripts(() => this.changed())));
      if (master !== undefined) this.changed(master);
    }
    return scriptCall(scripts, name, command, (c) => this.client.sendCommand(key, false, c), this.client);
  }

  command(args: readonly string[]): Promise<unknown> {
    return this.client.sendCommand(undefined, false, args);
  }

  everyMaster(args: readonly string[]): Promise<MasterReply[]> {
    return Promise.all(
      this.client.masters.map((master) => askNode(master.address, async () => (await this.client.nodeClient(master)).sendCommand(args))),
    );
  }

  watchNodes(changed: NodeChanged): void {
    this.changed = changed;
    // A node's client reconnecting (node-redis keeps it, and sends what waits once it is back).
    this.client.on('node-reconnecting', () => changed());
  }

  async publish(channel: string, message: string): Promise<number> {
    return Number(await this.client.sendCommand(channel, false, ['SPUBLISH', channel, message]));
  }

  async waitForReplicas(slot: number, replicas: number, timeoutMs: number): Promise<number> {
    const master = this.client.slots[slot]?.master;
    if (!master) throw new RedisUnavailableError(`no connection to the master of Cluster slot ${slot} (slot map not loaded)`);
    const node = await this.client.nodeClient(master);
    return Number(await node.sendCommand(['WAIT', String(replicas), String(timeoutMs)]));
  }

  masterOf(slot: number): string | undefined {
    return this.client.slots[slot]?.master.address;
  }

  addresses(): string[] {
    return this.client._options.rootNodes.map(addressesOf);
  }

  subscriber(events: SubscriberEvents): Subscriber {
    return new ClusterSubscriber(this.client, events);
  }

  isReplyError(error: unknown): boolean {
    return isErrorReply(error);
  }

  notRunWhileMigrating(error: unknown): boolean {
    return refusedWhileMigrating(error);
  }
}

/**
 * One server: one subscriber connection, a `duplicate()` of the client,
 * which node-redis reconnects and resubscribes; each reconnection is
 * reported to the hub (a release may have gone unheard meanwhile), which
 * subscribes again.
 */
class ServerSubscriber implements Subscriber {
  private connection: NodeRedisApi | undefined;
  private connecting: Promise<unknown> | undefined;
  private readonly listener: Listener;
  private readonly channels = new Set<string>();

  constructor(
    private readonly client: NodeRedisApi,
    private readonly events: SubscriberEvents,
  ) {
    this.listener = (message, channel) => events.message(channel, message);
  }

  async subscribe(channel: string): Promise<void> {
    await this.open();
    this.channels.add(channel);
    await this.connection!.sSubscribe(channel, this.listener);
  }

  unsubscribe(channel: string): void {
    this.channels.delete(channel);
    if (this.connection?.isOpen) this.connection.sUnsubscribe(channel, this.listener).catch(() => undefined);
  }

  reconnect(channels: readonly string[]): void {
    for (const channel of channels) this.channels.delete(channel);
    this.close(); // a silent connection: the hub's next subscription opens a new one
    this.lost();
  }

  close(): void {
    const connection = this.connection;
    this.connection = this.connecting = undefined;
    if (connection?.isOpen) connection.destroy();
  }

  private lost(): void {
    if (this.channels.size === 0) return;
    const channels = [...this.channels];
    this.channels.clear();
    this.events.lost(channels);
  }

  /** Connects the subscriber connection (once; again after a failed first connect). */
  private open(): Promise<unknown> {
    if (this.connecting) return this.connecting;
    const connection = (this.connection = this.client.duplicate());
    connection.on('error', this.events.error);
    connection.on('reconnecting', () => this.connection === connection && this.lost());
    const connecting = (this.connecting = connection.connect().catch((error: unknown) => {
      if (this.connecting === connecting) this.close();
      throw error;
    }));
    return connecting;
  }
}

/**
 * A Cluster: the Cluster client's own sharded pub/sub, which keeps one
 * connection per master with channels. A channel whose slot moves is not
 * subscribed on its new master (node-redis 5.12: the server's
 * `sunsubscribe` ends it, and nothing makes it again); the hub does so
 * once the client's slot map shows the move. A move node-redis reports
 * failed is reported, and handed back to the hub. node-redis reconnects a
 * master's pub/sub connection and subscribes again silently: its channels
 * are reported lost at the reconnect (a release meanwhile went unheard),
 * and the hub's subscriptions are confirmed once it is ready again.
 */
class ClusterSubscriber implements Subscriber {
  private readonly channels = new Set<string>();
  private readonly listener: Listener;
  private readonly moveFailed: (error: Error, channel: string) => void;
  /** The pub/sub connections watched for reconnects, each once: their state, and the listeners to take off at close(). */
  private readonly watched = new Map<PubSubConnection, Watched>();

  constructor(
    private readonly cluster: NodeRedisClusterApi,
    private readonly events: SubscriberEvents,
  ) {
    this.listener = (message, channel) => events.message(channel, message);
    this.moveFailed = (error, channel) => {
      if (!this.channels.delete(channel)) return;
      events.error(error);
      events.lost([channel]);
    };
    for (const event of MOVE_FAILED_EVENTS) cluster.on(event, this.moveFailed);
  }

  async subscribe(channel: string): Promise<void> {
    this.channels.add(channel);
    await this.cluster.sSubscribe(channel, this.listener);
    // Unsubscribed (or closed) while node-redis made the master's pub/sub connection: its sUnsubscribe found
    // nothing to end then, and the subscription would stay on the user's client.
    if (!this.channels.has(channel) && this.cluster.isOpen) await this.cluster.sUnsubscribe(channel, this.listener).catch(() => undefined);
    const connection = this.connectionOf(channel);
    if (!connection) return; // not node-redis' shape: its reconnects go unreported, and waiters re-check meanwhile
    // node-redis confirms a channel it keeps at once, also while that connection reconnects: confirmed once it is back.
    const watched = this.watch(connection);
    if (!watched.up) await watched.back();
  }

  unsubscribe(channel: string): void {
    if (this.channels.delete(channel) && this.cluster.isOpen) this.cluster.sUnsubscribe(channel, this.listener).catch(() => undefined);
  }

  /**
   * A silent connection: node-redis keeps one sharded pub/sub client per
   * master (`_slots`, not in its typings); the ones serving `channels` are
   * destroyed and forgotten, so that the hub's next subscription makes new
   * ones. Where that shape is not found, the hub's subscriptions are made
   * again on the same connection, and waiters re-check meanwhile.
   */
  reconnect(channels: readonly string[]): void {
    const slots = (
      this.cluster as unknown as { _slots?: { slots?: ({ master?: { pubSub?: { client?: { destroy?(): void } } } } | undefined)[] } }
    )._slots?.slots;
    for (const channel of channels) {
      const master = slots?.[calculateSlot(channel)]?.master;
      const pubSub = master?.pubSub;
      if (master && pubSub) {
        master.pubSub = undefined;
        try {
          pubSub.client?.destroy?.();
        } catch {
          // already closed
        }
      }
    }
    for (const channel of channels) this.channels.delete(channel);
    for (const channel of channels) this.cluster.sUnsubscribe(channel, this.listener).catch(() => undefined);
  }

  close(): void {
    for (const event of MOVE_FAILED_EVENTS) this.cluster.off(event, this.moveFailed);
    for (const channel of [...this.channels]) this.unsubscribe(channel);
    for (const watched of this.watched.values()) watched.stop();
    this.watched.clear();
  }

  /** The pub/sub connection of the master serving `channel` now, where node-redis' shape shows it. */
  private connectionOf(channel: string): PubSubConnection | undefined {
    return this.cluster.slots[calculateSlot(channel)]?.master.pubSub?.client;
  }

  /** Watches a connection for its reconnects (once per connection): it reports the channels it serves, once per outage. */
  private watch(connection: PubSubConnection): Watched {
    let watched = this.watched.get(connection);
    if (watched) return watched;
    watched = new Watched(connection, () => {
      const channels = [...this.channels].filter((channel) => this.connectionOf(channel) === connection);
      if (channels.length === 0) return;
      this.events.error(
        new Error('a wake-up subscriber connection closed; node-redis reconnects it, and waiters re-check once it is back'),
      );
      this.events.lost(channels);
    });
    this.watched.set(connection, watched);
    return watched;
  }
}

/** One node-redis pub/sub connection as a Cluster subscriber watches it: up or reconnecting, and the wait for it to be back. */
class Watched {
  up: boolean;
  private backAgain: Promise<void> | undefined;
  private readonly onReady = () => {
    this.up = true;
  };
  private readonly onReconnecting = () => {
    if (!this.up) return;
    this.up = false;
    this.reconnecting();
  };

  constructor(
    private readonly connection: PubSubConnection,
    private readonly reconnecting: () => void,
  ) {
    this.up = connection.isReady !== false;
    connection.on('ready', this.onReady);
    connection.on('reconnecting', this.onReconnecting);
  }

  /** Resolves once the connection is ready again; rejects after {@link PUB_SUB_READY_MS} (the hub then tries again later). */
  back(): Promise<void> {
    this.backAgain ??= new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.connection.off('ready', done);
        this.backAgain = undefined;
        resolve();
      };
      const timer = setTimeout(() => {
        this.connection.off('ready', done);
        this.backAgain = undefined;
        reject(new Error(`the wake-up subscriber connection was not back within ${PUB_SUB_READY_MS} ms; waiters re-check meanwhile`));
      }, PUB_SUB_READY_MS);
      timer.unref();
      this.connection.on('ready', done);
    });
    return this.backAgain;
  }

  /** Takes the watch's listeners off the connection (node-redis' own, shared with the application). */
  stop(): void {
    this.connection.off('ready', this.onReady);
    this.connection.off('reconnecting', this.onReconnecting);
  }
}
