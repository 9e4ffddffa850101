import calculateSlot from 'cluster-key-slot';
import type { ScriptName } from '../backends/scripts.js';
import { ClientClosedError } from '../errors.js';
import { LUA_SOURCES } from '../lua/scripts.generated.js';
import { addressOf, type Driver, refusedWhileMigrating, type Subscriber, type SubscriberEvents } from './driver.js';
import { type RespEndpoint, RespSubscriber } from './resp-subscriber.js';
import { shaOf } from './script-shas.js';

/**
 * A GLIDE 2.x client (`@valkey/valkey-glide`): what `GlideClient.createClient()`
 * or `GlideClusterClient.createClient()` returns. Taken by its shape (no
 * import of GLIDE in the types), so any copy of it fits; the library runs
 * its scripts with `invokeScript`, sends `WAIT` and its checks with
 * `customCommand`, and subscribes to wake-ups on a client of its own, made
 * from the options this one was created with.
 */
export interface GlideCompatibleClient {
  /** Runs a GLIDE `Script` (EVALSHA, the script loaded again on NOSCRIPT): the library's scripts. */
  invokeScript(script: never, options?: never): Promise<unknown>;
  /** Any command: `WAIT`, the server check (`COMMAND INFO`), a Cluster's slot map (`CLUSTER SLOTS`). */
  customCommand(args: never, options?: never): Promise<unknown>;
  /** Reads pub/sub messages: present on every GLIDE client, part of how the library tells it from the others. */
  getPubSubMessage(): Promise<unknown>;
  /** Closes the client; the library never calls it on yours. */
  close(errorMessage?: string): void;
}

/** The part of GLIDE's client options the library reads: where it connects (the rest is copied to the subscriber). */
interface GlideOptions {
  readonly addresses?: readonly { readonly host?: string; readonly port?: number }[];
  readonly credentials?: { readonly username?: string; readonly password?: string };
  readonly useTLS?: boolean;
  readonly clientName?: string;
  readonly advancedConfiguration?: {
    readonly tlsAdvancedConfiguration?: { readonly insecure?: boolean; readonly rootCertificates?: string | Buffer };
  };
  readonly [option: string]: unknown;
}

/** A message as GLIDE hands it to a subscription callback. */
interface GlideMessage {
  readonly channel: unknown;
  readonly message: unknown;
}

/** GLIDE's `Script`: the code kept in the client's native side until released. */
interface GlideScript {
  release(): void;
}

/** A GLIDE client as the library uses it inside. */
interface GlideApi {
  /** Protected in GLIDE's typings, true once `close()` was called. */
  readonly isClosed: boolean;
  /** Private in GLIDE's typings: the options the client was created with. */
  readonly config?: GlideOptions;
  readonly constructor: { createClient(options: GlideOptions): Promise<GlideApi> };
  invokeScript(script: GlideScript, options: { keys: string[]; args: string[] }): Promise<unknown>;
  customCommand(args: readonly string[], options?: { route: unknown }): Promise<unknown>;
  ssubscribe?(channels: Iterable<string>, timeoutMs: number): Promise<void>;
  sunsubscribe?(channels: Iterable<string> | null, timeoutMs: number): Promise<void>;
  sunsubscribeLazy?(channels: Iterable<string> | null): Promise<void>;
  close(): void;
}

/** What the driver needs from GLIDE, loaded when it serves a GLIDE client. */
interface GlideModule {
  Script: new (code: string) => GlideScript;
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
/** How long a Cluster subscription may wait for GLIDE to confirm it (it says no more when the server refuses). */
const SUBSCRIBE_TIMEOUT_MS = 2_000;
/** One master, for a command any node could answer (a replica may refuse): the master of a fixed key's slot. */
const ANY_MASTER = { route: { type: 'primarySlotKey', key: 'rwlock' } };
/** How old a Cluster's slot map may get before renewal's grouping reads it again. */
const SLOT_MAP_MAX_AGE_MS = 5_000;
const SLOTS = 16_384;

/**
 * GLIDE 2.x, `GlideClient` and `GlideClusterClient`: scripts by
 * `invokeScript` (EVALSHA, which GLIDE follows with the script's code on
 * NOSCRIPT), which on a Cluster GLIDE routes by the first key and follows
 * through MOVED and ASK; a client's first call of each script is `EVAL`.
 * GLIDE's `Script` keeps its code in native memory until released: a driver
 * keeps one per script while a `LockClient` uses it (released when the last
 * one closes); a call outside any (the fencing functions) is a plain
 * `EVALSHA`, and needs none.
 */
export class GlideDriver implements Driver {
  readonly cluster: boolean;
  readonly keyPrefix = '';
  private readonly client: GlideApi;
  private glide: GlideModule | undefined;
  private readonly loading: Promise<GlideModule>;
  private readonly scripts = new Map<ScriptName, GlideScript>();
  /** The scripts sent once already (with EVAL; a Cluster's other masters answer NOSCRIPT once, and GLIDE loads them). */
  private readonly sent = new Set<ScriptName>();
  private users = 0;
  /** The library's script calls in flight on this client, at most half of GLIDE's limit; the rest wait in order. */
  private readonly gate: CallGate;
  private slotMap: { masters: (string | undefined)[]; at: number } | undefined;
  private loadingSlots = false;

  constructor(client: GlideCompatibleClient) {
    this.client = client as unknown as GlideApi;
    this.cluster = isGlideCluster(client);
    const limit = this.client.config?.inflightRequestsLimit;
    this.gate = new CallGate(Math.max(1, Math.floor((typeof limit === 'number' ? limit : GLIDE_INFLIGHT_LIMIT) / 2)));
    // GLIDE is an optional peer: loaded here, once a GLIDE client is in use, never by other clients' paths.
    this.loading = import('@valkey/valkey-glide').then((glide) => (this.glide = glide as unknown as GlideModule));
    this.loading.catch(() => undefined);
    if (this.cluster) this.loadSlots(); // before the first renewal round groups leases by master
  }

  get closed(): boolean {
    return this.client.isClosed === true;
  }

  /** A LockClient's use of the driver's scripts; the function it returns ends it, and the last end releases them. */
  retain(): () => void {
    this.users++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.users > 0) return;
      for (const script of this.scripts.values()) script.release();
      this.scripts.clear();
    };
  }

  script(name: ScriptName, args: readonly (string | number)[]): Promise<unknown> {
    const glide = this.glide;
    if (this.users === 0 || !this.sent.has(name)) {
      // A client's first call of each script is EVAL, which loads it (GLIDE would spend an EVALSHA, a
      // NOSCRIPT and a SCRIPT LOAD); a call outside any LockClient is EVALSHA then EVAL, like node-redis'.
      const first = !this.sent.has(name);
      this.sent.add(name);
      const command = new Array<string>(args.length + 2);
      command[0] = first ? 'EVAL' : 'EVALSHA';
      command[1] = first ? LUA_SOURCES[name] : shaOf(name);
      for (let i = 0; i < args.length; i++) command[i + 2] = String(args[i]);
      return this.gate
        .run(() => resending(this.client, () => this.client.customCommand(command)))
        .catch((error: unknown) => {
          if (first || !(error instanceof GlideReplyError) || !error.message.startsWith('NOSCRIPT')) throw error;
          command[0] = 'EVAL';
          command[1] = LUA_SOURCES[name];
          return this.gate.run(() => resending(this.client, () => this.client.customCommand(command)));
        });
    }
    if (glide === undefined) return this.loading.then(() => this.script(name, args));
    const keyCount = Number(args[0]);
    const keys = new Array<string>(keyCount);
    for (let i = 0; i < keyCount; i++) keys[i] = String(args[i + 1]);
    const rest = new Array<string>(args.length - 1 - keyCount);
    for (let i = 0; i < rest.length; i++) rest[i] = String(args[i + 1 + keyCount]);
    let script = this.scripts.get(name);
    if (script === undefined) this.scripts.set(name, (script = new glide.Script(LUA_SOURCES[name])));
    const invocation = { keys, args: rest };
    return this.gate.run(() => resending(this.client, () => this.client.invokeScript(script, invocation)));
  }

  command(args: readonly string[]): Promise<unknown> {
    return (this.cluster ? this.client.customCommand(args, ANY_MASTER) : this.client.customCommand(args)).catch(rethrow);
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

  subscriber(events: SubscriberEvents): Subscriber {
    const client = this.client;
    if (this.cluster) return new ClusterSubscriber(client, events);
    return new RespSubscriber(endpointOf(client.config), events, () => client.isClosed);
  }

  isReplyError(error: unknown): boolean {
    return error instanceof GlideReplyError;
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

/**
 * `send()`, its errors translated, sent again while it fails with a lost
 * connection and the client is open, or while GLIDE has no room for it.
 */
async function resending(client: GlideApi, send: () => Promise<unknown>): Promise<unknown> {
  let resends = 0;
  let waitedMs = 0;
  for (;;) {
    let pause: number;
    try {
      return await send();
    } catch (error) {
      if (client.isClosed) throw translated(error);
      if (NO_ROOM.test((error as Error).message) && waitedMs < MAX_WAIT_FOR_ROOM_MS) {
        pause = 1 + Math.floor(Math.random() * 10); // apart, so that the waiting calls do not return together
        waitedMs += pause;
      } else if ((error as { name?: unknown }).name === 'ConnectionError' && resends < MAX_RESENDS) {
        pause = resends === 0 ? 0 : Math.min(10 * 2 ** resends, 200);
        resends++;
      } else throw translated(error);
    }
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

/** Where a `GlideClient`'s wake-up subscriber connects, from its options: its first address, credentials, name and TLS. */
function endpointOf(options: GlideOptions | undefined): RespEndpoint {
  const address = options?.addresses?.[0];
  const tls = options?.advancedConfiguration?.tlsAdvancedConfiguration;
  return {
    host: address?.host ?? 'localhost',
    port: address?.port ?? 6379,
    username: options?.credentials?.username,
    password: options?.credentials?.password,
    name: options?.clientName,
    tls: options?.useTLS ? { ca: tls?.rootCertificates, insecure: tls?.insecure } : undefined,
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
  return client.constructor.createClient({ ...own, pubsubSubscriptions: { channelsAndPatterns: {}, callback } });
}

/**
 * A Cluster: a `GlideClusterClient` of the library's own, whose `ssubscribe`
 * GLIDE keeps on the master of each channel's slot, moves with the slot and
 * restores after a reconnect.
 */
class ClusterSubscriber implements Subscriber {
  private connection: Promise<GlideApi> | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly client: GlideApi,
    private readonly events: SubscriberEvents,
  ) {
    this.timer = setInterval(() => this.client.isClosed && this.close(), CHECK_MS).unref();
  }

  async subscribe(channel: string): Promise<void> {
    const connection = await this.open();
    await connection.ssubscribe!(new Set([channel]), SUBSCRIBE_TIMEOUT_MS).catch((error: unknown) => {
      if ((error as { name?: unknown }).name !== 'TimeoutError') throw translated(error);
      throw new Error(
        `GLIDE did not confirm the subscription to wake-up channel "${channel}" within ${SUBSCRIBE_TIMEOUT_MS} ms; the usual ` +
          "cause is the Redis user's permission (+ssubscribe, and &<prefix>:* for the channel), else an unreachable master",
        { cause: error },
      );
    });
  }

  unsubscribe(channel: string): void {
    this.connection?.then((c) => c.sunsubscribeLazy!(new Set([channel]))).catch(() => undefined);
  }

  /** Unsubscribes first: GLIDE logs an error when a client closes with sharded subscriptions. */
  close(): void {
    clearInterval(this.timer);
    const connection = this.connection;
    this.connection = undefined;
    connection
      ?.then(async (c) => {
        await c.sunsubscribe!(null, SUBSCRIBE_TIMEOUT_MS).catch(() => undefined);
        c.close();
      })
      .catch(() => undefined);
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
