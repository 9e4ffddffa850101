import type { ScriptName } from '../backends/scripts.js';

/**
 * One argument of a script call as a driver sends it: a number goes as its
 * decimal string, a Buffer (a `fencedSet` value) as its bytes.
 */
export type ScriptArg = string | number | Buffer;

/** `arg` as a client library that sends strings and Buffers only takes it: a Buffer as it is, the rest as `String()` of it. */
export const sendable = (arg: ScriptArg): string | Buffer => (typeof arg === 'string' || Buffer.isBuffer(arg) ? arg : String(arg));

/**
 * What the library needs from a Redis client, and all it uses of one: the
 * core and the backends see a client only through this. One adapter per
 * client library (`ioredis.ts`: ioredis 5 and 6, iovalkey; `node-redis.ts`:
 * node-redis 5 and 6; `glide.ts`: GLIDE 2.x), chosen once per client by {@link driverFor} (`index.ts`).
 */
export interface Driver {
  /** The client has several masters (a Cluster): calls are routed by slot, and may meet a slot migration. */
  readonly cluster: boolean;
  /** True once the user's client was closed (node-redis: also before `connect()`); the library refuses to use it. */
  readonly closed: boolean;
  /**
   * The prefix the client adds to the keys of its commands (ioredis'
   * `keyPrefix`), or '' for none. Keys the library passes as arguments
   * would not get it, so `LockClient` refuses such a client; the fencing
   * functions, whose keys are all KEYS, take it.
   */
  readonly keyPrefix: string;
  /**
   * Runs library script `name` with `args` as `EVALSHA` takes them after the
   * SHA (the key count, the keys, the arguments), on the master that owns the
   * keys; `EVAL` once per node, and once when it answers `NOSCRIPT`
   * (`NodeScripts`, script-shas.ts). Redirections are followed
   * as the client library does; what is left is classified by
   * {@link notRunWhileMigrating}. The hot path: one `EVALSHA`, no more.
   * `lock`, the lock the keys are of, names the connection on a Cluster (read
   * only there: hashing its slot costs), so that a driver may join the
   * writes of one tick on it.
   */
  script(name: ScriptName, args: readonly ScriptArg[], lock?: SlotOf): Promise<unknown>;
  /** Any command, on any one node: the server check (`COMMAND INFO`). */
  command(args: readonly string[]): Promise<unknown>;
  /**
   * A command on every master (one server: the server), each reply with the
   * master's address: the server check's `INFO memory`. A master that failed
   * gives its error; none is left out for it.
   */
  everyMaster(args: readonly string[]): Promise<MasterReply[]>;
  /**
   * Tells `changed` when a node may now be another server than the one
   * {@link everyMaster} last asked, or a master it did not ask: with the
   * address of a master the client sends its first script to, and without
   * one after a reconnect the client library reports, or when a node lost
   * the library's scripts (a restart, a failover, a promoted replica). Set
   * once per driver, by the server check, which reads the masters' memory
   * policy again then.
   */
  watchNodes(changed: NodeChanged): void;
  /**
   * `SPUBLISH channel message` on the master of the channel's slot; resolves
   * with the number of subscribers the server delivered it to. The wake-up
   * hub's health check: it publishes to a channel of its own and waits for
   * the echo on its subscriber connection.
   */
  publish(channel: string, message: string): Promise<number>;
  /**
   * `WAIT replicas timeoutMs` on the connection that runs the commands of
   * `slot`'s master (`WAIT` counts the writes of the connection it is sent
   * on); resolves with the replicas that acknowledged.
   */
  waitForReplicas(slot: number, replicas: number, timeoutMs: number): Promise<number>;
  /**
   * The master that serves `slot` as far as the client knows (its address),
   * or undefined before the slot map is loaded: renewal sends one call per
   * master. The same for every slot on one server.
   */
  masterOf(slot: number): string | undefined;
  /** Where the client connects (a Cluster: its startup nodes), loopback names alike: redlock's check for distinct servers. */
  addresses(): string[];
  /**
   * Why the client has no connection to Redis now, as far as it can be read
   * without a call (e.g. "connect ECONNREFUSED 127.0.0.1:6379"); undefined
   * when it is connected or cannot tell. Read when a call goes unanswered,
   * so that its error says what happened.
   */
  connectionTrouble?(): string | undefined;
  /**
   * A subscriber for wake-up messages on sharded channels, on connections
   * of its own (one per server; on a Cluster one per master with channels),
   * opened on the first subscription.
   */
  subscriber(events: SubscriberEvents, options: SubscriberOptions): Subscriber;
  /** The server answered `error` with an error reply (it was reached, and refused), not a failure to reach it. */
  isReplyError(error: unknown): boolean;
  /** `error` proves the script did not run because its Cluster slot is migrating: it may be sent again. */
  notRunWhileMigrating(error: unknown): boolean;
}

/** One master's answer to {@link Driver.everyMaster}: its reply, or its error. */
export type MasterReply = { readonly node: string; readonly reply: unknown } | { readonly node: string; readonly error: unknown };

/** A command on one node, settled as {@link Driver.everyMaster} reports it: never rejects. */
export function askNode(node: string, send: () => Promise<unknown>): Promise<MasterReply> {
  return send().then(
    (reply) => ({ node, reply }),
    (error: unknown) => ({ node, error }),
  );
}

/** See {@link Driver.watchNodes}: `node`, a master now in use; none, any node may have changed. */
export type NodeChanged = (node?: string) => void;

/** Whatever knows the Cluster slot of a script's keys (a lock's keys; the slot is hashed on first read). */
export interface SlotOf {
  readonly slot: number;
}

/** What a {@link Subscriber} reports. */
export interface SubscriberEvents {
  /** A message on a subscribed channel. */
  message(channel: string, message: string): void;
  /** A subscriber connection erred (the client library reconnects). */
  error(error: Error): void;
  /**
   * Subscriptions that ended, or may have, without being asked to (a slot
   * moved, a connection closed or gave up): the hub wakes their waiters to
   * re-check and subscribes them again.
   */
  lost(channels: readonly string[]): void;
}

/** How a {@link Subscriber}'s connections are bounded: from the LockClient's `linkCheckMs` (`linkBounds`, wakeups.ts). */
export interface SubscriberOptions {
  /**
   * How long a connection of the library's own may take to connect and
   * authenticate, per address, before it is dropped and the next one tried
   * (GLIDE on one server: `RespSubscriber`). ioredis and node-redis make
   * their subscriber connections themselves; there the hub's subscribe
   * bound drops a connection stuck in its handshake.
   */
  readonly handshakeMs: number;
  /**
   * The longest a client library that bounds a subscription's confirmation
   * itself may be given for it (GLIDE Cluster's `ssubscribe`, else 2 s):
   * under the hub's subscribe bound, so that the library's answer (with its
   * likely cause) comes first, on the connection already made. Were the
   * hub's bound first, it would make the whole connection again on each try.
   */
  readonly confirmMs: number;
}

/** Where one client's wake-up subscriptions are made (`SSUBSCRIBE`). */
export interface Subscriber {
  /** Resolves once the server confirmed the subscription. */
  subscribe(channel: string): Promise<void>;
  unsubscribe(channel: string): void;
  /**
   * The connection(s) carrying `channels` stopped delivering (the hub's
   * health check heard no echo) or did not answer: drop them, so that the
   * next subscription opens a new connection. The hub has reported that and
   * subscribes `channels` again itself, so they are not reported again
   * (neither `error` nor `lost`); others that go with them (GLIDE's Cluster
   * subscriber is one client, a subscription still in flight) are reported
   * by `lost`.
   */
  reconnect(channels: readonly string[]): void;
  /** Ends every subscription and closes the connections it opened. */
  close(): void;
}

/** A client that says when it ended (ioredis and node-redis both emit `end`). */
export interface EndEmitter {
  once(event: 'end', listener: () => void): unknown;
  off(event: 'end', listener: () => void): unknown;
}

/**
 * `subscriber`, closed when the user's `client` ends too: its connections are
 * the library's, made from that client, and would otherwise reconnect for
 * ever to servers that are gone (and keep the process alive) when `close()`
 * was skipped. Closing it is done once, and stops listening to `client`, so
 * a long-lived client keeps no listener (nor a second close) per LockClient.
 */
export function closedWithClient(client: EndEmitter, subscriber: Subscriber): Subscriber {
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    client.off('end', close);
    subscriber.close();
  };
  client.once('end', close);
  return {
    subscribe: (channel) => subscriber.subscribe(channel),
    unsubscribe: (channel) => subscriber.unsubscribe(channel),
    reconnect: (channels) => subscriber.reconnect(channels),
    close,
  };
}

/** Where a client connects, normalised so that loopback names compare equal. */
export function addressOf(host: string | undefined, port: number | undefined): string {
  const loopback = host === undefined || host === 'localhost' || host === '127.0.0.1' || host === '::1';
  return `${loopback ? '127.0.0.1' : host.toLowerCase()}:${port ?? 6379}`;
}

/**
 * A reply that proves a script did not run: its slot is being migrated
 * (TRYAGAIN), or the client ran out of redirections following one (ioredis
 * says "Too many Cluster redirections"; node-redis passes on the last ASK or
 * MOVED).
 */
const NOT_RUN_WHILE_MIGRATING =
  /^(?:TRYAGAIN|ASK |MOVED |Too many Cluster redirections\. Last error: (?:ReplyError: )?(?:TRYAGAIN|ASK|MOVED) )/;

/** Whether `error` says the script was not run because its slot is migrating (either client library). */
export function refusedWhileMigrating(error: unknown): boolean {
  return NOT_RUN_WHILE_MIGRATING.test(error instanceof Error ? error.message : String(error));
}

/** The error replies of a server that is there but cannot answer now: a script past its time, a dataset loading, a Cluster in change. */
const NOT_NOW = /^(?:BUSY|LOADING|TRYAGAIN|CLUSTERDOWN|MASTERDOWN)\b/;

/**
 * Whether `error` is a server's refusal of a command for good (an ACL
 * without it, a command renamed away or unknown to a proxy), not a failure
 * to reach it or a reply that it cannot answer now ({@link NOT_NOW}): what
 * the server check and the eviction read take for "cannot tell".
 */
export function refusedForGood(client: Pick<Driver, 'isReplyError'>, error: unknown): boolean {
  return client.isReplyError(error) && !NOT_NOW.test(error instanceof Error ? error.message : String(error));
}
