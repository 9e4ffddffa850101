import calculateSlot from 'cluster-key-slot';
import type { Cluster, Command, Redis } from 'ioredis';
import type { ScriptName } from '../backends/scripts.js';
import { RedisUnavailableError } from '../errors.js';
import { LUA_SOURCES } from '../lua/scripts.generated.js';
import { connectionTrouble, isClosed, isCluster, type RedisClient } from '../redis.js';
import { coalesceWrites } from './coalesce.js';
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
} from './driver.js';
import { NodeScripts, shaOf } from './script-shas.js';

type Invoke = (...args: readonly ScriptArg[]) => Promise<unknown>;
/** ioredis' `Command` class. */
type CommandClass = new (
  name: string,
  args: readonly never[],
  options: { readonly replyEncoding: 'utf8'; readonly errorStack?: Error },
) => Command;
/** A script call's `Command` is made with no arguments; they are set after (see `IoredisDriver.send`). */
const NO_ARGS: readonly never[] = [];
const UTF8 = { replyEncoding: 'utf8' } as const;

/**
 * The keys each script takes, declared to `defineCommand`: with
 * `enableAutoPipelining` on a Cluster, ioredis groups a defined command by
 * the slot of its first argument, which without this is the key count, and
 * then refuses the group ("All keys in the pipeline should belong to the same
 * slots allocation group"). forceRelease takes a lock's every key, whose
 * count depends on the mode: it is sent as EVALSHA there (see `defined`).
 */
const KEY_COUNTS: Record<ScriptName, number | undefined> = {
  acquireRead: 3,
  acquireWrite: 3,
  release: 3,
  extend: 3,
  extendAcrossSlots: 3,
  abandon: 3,
  keepPlace: 3,
  inspect: 3,
  legacyAcquireRead: 6,
  legacyAcquireWrite: 6,
  legacyRelease: 6,
  legacyExtend: 6,
  legacyAbandon: 6,
  legacyInspect: 6,
  fencedSet: 2,
  fencedGet: 2,
  forceRelease: undefined,
};

/** The command each script is defined under on a client: namespaced, so it cannot clash with the user's own. */
const COMMANDS = Object.fromEntries(Object.keys(LUA_SOURCES).map((name) => [name, `rwlock_${name}`])) as Record<ScriptName, string>;

/** The command script `name` is defined under on an ioredis client. */
export const commandName = (name: ScriptName): string => COMMANDS[name];

/**
 * Errors after which a script sent straight to a Cluster node goes through
 * the Cluster client, which follows the redirection, waits out the
 * migration or failover, and refreshes its slot map (every one of them but
 * a closed connection proves the script did not run; after a closed one
 * ioredis itself sends the command again, and every script is harmless to
 * run twice).
 */
const REROUTE = /^(?:MOVED |ASK |TRYAGAIN|CLUSTERDOWN|Connection is closed\.)/;

/**
 * ioredis 5 and 6, and clients of its API (iovalkey). A script goes
 * straight to the connection of its slot as `EVALSHA` (`EVAL` the first
 * time on each connection, and once per node on NOSCRIPT, after SCRIPT FLUSH
 * or a failover: {@link NodeScripts}): on a Cluster
 * its routing (slot hashing, a closure per command to follow MOVED and ASK)
 * cost as much client time as the library's own code, and the lock knows
 * its slot already. The scripts are also defined on the client
 * (`defineCommand`), for what the Cluster client must route: a slot whose
 * master is not connected yet, a redirection; and for a client with a
 * `keyPrefix` (the fencing functions take one, `LockClient` does not): the
 * client adds it to the keys of its commands, a Cluster's node connections
 * may not.
 */
export class IoredisDriver implements Driver {
  readonly cluster: boolean;
  readonly keyPrefix: string;
  /** The scripts of each connection's node: a Cluster's new master (a failover) comes with a new connection. */
  private readonly nodes = new WeakMap<Redis, NodeScripts>();
  private changed: NodeChanged = () => undefined;

  /** ioredis' `Command`, once loaded, if `client` was made by that same copy of ioredis (see `send`). */
  private Command: CommandClass | undefined;
  /** Until ioredis is loaded (a dynamic import: it is an optional peer), that import. */
  private loading: Promise<void> | undefined;

  connectionTrouble(): string | undefined {
    return connectionTrouble(this.client);
  }

  constructor(private readonly client: RedisClient) {
    this.cluster = isCluster(client);
    this.keyPrefix = client.options.keyPrefix ?? '';
    for (const name of Object.keys(COMMANDS) as ScriptName[]) {
      const numberOfKeys = KEY_COUNTS[name];
      client.defineCommand(
        COMMANDS[name],
        numberOfKeys === undefined ? { lua: LUA_SOURCES[name] } : { lua: LUA_SOURCES[name], numberOfKeys },
      );
    }
    // ioredis is an optional peer: looked up here, not imported by this module. (Its class cannot
    // be read from the client: ioredis mixes EventEmitter in, whose `constructor` replaces Redis.)
    this.loading = import('ioredis').then(
      (ioredis) => {
        if (client instanceof ioredis.Redis || client instanceof ioredis.Cluster) this.Command = ioredis.Command as unknown as CommandClass;
        this.loading = undefined;
      },
      () => {
        this.loading = undefined;
      },
    );
  }

  get closed(): boolean {
    return isClosed(this.client);
  }

  script(name: ScriptName, args: readonly ScriptArg[], lock?: SlotOf): Promise<unknown> {
    const client = this.client;
    if (this.keyPrefix !== '') return this.defined(name, args);
    if (!isCluster(client)) {
      coalesceWrites(client);
      return this.run(client, name, args);
    }
    const connection = lock !== undefined && client.status === 'ready' ? pooledConnection(client, lock.slot) : undefined;
    if (connection?.status !== 'ready') return this.defined(name, args);
    coalesceWrites(connection);
    return this.run(connection, name, args);
  }

  /** Script `name` on `connection`, its node's scripts loaded once ({@link NodeScripts}). */
  private run(connection: Redis, name: ScriptName, args: readonly ScriptArg[]): Promise<unknown> {
    let scripts = this.nodes.get(connection);
    if (scripts === undefined) {
      this.nodes.set(connection, (scripts = new NodeScripts(() => this.changed())));
      this.changed(this.cluster ? nodeKey(connection) : this.addresses()[0]);
    }
    const running = scripts.run(name, (asEval) => this.send(connection, name, args, asEval), isIoredisReply);
    if (!this.cluster) return running;
    return running.catch((error: unknown) => {
      if (REROUTE.test(error instanceof Error ? error.message : '')) return this.defined(name, args);
      throw error;
    });
  }

  /**
   * `EVALSHA` (or `EVAL`) of script `name` on `connection`, handed to its
   * `sendCommand` as a `Command` whose arguments are set, not given: the
   * constructor copies the arguments it is given with `Array.prototype.flat`,
   * about 100 ns an argument on Node 20 (1 µs for an acquire's 9, as much as
   * the rest of ioredis' work on the call). And with `enableAutoPipelining`
   * on, ioredis queues a command method's call for a pipeline, and runs one
   * such pipeline at a time per connection, so each batch waits for the one
   * before it (0.45x the floor at 64 in flight); `coalesceWrites` batches our
   * writes without that wait. For a client of another copy of ioredis, or of
   * a fork, the method is used. A call made before ioredis is loaded waits
   * for it on an autopipelining client (the first calls of a new client): a
   * loaded machine took longer to resolve the import than a warm-up cycle,
   * and the calls went to the queue.
   */
  private send(connection: Redis, name: ScriptName, args: readonly ScriptArg[], asEval: boolean): Promise<unknown> {
    if (this.loading !== undefined && connection.options.enableAutoPipelining) {
      return this.loading.then(() => this.send(connection, name, args, asEval));
    }
    const first = asEval ? LUA_SOURCES[name] : shaOf(name);
    const Command = this.Command;
    if (Command === undefined)
      return ((asEval ? connection.eval : connection.evalsha) as unknown as Invoke).call(connection, first, ...args);
    const command = new Command(
      asEval ? 'eval' : 'evalsha',
      NO_ARGS,
      connection.options.showFriendlyErrorStack ? { replyEncoding: 'utf8', errorStack: new Error() } : UTF8,
    );
    // Copied by concat: the same list built by push was moved to the old space by V8, and its
    // scavenges took 3.5 ms instead of 0.7 (node --trace-gc, bench/profile.ts at 16 in flight).
    command.args = [first].concat(args as string[]);
    // What the constructor did to the arguments it was given (none): numbers to strings, and
    // a Buffer (a fencedSet value) sent as its bytes.
    command.stringifyArguments();
    return connection.sendCommand(command) as Promise<unknown>;
  }

  /**
   * Script `name` (`args` start with the key count) as a command defined on
   * the client: ioredis routes it (and follows redirections) itself.
   * forceRelease, whose key count varies (and any call whose count differs
   * from the one defined), goes as EVALSHA (EVAL on NOSCRIPT), which ioredis
   * routes by its first key.
   */
  private defined(name: ScriptName, args: readonly ScriptArg[]): Promise<unknown> {
    const client = this.client as unknown as Record<string, Invoke>;
    if (KEY_COUNTS[name] !== args[0]) {
      return client.evalsha!(shaOf(name), ...args).catch((error: unknown) => {
        if (error instanceof Error && error.message.startsWith('NOSCRIPT')) return client.eval!(LUA_SOURCES[name], ...args);
        throw error;
      });
    }
    return (client[COMMANDS[name]] as Invoke).apply(client, args.slice(1));
  }

  command(args: readonly string[]): Promise<unknown> {
    return this.client.call(args[0]!, ...args.slice(1)) as Promise<unknown>;
  }

  everyMaster(args: readonly string[]): Promise<MasterReply[]> {
    const client = this.client;
    const nodes: [string, Redis][] = isCluster(client)
      ? client.nodes('master').map((n) => [nodeKey(n), n])
      : [[this.addresses()[0]!, client]];
    return Promise.all(nodes.map(([node, connection]) => askNode(node, () => connection.call(args[0]!, ...args.slice(1)))));
  }

  watchNodes(changed: NodeChanged): void {
    this.changed = changed;
    // One server: each reconnect (it may be another server behind the same name). A Cluster: a node's
    // connection is made anew after it was lost, and for a new master (ioredis emits +node).
    if (isCluster(this.client)) this.client.on('+node', (node: Redis) => node.options.readOnly || changed());
    else this.client.on('ready', () => changed());
  }

  async publish(channel: string, message: string): Promise<number> {
    return Number(await this.client.spublish(channel, message)); // a Cluster routes it by the channel's slot
  }

  async waitForReplicas(slot: number, replicas: number, timeoutMs: number): Promise<number> {
    return Number(await masterConnection(this.client, slot).wait(replicas, timeoutMs));
  }

  masterOf(slot: number): string | undefined {
    return isCluster(this.client) ? this.client.slots[slot]?.[0] : '';
  }

  addresses(): string[] {
    const client = this.client;
    if (isCluster(client)) {
      const nodes = (client as unknown as { startupNodes?: unknown }).startupNodes;
      if (!Array.isArray(nodes)) return [];
      return nodes.map((n: unknown) => {
        if (typeof n === 'string') return n.replace(/^redis:\/\//, '');
        if (typeof n === 'number') return addressOf(undefined, n);
        const node = n as { host?: string; port?: number };
        return addressOf(node.host, node.port);
      });
    }
    const o = client.options;
    return [o.path ? `unix:${o.path}` : addressOf(o.host, o.port)];
  }

  subscriber(events: SubscriberEvents): Subscriber {
    const client = this.client;
    const subscriber = isCluster(client)
      ? new ClusterSubscriber(client, events)
      : new ServerSubscriber(client.duplicate({ lazyConnect: false, keepAlive: client.options.keepAlive || KEEPALIVE_MS }), events);
    return closedWithClient(client, subscriber);
  }

  isReplyError(error: unknown): boolean {
    return isIoredisReply(error);
  }

  notRunWhileMigrating(error: unknown): boolean {
    return refusedWhileMigrating(error);
  }
}

/** Whether `error` is a reply of the server (ioredis' `ReplyError`). */
function isIoredisReply(error: unknown): boolean {
  return (error as { name?: unknown } | null)?.name === 'ReplyError';
}

/**
 * The connection that serves `slot`'s master: on one server the client
 * itself; on a Cluster the pooled connection ioredis sends that slot's
 * commands through (`WAIT` counts the writes of the connection it is sent
 * on, so it must be this one).
 */
function masterConnection(client: RedisClient, slot: number): Redis {
  if (!isCluster(client)) return client;
  const node = pooledConnection(client, slot);
  if (!node) {
    throw new RedisUnavailableError(
      `no connection to the master of Cluster slot ${slot} (slot map: ${client.slots[slot]?.[0] ?? 'not loaded'})`,
    );
  }
  return node;
}

/**
 * The connection a Cluster client sends `slot`'s commands to, or undefined
 * before the slot map is loaded: its pool's, by the master's key
 * (`cluster.slots[slot][0]`; the pool is not in ioredis' typings), else the
 * master of that address among `nodes('master')`.
 */
function pooledConnection(cluster: Cluster, slot: number): Redis | undefined {
  const key = cluster.slots[slot]?.[0];
  if (key === undefined) return undefined;
  const pool = (cluster as unknown as { connectionPool?: { getInstanceByKey?(key: string): Redis | undefined } }).connectionPool;
  return pool?.getInstanceByKey?.(key) ?? cluster.nodes('master').find((n) => nodeKey(n) === key);
}

/** A Cluster node connection's key, `host:port`, as the slot map names its master. */
function nodeKey(connection: Redis): string {
  return `${connection.options.host}:${connection.options.port}`;
}

/** TCP keepalive on the library's subscriber connections, where the user's client sets none. */
const KEEPALIVE_MS = 5_000;

/**
 * One server: one subscriber connection, which ioredis reconnects and
 * resubscribes; each close is reported to the hub (a release may have gone
 * unheard meanwhile), which subscribes again (confirmed once reconnected).
 */
class ServerSubscriber implements Subscriber {
  private readonly channels = new Set<string>();

  constructor(
    private readonly connection: Redis,
    events: SubscriberEvents,
  ) {
    connection.on('smessage', events.message);
    connection.on('error', events.error);
    connection.on('close', () => {
      if (this.channels.size === 0) return;
      const channels = [...this.channels];
      this.channels.clear();
      events.error(new Error('the wake-up subscriber connection closed; ioredis reconnects it, and waiters re-check once it is back'));
      events.lost(channels);
    });
  }

  async subscribe(channel: string): Promise<void> {
    this.channels.add(channel);
    await this.connection.ssubscribe(channel);
  }

  unsubscribe(channel: string): void {
    this.channels.delete(channel);
    this.connection.sunsubscribe(channel).catch(() => undefined);
  }

  reconnect(channels: readonly string[]): void {
    // A silent connection, or one stuck in its handshake (ioredis' connectTimeout ends at the TCP connect, and
    // its ready check and AUTH wait for ever): ioredis closes it (its other channels reported as lost) and
    // connects again.
    for (const channel of channels) this.channels.delete(channel);
    const status = this.connection.status;
    if (status === 'ready' || status === 'connect') this.connection.disconnect(true);
  }

  close(): void {
    this.channels.clear();
    this.connection.disconnect();
  }
}

/**
 * A Cluster: one plain connection to each master whose locks have waiters,
 * made from the Cluster client's own connection to that master (same
 * address, credentials, TLS), for the channels of the slots it serves. A
 * second Cluster client would open a connection to every node (READONLY to
 * each replica) and one more for CLUSTER INFO. When a channel's slot moves
 * (ioredis emits `moved`) or a connection gives up, its channels are handed
 * back to the hub, which subscribes them again where they live now.
 */
class ClusterSubscriber implements Subscriber {
  private readonly byNode = new Map<string, { connection: Redis; channels: Set<string> }>();

  constructor(
    private readonly cluster: Cluster,
    private readonly events: SubscriberEvents,
  ) {}

  async subscribe(channel: string): Promise<void> {
    const node = this.nodeFor(channel);
    node.channels.add(channel);
    await node.connection.ssubscribe(channel);
  }

  unsubscribe(channel: string): void {
    for (const [key, node] of this.byNode) {
      if (!node.channels.delete(channel)) continue;
      if (node.channels.size > 0) node.connection.sunsubscribe(channel).catch(() => undefined);
      else this.drop(key); // its last channel: no connection kept for nothing
    }
  }

  reconnect(channels: readonly string[]): void {
    for (const [key, node] of this.byNode) {
      if (!channels.some((channel) => node.channels.has(channel))) continue;
      const lost = [...node.channels].filter((channel) => !channels.includes(channel));
      this.drop(key); // the next subscription opens a new connection to wherever the slot lives
      if (lost.length > 0) this.events.lost(lost);
    }
  }

  close(): void {
    for (const key of [...this.byNode.keys()]) this.drop(key);
  }

  private nodeFor(channel: string): { connection: Redis; channels: Set<string> } {
    const slot = calculateSlot(channel);
    const key = this.cluster.slots[slot]?.[0];
    const master = pooledConnection(this.cluster, slot);
    if (key === undefined || !master) {
      this.cluster.refreshSlotsCache();
      throw new Error(`no master known yet for the slot of wake-up channel "${channel}"; waiters re-check meanwhile`);
    }
    let node = this.byNode.get(key);
    if (!node) {
      const connection = master.duplicate({
        lazyConnect: false,
        readOnly: false,
        keepAlive: master.options.keepAlive || KEEPALIVE_MS,
        retryStrategy: (times: number) => (times > 10 ? null : Math.min(100 * times, 1_000)),
      });
      node = { connection, channels: new Set() };
      const lost = () => {
        if (this.byNode.get(key)?.connection !== connection) return;
        const channels = [...this.byNode.get(key)!.channels];
        this.drop(key);
        if (isClosed(this.cluster)) return; // the user closed the Cluster: nothing to subscribe again
        this.cluster.refreshSlotsCache(); // where do they live now?
        this.events.lost(channels);
      };
      connection.on('smessage', this.events.message);
      connection.on('error', this.events.error);
      connection.on('moved', lost); // a channel's slot left this node (MOVED, or the server's sunsubscribe)
      connection.on('end', lost); // it gave up reconnecting
      // ioredis reconnects it and subscribes again, silently: a release meanwhile went unheard, so its
      // channels are reported once per outage, and the hub's subscriptions are confirmed once it is back.
      let up = false;
      connection.on('ready', () => (up = true));
      connection.on('close', () => {
        const current = this.byNode.get(key);
        if (!up || current?.connection !== connection || current.channels.size === 0) return;
        up = false;
        this.events.error(
          new Error(`the wake-up subscriber connection to ${key} closed; ioredis reconnects it, and waiters re-check once it is back`),
        );
        this.events.lost([...current.channels]);
      });
      this.byNode.set(key, node);
    }
    return node;
  }

  private drop(key: string): void {
    const node = this.byNode.get(key);
    if (!node) return;
    this.byNode.delete(key);
    node.connection.disconnect();
  }
}
