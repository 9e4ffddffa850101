import calculateSlot from 'cluster-key-slot';
import type { ScriptName } from '../backends/scripts.js';
import { ClientClosedError } from '../errors.js';
import { LUA_SOURCES } from '../lua/scripts.generated.js';
import {
  addressOf,
  askNode,
  type Driver,
  type MasterReply,
  type NodeChanged,
  refusedWhileMigrating,
  type ScriptArg,
  type SlotOf,
  type Subscriber,
  type SubscriberEvents,
  type SubscriberOptions,
  sendable,
} from './driver.js';
import { type RespEndpoint, RespSubscriber } from './resp-subscriber.js';
import { NodeScripts, shaOf } from './script-shas.js';

/**
 * A GLIDE 2.x client (`@valkey/valkey-glide`): what `GlideClient.createClient()`
 * or `GlideClusterClient.createClient()` returns. Taken by its shape (no
 * import of GLIDE in the types), so any copy of it fits; the library sends
 * its scripts, `WAIT` and its checks with `customCommand`, and subscribes
 * to wake-ups on a client of its own, made from the options this one was
 * created with.
 */
export interface GlideCompatibleClient {
  /** Runs a GLIDE `Script`: not used by the library, part of how it tells a GLIDE client from the others. */
  invokeScript(script: never, options?: never): Promise<unknown>;
  /** Any command: the scripts (`EVALSHA`, `EVAL`), `WAIT`, the server check (`COMMAND INFO`), a Cluster's slot map (`CLUSTER SLOTS`). */
  customCommand(args: never, options?: never): Promise<unknown>;
  /** Reads pub/sub messages: present on every GLIDE client, part of how the library tells it from the others. */
  getPubSubMessage(): Promise<unknown>;
  /** Closes the client; the library never calls it on yours. */
  close(errorMessage?: string): void;
}

/** The part of GLIDE's client options the library reads: where it connects (the rest is copied to the subscriber). */
interface GlideOptions {
  readonly addresses?: readonly { readonly host?: string; readonly port?: number }[];
  readonly credentials?: { readonly username?: string; readonly password?: string; readonly iamConfig?: unknown };
  readonly addressResolver?: (host: string, port: number) => [string, number];
  readonly useTLS?: boolean;
  readonly clientName?: string;
  readonly advancedConfiguration?: {
    readonly tlsAdvancedConfiguration?: { readonly insecure?: boolean; readonly rootCertificates?: string | Buffer };
    readonly pubsubReconciliationIntervalMs?: number;
  };
  readonly [option: string]: unknown;
}

/** A message as GLIDE hands it to a subscription callback. */
interface GlideMessage {
  readonly channel: unknown;
  readonly message: unknown;
}

/** A GLIDE client as the library uses it inside. */
interface GlideApi {
  /** Protected in GLIDE's typings, true once `close()` was called. */
  readonly isClosed: boolean;
  /** Private in GLIDE's typings: the options the client was created with. */
  readonly config?: GlideOptions;
  readonly constructor: { createClient(options: GlideOptions): Promise<GlideApi> };
  customCommand(args: readonly (string | Buffer)[], options?: { route: unknown }): Promise<unknown>;
  ssubscribe?(channels: Iterable<string>, timeoutMs: number): Promise<void>;
  sunsubscribe?(channels: Iterable<string> | null, timeoutMs: number): Promise<void>;
  sunsubscribeLazy?(channels: Iterable<string> | null): Promise<void>;
  /** GLIDE 2.5 on: the subscriptions asked for, and those in force on the servers now, by channel mode. */
  getSubscriptions?(): Promise<{ readonly actualSubscriptions: Partial<Record<number, Iterable<unknown>>> }>;
  updateConnectionPassword?(password: string | null, immediateAuth?: boolean): Promise<unknown>;
  close(): void;
}

/** Whether `value` has GLIDE's client shape (`GlideClient` or `GlideClusterClient`). */
export function isGlideClient(value: object): boolean {
  const v = value as Record<string, unknown>;
  return typeof v.invokeScript === 'function' && typeof v.customCommand === 'function' && typeof v.getPubSubMessage === 'function';
}

/** Whether a GLIDE client is a `GlideClusterClient` (it alone routes scripts itself, `invokeScriptWithRoute`). */
export function isGlideCluster(value: object): boolean {
  return typeof (value as { invokeScriptWithRoute?: unknown }).invokeScriptWithRoute === 'function';
}

/**
 * GLIDE rewrites a server's error reply as "An error was signalled by the
 * server: - <Kind>: <text>"; the library reads replies by their Redis code
 * (`NOPERM`, `TRYAGAIN`, ...). Kinds not listed keep their code as the kind.
 */
const SERVER_ERROR = /^An error was signalled by the server: - (\w+): ?([\s\S]*)$/;
const CODES: Readonly<Record<string, string>> = {
  ResponseError: 'ERR',
  NoScriptError: 'NOSCRIPT',
  PermissionDenied: 'NOPERM',
  TryAgain: 'TRYAGAIN',
  ClusterDown: 'CLUSTERDOWN',
  CrossSlot: 'CROSSSLOT',
  Moved: 'MOVED',
  Ask: 'ASK',
  MasterDown: 'MASTERDOWN',
  ReadOnly: 'READONLY',
  BusyLoadingError: 'LOADING',
  ExecAbortError: 'EXECABORT',
  NotBusy: 'NOTBUSY',
};

/** A server's error reply through GLIDE, with the message the server sent (its code first). */
export class GlideReplyError extends Error {
  override readonly name = 'ReplyError';
}

function isGlideReply(error: unknown): boolean {
  return error instanceof GlideReplyError;
}

/** `error` as the library reads errors: a server reply as {@link GlideReplyError}, GLIDE's closed client as `ClientClosedError`. */
function translated(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const reply = SERVER_ERROR.exec(error.message);
  if (reply) return new GlideReplyError(`${CODES[reply[1]!] ?? reply[1]} ${reply[2]!.trimEnd()}`, { cause: error });
  if (error.name === 'ClosingError') {
    return new ClientClosedError(`the GLIDE client was closed (${error.message}); use an open client`, { cause: error });
  }
  return error;
}

/** How often a subscriber looks whether its user's client was closed (GLIDE emits no event then). */
const CHECK_MS = 1_000;
/**
 * How long a Cluster subscription may wait for GLIDE to confirm it (it says
 * no more when the server refuses), at most: less when the hub's bound is
 * shorter (`SubscriberOptions.confirmMs`, from `linkCheckMs`).
 */
const SUBSCRIBE_TIMEOUT_MS = 2_000;
/**
 * How often a Cluster subscriber compares its confirmed subscriptions with
 * those GLIDE has in force. GLIDE restores them itself after a reconnect but
 * says nothing: a release published in the gap goes unheard, so a channel
 * found missing is reported lost, and its waiters re-check once it is back.
 */
const SUBSCRIPTIONS_CHECK_MS = 100;
/**
 * How often GLIDE restores the subscriber's subscriptions after a reconnect
 * (`pubsubReconciliationIntervalMs`; GLIDE's own default, about 3 s, keeps
 * wake-ups deaf that long after every reconnect). Not shorter: GLIDE logs an
 * error for each try that fails while a master is down.
 */
const RECONCILE_MS = 500;
/** GLIDE's `PubSubChannelModes.Sharded`: the mode of the library's channels on a Cluster. */
const SHARDED = 2;
/** One master, for a command any node could answer (a replica may refuse): the master of a fixed key's slot. */
const ANY_MASTER = { route: { type: 'primarySlotKey', key: 'rwlock' } };
/** How old a Cluster's slot map may get before renewal's grouping reads it again. */
const SLOT_MAP_MAX_AGE_MS = 5_000;
const SLOTS = 16_384;

/**
 * GLIDE 2.x, `GlideClient` and `GlideClusterClient`: scripts as `EVALSHA`
 * by `customCommand`, which on a Cluster GLIDE routes by the first key and
 * follows through MOVED and ASK; `EVAL` once per node, and once more when a
 * node lost its scripts ({@link NodeScripts}). Not `invokeScript`: on
 * NOSCRIPT it sends `SCRIPT LOAD`, which the documented ACL users may not
 * run (every call then failed with NOPERM after a flush or a failover).
 */
export class GlideDriver implements Driver {
  readonly cluster: boolean;
  readonly keyPrefix = '';
  private readonly client: GlideApi;
  /** The scripts of each master, by address (from the slot map): a new master (a failover) starts with none. */
  private readonly nodes = new Map<string, NodeScripts>();
  /** The library's script calls in flight on this client, at most half of GLIDE's limit; the rest wait in order. */
  private readonly gate: CallGate;
  private slotMap: { masters: (string | undefined)[]; at: number } | undefined;
  private loadingSlots = false;
  private changed: NodeChanged = () => undefined;

  constructor(client: GlideCompatibleClient) {
    this.client = client as unknown as GlideApi;
    this.cluster = isGlideCluster(client);
    const limit = this.client.config?.inflightRequestsLimit;
    this.gate = new CallGate(Math.max(1, Math.floor((typeof limit === 'number' ? limit : GLIDE_INFLIGHT_LIMIT) / 2)));
    if (this.cluster) this.loadSlots(); // before the first renewal round groups leases by master
    // From now, not from the first wait: a rotation before any waiter would leave the subscriber on the old password.
    observePassword(this.client);
  }

  get closed(): boolean {
    return this.client.isClosed === true;
  }

  script(name: ScriptName, args: readonly ScriptArg[], lock?: SlotOf): Promise<unknown> {
    // Strings and Buffers, as GLIDE sends them (a Buffer, a fencedSet value, as its bytes).
    const command = new Array<string | Buffer>(args.length + 2);
    for (let i = 0; i < args.length; i++) command[i + 2] = sendable(args[i]!);
    let master = '';
    let slot: number | undefined;
    if (this.cluster) {
      const key = command[3] as string | undefined; // after the SHA and the key count: the first key routes the call
      slot = lock?.slot ?? (key === undefined ? undefined : calculateSlot(key));
      master = (slot !== undefined && this.masterOf(slot)) || '';
    }
    let scripts = this.nodes.get(master);
    if (scripts === undefined) {
      this.nodes.set(master, (scripts = new NodeScripts(() => this.changed())));
      this.changed(this.cluster ? master || undefined : this.addresses()[0]);
    }
    const send = (asEval: boolean) => {
      command[0] = asEval ? 'EVAL' : 'EVALSHA';
      command[1] = asEval ? LUA_SOURCES[name] : shaOf(name);
      return this.gate.run(() => resending(this.client, slot ?? -1, () => this.client.customCommand(command)));
    };
    return scripts.run(name, send, isGlideReply);
  }

  command(args: readonly string[]): Promise<unknown> {
    return (this.cluster ? this.client.customCommand(args, ANY_MASTER) : this.client.customCommand(args)).catch(rethrow);
  }

  /** One server: its reply. A Cluster: one command to every primary, whose reply names each (`{ key, value }` pairs, or a record). */
  async everyMaster(args: readonly string[]): Promise<MasterReply[]> {
    if (!this.cluster) return [await askNode(this.addresses()[0] ?? '', () => this.command(args))];
    const replies = await this.client.customCommand(args, { route: 'allPrimaries' }).catch((error: unknown) => translated(error));
    if (replies instanceof Error) return [...new Set(this.slotMap?.masters)].flatMap((node) => (node ? [{ node, error: replies }] : []));
    const pairs = Array.isArray(replies)
      ? (replies as { key: unknown; value: unknown }[]).map(({ key, value }) => [String(key), value] as const)
      : Object.entries(replies as Record<string, unknown>);
    return pairs.map(([node, reply]) => ({ node, reply }));
  }

  /** GLIDE reconnects without a word: a new master, or a node that lost its scripts, is all it shows. */
  watchNodes(changed: NodeChanged): void {
    this.changed = changed;
  }

  async waitForReplicas(slot: number, replicas: number, timeoutMs: number): Promise<number> {
    const wait = ['WAIT', String(replicas), String(timeoutMs)];
    // Routed by a key of the slot: GLIDE 2.5.2 sends a primarySlotId route as an empty key's (slot 0).
    const route = this.cluster ? { route: { type: 'primarySlotKey', key: keyOfSlot(slot) } } : undefined;
    return Number(await this.client.customCommand(wait, route).catch(rethrow));
  }

  /** On a Cluster, from `CLUSTER SLOTS` (read when the driver is made), read again in the background once 5 s old. */
  masterOf(slot: number): string | undefined {
    if (!this.cluster) return '';
    const map = this.slotMap;
    if ((map === undefined || performance.now() - map.at > SLOT_MAP_MAX_AGE_MS) && !this.loadingSlots) this.loadSlots();
    return map?.masters[slot];
  }

  addresses(): string[] {
    return (this.client.config?.addresses ?? []).map((a) => addressOf(a.host, a.port));
  }

  subscriber(events: SubscriberEvents, options: SubscriberOptions): Subscriber {
    const client = this.client;
    if (this.cluster) return new ClusterSubscriber(client, events, Math.min(SUBSCRIBE_TIMEOUT_MS, options.confirmMs));
    return new RespSubscriber(
      () => endpointOf(client),
      events,
      () => client.isClosed,
      options.handshakeMs,
    );
  }

  async publish(channel: string, message: string): Promise<number> {
    const command = ['SPUBLISH', channel, message];
    const route = this.cluster ? { route: { type: 'primarySlotKey', key: channel } } : undefined;
    return Number(await this.client.customCommand(command, route).catch(rethrow));
  }

  isReplyError(error: unknown): boolean {
    return isGlideReply(error);
  }

  notRunWhileMigrating(error: unknown): boolean {
    return refusedWhileMigrating(error);
  }

  private loadSlots(): void {
    this.loadingSlots = true;
    this.client
      .customCommand(['CLUSTER', 'SLOTS'], { route: 'randomNode' })
      .then((reply) => {
        const masters = new Array<string | undefined>(SLOTS);
        for (const range of Array.isArray(reply) ? reply : []) {
          const [from, to, master] = range as [number, number, [string, number]];
          const address = `${master[0]}:${master[1]}`;
          for (let slot = from; slot <= to; slot++) masters[slot] = address;
        }
        this.slotMap = { masters, at: performance.now() };
      })
      .catch(() => undefined) // renewal groups by slot meanwhile
      .finally(() => {
        this.loadingSlots = false;
      });
  }
}

/** A key of each slot asked for so far: `WAIT` is routed by it. */
const slotKeys = new Map<number, string>();

/** A short key in `slot` (found by trying numbers: about 16,000 hashes, once per slot). */
function keyOfSlot(slot: number): string {
  let key = slotKeys.get(slot);
  for (let n = 0; key === undefined; n++) if (calculateSlot(String(n)) === slot) slotKeys.set(slot, (key = String(n)));
  return key;
}

function rethrow(error: unknown): never {
  throw translated(error);
}

/**
 * How often one script call lost with its connection is sent again (as
 * ioredis' default `maxRetriesPerRequest`), after a pause that grows to
 * 200 ms: GLIDE fails such calls where ioredis resends them, and every
 * script is safe to run twice (hold ids). The caller's bound
 * (`redisTimeoutMs`) ends the wait.
 */
const MAX_RESENDS = 20;

/**
 * GLIDE refuses a call beyond its `inflightRequestsLimit` (1000 by default)
 * without sending it. The library keeps its own calls to half of that
 * ({@link CallGate}), so that it leaves room for the application's; a call
 * refused all the same (the application's calls took the room) waits for
 * room, up to this long in all.
 */
const MAX_WAIT_FOR_ROOM_MS = 10_000;
const GLIDE_INFLIGHT_LIMIT = 1000;

/**
 * At most `limit` calls at once; the others start in the order they came,
 * each as one in flight ends. Without it, calls past GLIDE's limit retried
 * at random, and under thousands at once (a `Promise.all` of 3,000
 * releases) one could wait past `redisTimeoutMs` while later ones went.
 */
export class CallGate {
  #inFlight = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  async run<T>(call: () => Promise<T>): Promise<T> {
    if (this.#inFlight < this.limit) this.#inFlight++;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await call();
    } finally {
      // The slot goes to the longest-waiting call, or is freed.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#inFlight--;
    }
  }
}
const NO_ROOM = /maximum inflight requests/i;

/** GLIDE refuses a call, unsent, while it makes its connection to the call's node again. */
const RECOVERING = /Connection in recovery/i;

/** Whether a failed call may be sent again: its connection was lost or is being made again, or GLIDE had no room for it. */
function lostCall(error: unknown): 'lost' | 'no-room' | undefined {
  if ((error as { name?: unknown }).name === 'ConnectionError' || RECOVERING.test((error as Error).message)) return 'lost';
  if (NO_ROOM.test((error as Error).message)) return 'no-room';
  return undefined;
}

/** A call waiting to be sent again, in the order calls were made. */
interface LostCall {
  readonly send: () => Promise<unknown>;
  resends: number;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Each client's calls that wait to be sent again, in the order they were
 * made, and the calls made while any waits, after them: they are sent
 * again in that order, all of one round at once, so none lands after a
 * call made later (an acquire after its own withdrawal would leave a hold
 * nobody owns for its lease). ioredis keeps that order by resending its
 * queue on reconnect.
 */
class Resends {
  readonly #waiting: LostCall[] = [];
  #recovering = false;

  constructor(private readonly client: GlideApi) {}

  async run(send: () => Promise<unknown>): Promise<unknown> {
    if (this.#recovering) return this.#behind(send, 0);
    let waitedMs = 0;
    for (;;) {
      try {
        return await send();
      } catch (error) {
        const why = this.client.isClosed ? undefined : lostCall(error);
        if (why === 'no-room' && waitedMs < MAX_WAIT_FOR_ROOM_MS && !this.#recovering) {
          // The application's calls took the room: no connection was lost, nothing of this one ran.
          const pause = 1 + Math.floor(Math.random() * 10); // apart, so that the waiting calls do not return together
          waitedMs += pause;
          await new Promise((resolve) => setTimeout(resolve, pause));
          continue;
        }
        if (why !== 'lost' && why !== 'no-room') throw translated(error);
        return this.#behind(send, 1);
      }
    }
  }

  /** Waits behind every call already waiting; `resends`: 1 when this call was sent once already. */
  #behind(send: () => Promise<unknown>, resends: number): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ send, resends, resolve, reject });
      if (!this.#recovering) {
        this.#recovering = true;
        void this.#recover();
      }
    });
  }

  /** Rounds of every waiting call, sent in order, after a pause that grows to 200 ms, until none waits. */
  async #recover(): Promise<void> {
    for (let round = 0; this.#waiting.length > 0; round++) {
      const pause = round === 0 ? 0 : Math.min(10 * 2 ** round, 200);
      if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
      const calls = this.#waiting.splice(0);
      const outcomes = await Promise.allSettled(
        calls.map((call) => {
          try {
            return call.send();
          } catch (error) {
            return Promise.reject(error);
          }
        }),
      );
      const again: LostCall[] = [];
      outcomes.forEach((outcome, i) => {
        const call = calls[i]!;
        if (outcome.status === 'fulfilled') return call.resolve(outcome.value);
        const lost = !this.client.isClosed && lostCall(outcome.reason) !== undefined;
        if (lost && call.resends++ < MAX_RESENDS) again.push(call);
        else call.reject(translated(outcome.reason));
      });
      // Ahead of the calls made during this round.
      this.#waiting.unshift(...again);
    }
    this.#recovering = false;
  }
}

/**
 * Each client's resends by Cluster slot (-1: one server, or a call of no
 * slot): a lock's calls all go to its slot, so their order is kept there,
 * while the calls of the other masters do not wait behind a dead one's (one
 * queue per client held every call on the healthy masters up to 4 s while
 * one master was down).
 */
const resends = new WeakMap<GlideApi, Map<number, Resends>>();

/**
 * `send()`, its errors translated, sent again while it fails with a lost
 * connection and the client is open, or while GLIDE has no room for it; in
 * the order of the client's calls of `slot` (see {@link Resends}).
 */
function resending(client: GlideApi, slot: number, send: () => Promise<unknown>): Promise<unknown> {
  let bySlot = resends.get(client);
  if (bySlot === undefined) resends.set(client, (bySlot = new Map()));
  let own = bySlot.get(slot);
  if (own === undefined) bySlot.set(slot, (own = new Resends(client)));
  return own.run(send);
}

/**
 * The password each GLIDE client was last given by `updateConnectionPassword`
 * (GLIDE keeps the one it was created with in its options): what the
 * library's own subscriber connections authenticate with.
 */
const rotated = new WeakMap<GlideApi, string | null>();
/** The clients whose `updateConnectionPassword` the library observes. */
const observed = new WeakSet<GlideApi>();

/**
 * Wraps `client.updateConnectionPassword` (on the instance, once) to note
 * each password it sets, after GLIDE accepted it; GLIDE offers no other way
 * to read the password in use.
 */
function observePassword(client: GlideApi): void {
  if (observed.has(client) || typeof client.updateConnectionPassword !== 'function') return;
  observed.add(client);
  const update = client.updateConnectionPassword;
  const wrapped = async (password: string | null, immediateAuth?: boolean): Promise<unknown> => {
    const reply = await update.call(client, password, immediateAuth);
    rotated.set(client, password);
    return reply;
  };
  Object.defineProperty(client, 'updateConnectionPassword', { value: wrapped, configurable: true, writable: true });
}

/** The credentials GLIDE uses now: its options', with the password last set by `updateConnectionPassword`. */
function credentialsOf(client: GlideApi): { username?: string; password?: string } | undefined {
  const credentials = client.config?.credentials;
  if (!rotated.has(client)) return credentials;
  const password = rotated.get(client);
  return { ...(credentials?.username !== undefined && { username: credentials.username }), ...(password ? { password } : {}) };
}

/**
 * Where a `GlideClient`'s wake-up subscriber connects now, from its options:
 * every address (through its `addressResolver`), the credentials in use,
 * name and TLS.
 */
function endpointOf(client: GlideApi): RespEndpoint {
  const options = client.config;
  const resolve = options?.addressResolver;
  const listed = options?.addresses?.length ? options.addresses : [{}];
  const addresses = listed.map((a) => {
    const host = a.host ?? 'localhost';
    const port = a.port ?? 6379;
    if (!resolve) return { host, port };
    try {
      const [h, p] = resolve(host, port);
      return typeof h === 'string' && Number.isInteger(p) ? { host: h, port: p } : { host, port }; // GLIDE falls back likewise
    } catch {
      return { host, port };
    }
  });
  const tls = options?.advancedConfiguration?.tlsAdvancedConfiguration;
  const credentials = credentialsOf(client);
  return {
    addresses,
    username: credentials?.username,
    password: credentials?.password,
    name: options?.clientName,
    tls: options?.useTLS ? { ca: tls?.rootCertificates, insecure: tls?.insecure } : undefined,
    unusable:
      options?.credentials?.iamConfig !== undefined
        ? 'the GLIDE client authenticates with IAM, which a wake-up subscriber of the library cannot do on one server; ' +
          'waiters re-check every recheckMs instead of being woken'
        : undefined,
  };
}

/**
 * A client of the library's own for wake-ups, created like the user's (the
 * same class and options: addresses, credentials, TLS), with a callback for
 * its messages. GLIDE cannot duplicate a client.
 */
function subscriberClient(client: GlideApi, events: SubscriberEvents): Promise<GlideApi> {
  const options = client.config;
  if (!options) return Promise.reject(new Error('the GLIDE client keeps no options to make a wake-up subscriber from'));
  const { pubsubSubscriptions: _theirs, ...own } = options;
  const callback = (message: GlideMessage) => events.message(String(message.channel), String(message.message));
  const credentials = own.credentials?.iamConfig === undefined ? credentialsOf(client) : own.credentials;
  // A GLIDE that reports its subscriptions (2.5 on) takes the reconciliation interval too: never slower than the user's.
  const theirs = own.advancedConfiguration?.pubsubReconciliationIntervalMs;
  const reconcile = typeof client.getSubscriptions === 'function' && {
    advancedConfiguration: { ...own.advancedConfiguration, pubsubReconciliationIntervalMs: Math.min(theirs ?? RECONCILE_MS, RECONCILE_MS) },
  };
  return client.constructor.createClient({
    ...own,
    ...(credentials !== undefined && { credentials }),
    ...reconcile,
    pubsubSubscriptions: { channelsAndPatterns: {}, callback },
  });
}

/**
 * A subscription GLIDE did not confirm within its bound (`unconfirmedMs`):
 * the server refused it (GLIDE says no more then), or its master was slow or
 * unreachable. Not a refusal to the hub: it tries a link check's again at
 * its next check.
 */
class UnconfirmedSubscriptionError extends Error {
  override readonly name = 'UnconfirmedSubscriptionError';
  constructor(
    message: string,
    readonly unconfirmedMs: number,
    cause: unknown,
  ) {
    super(message, { cause });
  }
}

/**
 * A Cluster: a `GlideClusterClient` of the library's own, whose `ssubscribe`
 * GLIDE keeps on the master of each channel's slot, moves with the slot and
 * restores after a reconnect. GLIDE tells no one of the reconnect, so the
 * subscriber watches GLIDE's subscriptions in force (GLIDE 2.5 on): a
 * confirmed channel that drops out is reported lost, and the hub subscribes
 * it again, which GLIDE confirms once it is back in force.
 */
class ClusterSubscriber implements Subscriber {
  private connection: Promise<GlideApi> | undefined;
  private readonly timer: NodeJS.Timeout;
  private readonly watcher: NodeJS.Timeout;
  /** The channels subscribed on the connection: all of them go with it when it is made again. */
  private readonly channels = new Set<string>();
  /** Those GLIDE confirmed, and has not dropped since: what the watch compares with GLIDE's subscriptions in force. */
  private readonly confirmed = new Set<string>();
  private checking = false;

  constructor(
    private readonly client: GlideApi,
    private readonly events: SubscriberEvents,
    /** How long GLIDE may take to confirm a subscription: within the hub's bound, so that GLIDE's answer comes first. */
    private readonly confirmMs: number,
  ) {
    this.timer = setInterval(() => this.client.isClosed && this.close(), CHECK_MS).unref();
    this.watcher = setInterval(() => this.checkInForce(), SUBSCRIPTIONS_CHECK_MS).unref();
  }

  async subscribe(channel: string): Promise<void> {
    this.channels.add(channel);
    try {
      const connection = await this.open();
      await connection.ssubscribe!(new Set([channel]), this.confirmMs).catch((error: unknown) => {
        if ((error as { name?: unknown }).name !== 'TimeoutError') throw translated(error);
        throw new UnconfirmedSubscriptionError(
          `GLIDE did not confirm the subscription to wake-up channel "${channel}" within ${this.confirmMs} ms; the usual ` +
            "cause is the Redis user's permission (+ssubscribe, and &<prefix>:* for the channel), else a master slow to answer or unreachable",
          this.confirmMs,
          error,
        );
      });
      if (this.channels.has(channel)) this.confirmed.add(channel);
    } catch (error) {
      this.channels.delete(channel);
      throw error;
    }
  }

  unsubscribe(channel: string): void {
    this.channels.delete(channel);
    this.confirmed.delete(channel);
    this.connection?.then((c) => c.sunsubscribeLazy!(new Set([channel]))).catch(() => undefined);
  }

  /**
   * A silent link (to one master): the whole client is closed, and the hub's
   * next subscription makes a new one. Its subscriptions to the other
   * masters go with it: they are reported lost, so that the hub subscribes
   * them again (their waiters re-check once they are back) instead of
   * finding each of those links silent in turn.
   */
  reconnect(channels: readonly string[]): void {
    const connection = this.connection;
    this.connection = undefined;
    connection?.then((c) => c.close()).catch(() => undefined);
    const lost = [...this.channels].filter((channel) => !channels.includes(channel));
    this.channels.clear();
    this.confirmed.clear();
    if (lost.length > 0) this.events.lost(lost);
  }

  /** Unsubscribes first: GLIDE logs an error when a client closes with sharded subscriptions. */
  close(): void {
    clearInterval(this.timer);
    clearInterval(this.watcher);
    this.channels.clear();
    this.confirmed.clear();
    const connection = this.connection;
    this.connection = undefined;
    connection
      ?.then(async (c) => {
        await c.sunsubscribe!(null, SUBSCRIBE_TIMEOUT_MS).catch(() => undefined);
        c.close();
      })
      .catch(() => undefined);
  }

  /** Reports the confirmed channels GLIDE no longer has in force (a reconnect under way): a release meanwhile went unheard. */
  private checkInForce(): void {
    const connection = this.connection;
    if (this.checking || !connection || this.confirmed.size === 0) return;
    this.checking = true;
    connection
      .then(async (c) => {
        if (typeof c.getSubscriptions !== 'function') return;
        // Strings, or Buffers under a client's `Decoder.Bytes`: compared as the callback reads channels.
        const inForce = new Set([...((await c.getSubscriptions()).actualSubscriptions[SHARDED] ?? [])].map(String));
        if (connection !== this.connection) return;
        const lost = [...this.confirmed].filter((channel) => !inForce.has(channel));
        for (const channel of lost) {
          this.confirmed.delete(channel);
          this.channels.delete(channel);
        }
        if (lost.length > 0) this.events.lost(lost);
      })
      .catch(() => undefined) // a client closing or closed: its close says so
      .finally(() => {
        this.checking = false;
      });
  }

  private open(): Promise<GlideApi> {
    if (this.connection) return this.connection;
    const connecting = (this.connection = subscriberClient(this.client, this.events));
    connecting.catch(() => {
      if (this.connection === connecting) this.connection = undefined;
    });
    return connecting;
  }
}
