import { randomBytes } from 'node:crypto';
import calculateSlot from 'cluster-key-slot';
import type { HandedGrant } from './backends/backend.js';
import type { Driver, Subscriber, SubscriberEvents } from './clients/driver.js';
import { handedChannel } from './keys/keys.js';
import { CLIENT_DEFAULTS, MAX_DURATION_MS } from './options.js';

/** How long a channel stays subscribed after its last waiter left, so that a busy lock is not resubscribed on every wait. */
const LINGER_MS = 5_000;
/**
 * Pauses before subscribing again where a lost subscription's slot lives now,
 * longer after each failure (its waiters re-check meanwhile).
 */
const RESUBSCRIBE_MS = [100, 250, 500, 1_000, 2_000, 5_000];
/**
 * The bounds of a hub's subscriber links, all derived from its link check
 * period (the LockClient's `linkCheckMs`, 2.5 s by default).
 *
 * - `checkMs`: how often the hub checks each subscriber link (one per client
 *   on one server; on a Cluster one per master with subscribed channels): it
 *   publishes to a channel of its own in the slot of one of that link's
 *   channels, and an echo that has not come back by the next check means the
 *   link is lost (silent: an idle timeout in a NAT or load balancer, a host
 *   gone), with every channel on it. One `SPUBLISH` per link, however many
 *   channels it carries. A link that goes silent is noticed within two of
 *   these.
 * - `echoSubscribeMs` (2×): how long the server may take to confirm an echo
 *   channel's subscription; a link that does not is lost, as when an echo
 *   does not come back.
 * - `subscribeMs` (4×, 10 s by default): how long the server may take to
 *   confirm a subscription (a connection, its handshake and `SSUBSCRIBE`).
 * - `handshakeMs` (2×): how long a subscriber connection of the library's
 *   own may take to connect and authenticate (`Driver.subscriber`).
 * - `confirmMs` (3×): the longest a client library that bounds a
 *   subscription's confirmation itself may be given (GLIDE Cluster, whose
 *   own 2 s apply while shorter): under `subscribeMs`, so that its answer
 *   comes first (`Driver.subscriber`).
 *
 * Each is at most the longest a Node timer waits.
 */
export interface LinkBounds {
  readonly checkMs: number;
  readonly echoSubscribeMs: number;
  readonly subscribeMs: number;
  readonly handshakeMs: number;
  readonly confirmMs: number;
}

/** The {@link LinkBounds} of link check period `checkMs` (a valid `linkCheckMs`). */
export function linkBounds(checkMs: number): LinkBounds {
  const times = (n: number) => Math.min(n * checkMs, MAX_DURATION_MS);
  return { checkMs, echoSubscribeMs: times(2), subscribeMs: times(4), handshakeMs: times(2), confirmMs: times(3) };
}

/**
 * One waiter's view of a lock's wake-up channel. `woken` turns true on every
 * release message meant for it; the waiter clears it before each try, so a
 * release that lands between a try and the following sleep ends that sleep
 * at once.
 */
export class Watch {
  woken = false;
  /**
   * The grant each node's release handed this writer (by the node's index in
   * the hub; one node on a single server or Cluster), since the waiter last
   * cleared it before a try.
   */
  readonly handed: (HandedGrant | undefined)[] = [];
  private wake: (() => void) | undefined;

  constructor(
    private readonly leave: (watch: Watch) => void,
    /** A waiting writer's owner token: it ignores messages that name another writer. */
    private readonly writer?: string,
  ) {}

  /**
   * A message from node `node` is the releaser's mode, or `mode:<token>` when
   * only the writer with that token may get in next (lua/includes/state.lua,
   * wakeMessage), or `handed <holdId> <queuedUntil> <fence> <token>` when a
   * release granted the lock to that writer (lua/includes/release-body.lua,
   * handOver); no message (the hub closing) always wakes.
   */
  notify(message?: string, node = 0): void {
    if (message !== undefined && this.writer !== undefined) {
      if (message.startsWith(HANDED)) {
        const handed = parseHanded(message);
        if (handed?.token !== this.writer) return;
        this.handed[node] = handed.grant;
      } else {
        const colon = message.indexOf(':');
        if (colon >= 0 && message.slice(colon + 1) !== this.writer) return;
      }
    }
    this.woken = true;
    this.wake?.();
  }

  /** Sleeps until a wake-up, `ms`, or an abort of `signal`, whichever comes first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (this.woken || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      this.wake = done;
    });
  }

  close(): void {
    this.leave(this);
  }
}

const HANDED = 'handed ';

/** A watch of a closed hub: woken at once, on no channel (its waiter finds the client closed). */
function closedWatch(): Watch {
  const watch = new Watch(() => undefined);
  watch.notify();
  return watch;
}

/** A `handed` message's grant and the token of the writer it names (the rest of the message: tokens may hold spaces). */
function parseHanded(message: string): { grant: HandedGrant; token: string } | undefined {
  const parts: string[] = [];
  let at = HANDED.length;
  for (let i = 0; i < 3; i++) {
    const space = message.indexOf(' ', at);
    if (space < 0) return undefined;
    parts.push(message.slice(at, space));
    at = space + 1;
  }
  const [holdId, queuedUntil, fence] = parts as [string, string, string];
  return { grant: { holdId, queuedUntil: Number(queuedUntil), fence: Number(fence) }, token: message.slice(at) };
}

/** What a {@link WakeupHub} reports, for the LockClient's stats and events. */
export interface WakeupObserver {
  /** A wake-up message arrived. */
  message(): void;
  /** A waiter starts without a confirmed subscription: it re-checks every recheckMs until one comes through. */
  unconfirmed(): void;
  /** A subscriber connection erred, or subscribing failed. */
  error(error: Error): void;
}

/**
 * Shares one subscriber connection (on a Cluster, one per master whose locks
 * have waiters) among every waiter of one LockClient, and fans each release
 * message out to the waiters of that lock. In `redlock` mode it has one
 * subscriber per node, and a release on any node wakes.
 */
export class WakeupHub {
  private readonly clients: readonly Driver[];
  private readonly subscribers: (Subscriber | undefined)[];
  private readonly watchers = new Map<string, Set<Watch>>();
  /** Per channel, the subscription on each client; undefined where it is not (yet) made. */
  private readonly subscribed = new Map<string, (Promise<void> | undefined)[]>();
  /** Per channel, the subscriptions the server confirmed and that were not lost since. */
  private readonly confirmed = new Map<string, Set<number>>();
  private readonly lingering = new Map<string, NodeJS.Timeout>();
  /** This hub's id: it names the channels of its echoes. */
  private readonly id = randomBytes(6).toString('base64url');
  /** Echo channels made so far: each gets a name of its own (one being dropped is never the one being made). */
  private echoSerial = 0;
  /**
   * The confirmed subscriptions of each subscriber link, by client and node:
   * the master their slot maps to on a Cluster, '' on one server. One echo
   * checks them all.
   */
  private readonly links = new Map<string, Link>();
  /** The node each confirmed subscription is counted on, by client and channel. */
  private readonly homes = new Map<string, string>();
  /** Each channel's Cluster slot, hashed once. */
  private readonly slots = new Map<string, number>();
  /** The echo check of each link, by client and node. */
  private readonly echoes = new Map<string, Echo>();
  private echoTimer: NodeJS.Timeout | undefined;
  /** Failed subscriptions in a row, by client and channel: the pause before the next. */
  private readonly failures = new Map<string, number>();
  /** Subscriptions lost and not yet back, by client and channel: their waiters re-check once when they are. */
  private readonly restoring = new Set<string>();
  /** Clients on which no subscriber can be made (said once): their waiters re-check every recheckMs. */
  private readonly unusable = new Set<number>();
  /** Clients whose server refused the echo (said once): their links are not checked. */
  private readonly echoRefused = new Set<number>();
  /** Links whose echo subscription failed short of a refusal, said once until one is confirmed: each check tries again. */
  private readonly echoFailing = new Set<string>();
  private closed = false;
  private readonly bounds: LinkBounds;

  constructor(
    clients: readonly Driver[],
    private readonly observer?: WakeupObserver,
    /**
     * The LockClient's id (it starts each of its hold ids) when its backend's
     * releases hand a freed lock to a waiting writer (`LockBackend.handsOver`):
     * it names the client's own channel of each lock, which its waiting
     * writers watch too. Undefined: releases do not hand over.
     */
    private readonly handedTo?: string,
    /** How often each subscriber link is checked by its echo (`linkCheckMs`): every bound of the links derives from it ({@link LinkBounds}). */
    linkCheckMs: number = CLIENT_DEFAULTS.linkCheckMs,
  ) {
    this.bounds = linkBounds(linkCheckMs);
    this.clients = [...clients];
    this.subscribers = this.clients.map(() => undefined);
  }

  /**
   * Starts watching `channel`; resolves once the subscription is confirmed, or
   * after `confirmWithinMs` at the latest (the waiter then relies on its
   * re-checks until the subscription comes through). A waiting writer passes
   * its owner token, and is then not woken by releases that name another
   * writer as next; where releases hand over it also watches this client's
   * own channel of the lock, on which a release hands it the lock (so only this
   * client hears that message). In `redlock` mode each node names its own
   * next writer (their queues have one order, but a writer's try may not have
   * reached every node yet), so a release wakes at most one writer per node.
   */
  async watch(channel: string, confirmWithinMs: number, writer?: string): Promise<Watch> {
    if (this.closed) return closedWatch(); // close() ran meanwhile (a listener of the waiter's refused try): nothing is subscribed
    const own = this.ownChannel(channel, writer);
    const watch = this.register(channel, writer, own);
    // With several nodes a majority suffices: a holder holds a majority, so its release reaches one of them.
    const needed = Math.floor(this.clients.length / 2) + 1;
    const confirming = [confirmations(this.subscriptions(channel), needed)];
    if (own !== undefined) confirming.push(confirmations(this.subscriptions(own), needed));
    let timer: NodeJS.Timeout | undefined;
    const confirmed = await Promise.race([
      Promise.all(confirming).then((each) => each.every(Boolean)),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), confirmWithinMs))),
    ]);
    clearTimeout(timer);
    if (!confirmed) this.observer?.unconfirmed();
    return watch;
  }

  /**
   * A watch on `channel` (and, for a writer where releases hand over, on this
   * client's own channel of the lock) at once when its subscriptions are already confirmed on
   * every client (the lock has waiters, or had some in the last 5 s), else
   * undefined. Made before a try, it hears every release that runs after that
   * try, so a refused try needs no second one.
   */
  watchIfSubscribed(channel: string, writer?: string): Watch | undefined {
    if (!this.confirmedEverywhere(channel)) return undefined;
    const own = this.ownChannel(channel, writer);
    if (own !== undefined && !this.confirmedEverywhere(own)) return undefined;
    return this.register(channel, writer, own);
  }

  /** A waiting writer's channel for the releases that hand it the lock, when they do. */
  private ownChannel(channel: string, writer: string | undefined): string | undefined {
    return this.handedTo !== undefined && writer !== undefined ? handedChannel(channel, this.handedTo) : undefined;
  }

  private confirmedEverywhere(channel: string): boolean {
    return this.confirmed.get(channel)?.size === this.clients.length;
  }

  /** The subscription of `channel` on every client, made where it is not. */
  private subscriptions(channel: string): Promise<void>[] {
    let made = this.subscribed.get(channel);
    if (!made) this.subscribed.set(channel, (made = this.clients.map(() => undefined)));
    return made.map((subscription, i) => subscription ?? this.subscribe(channel, i));
  }

  private register(channel: string, writer: string | undefined, own: string | undefined): Watch {
    const watch = new Watch((w) => {
      this.unwatch(channel, w);
      if (own !== undefined) this.unwatch(own, w);
    }, writer);
    this.add(channel, watch);
    if (own !== undefined) this.add(own, watch);
    return watch;
  }

  private add(channel: string, watch: Watch): void {
    let set = this.watchers.get(channel);
    if (!set) this.watchers.set(channel, (set = new Set()));
    set.add(watch);
    clearTimeout(this.lingering.get(channel));
    this.lingering.delete(channel);
  }

  /** Stops every subscription and closes the subscriber connection(s). */
  close(): void {
    this.closed = true;
    clearInterval(this.echoTimer);
    this.echoTimer = undefined;
    this.echoes.clear();
    this.links.clear();
    this.homes.clear();
    this.slots.clear();
    this.restoring.clear();
    this.failures.clear();
    this.echoFailing.clear();
    for (const timer of this.lingering.values()) clearTimeout(timer);
    this.lingering.clear();
    this.subscribed.clear();
    this.confirmed.clear();
    for (const set of this.watchers.values()) for (const w of set) w.notify();
    this.watchers.clear();
    this.subscribers.forEach((sub, i) => {
      sub?.close();
      this.subscribers[i] = undefined;
    });
  }

  /**
   * Subscribes `channel` on client `i`, within {@link LinkBounds.subscribeMs}; a
   * failure is reported, and tried again after a pause while the channel has
   * waiters. Once confirmed, its link is checked by that link's echo; a subscription
   * that was lost wakes its waiters to re-check once when it is back (a
   * release in the gap went unheard).
   */
  private subscribe(channel: string, i: number): Promise<void> {
    const list = this.subscribed.get(channel)!;
    const key = keyOf(i, channel);
    if (this.closed) return Promise.reject(new Error('the wake-up hub was closed'));
    if (this.unusable.has(i)) return Promise.reject(new Error('no wake-up subscriber can be made on this client'));
    const { subscribeMs } = this.bounds;
    const subscribing: Promise<void> = bounded(this.connection(i).subscribe(channel), subscribeMs, () => {
      this.subscribers[i]?.reconnect([channel]); // a connection that does not answer: made again on the next try
      return new Error(
        `the server did not confirm the wake-up subscription to "${channel}" within ${subscribeMs} ms; waiters re-check until it does`,
      );
    })
      .then(() => {
        // Not if lost since, nor if its last waiter's linger ended meanwhile (it was unsubscribed), nor once
        // the hub closed: no subscriber, echo or timer is made again then.
        if (this.closed || list[i] !== subscribing || this.subscribed.get(channel) !== list) return;
        let on = this.confirmed.get(channel);
        if (!on) this.confirmed.set(channel, (on = new Set()));
        on.add(i);
        this.failures.delete(key);
        this.join(i, channel);
        if (this.restoring.delete(key)) for (const w of this.watchers.get(channel) ?? []) w.notify();
      })
      .catch((error: unknown) => {
        if (list[i] === subscribing) list[i] = undefined;
        if (this.closed) throw error;
        if ((error as { permanent?: unknown }).permanent === true) {
          if (!this.unusable.has(i)) this.observer?.error(error as Error); // said once: this client never subscribes
          this.unusable.add(i);
          throw error;
        }
        this.observer?.error(error as Error);
        if (list[i] === undefined && this.watchers.has(channel)) this.resubscribeLater(channel, i);
        throw error;
      });
    list[i] = subscribing;
    return subscribing;
  }

  /** Subscribes `channel` on client `i` again after a pause that grows with its failures, if it still has waiters. */
  private resubscribeLater(channel: string, i: number): void {
    if (this.closed) return;
    const key = keyOf(i, channel);
    const failures = this.failures.get(key) ?? 0;
    this.failures.set(key, failures + 1);
    // After the client's slot map is refreshed; a subscription refused again comes back here.
    setTimeout(
      () => {
        const list = this.subscribed.get(channel);
        if (!this.closed && list && list[i] === undefined && this.watchers.has(channel)) this.subscribe(channel, i).catch(() => undefined);
      },
      RESUBSCRIBE_MS[Math.min(failures, RESUBSCRIBE_MS.length - 1)],
    ).unref();
  }

  /**
   * The subscriptions of `channels` on client `i` were lost, or may have been
   * (their slot moved, the connection closed, gave up or went silent):
   * forget them, and subscribe again where they live now; their waiters
   * re-check once they are back (a release may have gone unheard), and with
   * `wake` at once too: a link that went silent may have lost releases for
   * seconds already, while a connection that closed was reported as it did
   * (waking waiters then would only send tries to a server that may be down).
   */
  private lost(i: number, channels: readonly string[], wake: boolean): void {
    if (this.closed) return;
    for (const channel of channels) {
      const echo = this.echoOf(i, channel);
      if (echo !== undefined) {
        // An echo channel: its link's next check makes a new one.
        if (echo) this.stopEcho(keyOf(i, echo.node));
        continue;
      }
      const list = this.subscribed.get(channel);
      if (list) list[i] = undefined;
      this.confirmed.get(channel)?.delete(i);
      this.leave(i, channel);
      const watchers = this.watchers.get(channel);
      if (!watchers) continue;
      this.restoring.add(keyOf(i, channel));
      if (wake) for (const w of watchers) w.notify();
      this.resubscribeLater(channel, i);
    }
  }

  /** The node whose link carries `channel` on client `i`: its slot's master on a Cluster (undefined while unknown), else ''. */
  private nodeOf(i: number, channel: string): string | undefined {
    const client = this.clients[i]!;
    if (!client.cluster) return '';
    let slot = this.slots.get(channel);
    if (slot === undefined) this.slots.set(channel, (slot = calculateSlot(channel)));
    return client.masterOf(slot);
  }

  /**
   * Counts `channel`'s confirmed subscription on client `i` on its link (a
   * slot whose master is not known yet: on a link of that slot's own), and
   * starts that link's echo check if it has none.
   */
  private join(i: number, channel: string): void {
    const node = this.nodeOf(i, channel) ?? `${UNKNOWN_MASTER}${this.slots.get(channel)}`;
    const home = keyOf(i, channel);
    if (this.homes.get(home) === node) return;
    this.leave(i, channel);
    this.homes.set(home, node);
    const key = keyOf(i, node);
    let link = this.links.get(key);
    if (!link) this.links.set(key, (link = { i, node, channels: new Set() }));
    link.channels.add(channel);
    if (!this.echoes.has(key)) this.startEcho(link);
  }

  /** `channel`'s subscription on client `i` is no longer confirmed: a link left with none drops its echo. */
  private leave(i: number, channel: string): void {
    const home = keyOf(i, channel);
    const node = this.homes.get(home);
    if (node === undefined) return;
    this.homes.delete(home);
    const key = keyOf(i, node);
    const link = this.links.get(key);
    if (!link?.channels.delete(channel) || link.channels.size > 0) return;
    this.links.delete(key);
    this.echoFailing.delete(key);
    this.stopEcho(key);
  }

  /**
   * The echo check of `link`: a channel of the hub's own in the slot of one
   * of its channels (so on the same connection, and allowed by the same
   * ACL channel patterns), subscribed beside them.
   */
  private startEcho(link: Link): void {
    const { i, node } = link;
    const key = keyOf(i, node);
    if (this.closed) return;
    const anchor = link.channels.values().next().value as string;
    const channel = echoChannel(anchor, `${this.id}.${++this.echoSerial}`);
    const slot = this.clients[i]!.cluster ? calculateSlot(channel) : 0;
    const echo: Echo = { node, channel, slot, on: false, seq: 0, sentAt: undefined, published: false };
    this.echoes.set(key, echo);
    const { echoSubscribeMs, checkMs } = this.bounds;
    const timedOut = new Error(
      `the server did not confirm the wake-up link check's subscription within ${echoSubscribeMs} ms: the connection ` +
        'is made again, and waiters re-check until it is back',
    );
    bounded(this.connection(i).subscribe(echo.channel), echoSubscribeMs, () => timedOut)
      .then(() => {
        echo.on = true;
        this.echoFailing.delete(key);
      })
      .catch((error: unknown) => {
        if (this.echoes.get(key) !== echo) return;
        if (error === timedOut) {
          // The link went silent before the check could start: as when an echo does not come back.
          this.observer?.error(timedOut);
          const channels = [...(this.links.get(key)?.channels ?? [])];
          this.subscribers[i]?.reconnect([...channels, echo.channel]);
          this.lost(i, channels, true);
          this.stopEcho(key);
        } else if (NOPERM.test((error as Error).message)) {
          // Refused by the server's ACL: not tried again, and said once.
          if (!this.echoRefused.has(i)) this.observer?.error(error as Error);
          this.echoRefused.add(i);
        } else {
          // Not confirmed in the client library's own bound (a master slow to answer) or its connection failed:
          // not a refusal. The next check makes a new one; said once until one is confirmed.
          this.stopEcho(key);
          if (this.echoFailing.has(key)) return;
          this.echoFailing.add(key);
          const ms = (error as { unconfirmedMs?: unknown }).unconfirmedMs;
          const what =
            typeof ms === 'number'
              ? `was not confirmed within ${ms} ms (a master slow to answer, or unreachable)`
              : `failed (${(error as Error).message})`;
          this.observer?.error(
            new Error(
              `the wake-up link check's subscription ${what}: it is tried again at the next check, every ${checkMs} ms, ` +
                'and a link that goes silent meanwhile is found once it is confirmed',
              { cause: error },
            ),
          );
        }
      });
    this.echoTimer ??= setInterval(() => this.checkEchoes(), checkMs).unref();
  }

  private stopEcho(key: string): void {
    const echo = this.echoes.get(key);
    if (!echo) return;
    this.echoes.delete(key);
    this.subscribers[Number(key.slice(0, key.indexOf('\n')))]?.unsubscribe(echo.channel);
  }

  /**
   * On a Cluster, moves each confirmed subscription whose slot maps to
   * another master now: where the client library moved it itself (GLIDE,
   * node-redis), a release on the new master before it got there went
   * unheard, so it is taken as lost (its waiters re-check now, and once more
   * when it is confirmed there). A subscription counted by its slot while
   * no master was known is counted on that master's link. An echo whose own
   * slot now maps to another master than its link's is made again there.
   */
  private rehome(): void {
    if (!this.clients.some((client) => client.cluster)) return;
    for (const [home, node] of [...this.homes]) {
      const at = home.indexOf('\n');
      const i = Number(home.slice(0, at));
      const channel = home.slice(at + 1);
      const now = this.nodeOf(i, channel);
      if (now === undefined || now === node) continue;
      if (node.startsWith(UNKNOWN_MASTER)) this.join(i, channel);
      else this.lost(i, [channel], true);
    }
    for (const [key, echo] of [...this.echoes]) {
      const i = Number(key.slice(0, key.indexOf('\n')));
      const client = this.clients[i]!;
      if (!client.cluster) continue;
      const now = client.masterOf(echo.slot);
      if (now === undefined || now === echo.node) continue;
      this.stopEcho(key);
      const link = this.links.get(key);
      if (link) this.startEcho(link);
    }
  }

  /**
   * Every {@link LinkBounds.checkMs}: a link whose last echo has not come back is
   * lost, with every channel on it (its connection is made again); the
   * others are sent a new echo, one `SPUBLISH` per link.
   */
  private checkEchoes(): void {
    this.rehome();
    const silent: { i: number; channels: string[]; echo: string }[] = [];
    const unanswered: { i: number; channels: string[] }[] = [];
    for (const [key, link] of this.links) {
      const { i } = link;
      const echo = this.echoes.get(key);
      if (!echo) {
        this.startEcho(link);
        continue;
      }
      if (!echo.on || this.echoRefused.has(i)) continue;
      if (echo.sentAt !== undefined) {
        // Taken now: a reconnect below may report (and so empty) other links of the same client.
        if (echo.published) silent.push({ i, channels: [...link.channels], echo: echo.channel });
        else unanswered.push({ i, channels: [...link.channels] });
        continue;
      }
      const seq = ++echo.seq;
      echo.sentAt = performance.now();
      echo.published = false;
      this.clients[i]!.publish(echo.channel, String(seq)).then(
        () => {
          if (echo.seq === seq) echo.published = true;
        },
        (error: unknown) => {
          // Unanswered: lost at the next check.
          if (!this.clients[i]!.isReplyError(error)) return;
          // Answered with a refusal for now (BUSY, LOADING, a slot moving): the next check sends another.
          if (echo.seq === seq) echo.sentAt = undefined;
          // Refused by an ACL without +spublish: no check on this client, said once.
          if (!NOPERM.test((error as Error).message) || this.echoRefused.has(i)) return;
          this.echoRefused.add(i);
          this.observer?.error(
            new Error(
              `the server refused the wake-up link check (SPUBLISH): ${(error as Error).message}; a silent link goes unnoticed until recheckMs`,
              { cause: error },
            ),
          );
        },
      );
    }
    for (const key of [...this.echoes.keys()]) if (!this.links.has(key)) this.stopEcho(key);
    if (this.echoes.size === 0) {
      clearInterval(this.echoTimer);
      this.echoTimer = undefined;
    }
    for (const { i, channels, echo } of silent) {
      this.observer?.error(
        new Error(
          `the wake-up subscriber connection stopped delivering (no echo within ${this.bounds.checkMs} ms on a link of ${channels.length} ` +
            'channel(s)): it is made again, and waiters re-check until it is back',
        ),
      );
      this.subscribers[i]?.reconnect([...channels, echo]);
      this.lost(i, channels, true);
    }
    // The server did not answer the echo's SPUBLISH: subscribed again, confirmed (and re-checked) once it answers.
    for (const { i, channels } of unanswered) this.lost(i, channels, false);
  }

  /**
   * Whether `channel` is one of this hub's echo channels: undefined if not;
   * else the echo check on client `i` it belongs to, or null for one already dropped.
   */
  private echoOf(i: number, channel: string): Echo | null | undefined {
    if (!channel.endsWith(ECHO) || !channel.includes(`\n${this.id}.`)) return undefined;
    for (const [key, echo] of this.echoes) if (echo.channel === channel && key.startsWith(`${i}\n`)) return echo;
    return null;
  }

  /** A message on one of this hub's echo channels, from client `i`. */
  private echoed(i: number, channel: string, message: string): boolean {
    const echo = this.echoOf(i, channel);
    if (echo === undefined) return false;
    if (echo && message === String(echo.seq)) echo.sentAt = undefined;
    return true;
  }

  private unwatch(channel: string, watch: Watch): void {
    const set = this.watchers.get(channel);
    if (!set?.delete(watch) || set.size > 0) return;
    this.watchers.delete(channel);
    const timer = setTimeout(() => {
      this.lingering.delete(channel);
      if (this.watchers.has(channel)) return;
      this.subscribed.delete(channel);
      this.confirmed.delete(channel);
      for (const sub of this.subscribers) sub?.unsubscribe(channel);
      this.clients.forEach((_, i) => {
        this.failures.delete(keyOf(i, channel));
        this.restoring.delete(keyOf(i, channel));
        this.leave(i, channel); // the last channel of its link: the link's echo goes too
      });
      this.slots.delete(channel);
    }, LINGER_MS);
    timer.unref();
    this.lingering.set(channel, timer);
  }

  private connection(i: number): Subscriber {
    let sub = this.subscribers[i];
    if (!sub) {
      const events: SubscriberEvents = {
        message: (channel, message) => {
          if (this.echoed(i, channel, message)) return;
          this.observer?.message();
          for (const w of this.watchers.get(channel) ?? []) w.notify(message, i);
        },
        // Connection errors are retried by the client library; waiters fall back to re-checks meanwhile.
        error: (error) => this.observer?.error(error),
        lost: (channels) => this.lost(i, channels, false),
      };
      const { handshakeMs, confirmMs } = this.bounds;
      sub = this.clients[i]!.subscriber(events, { handshakeMs, confirmMs });
      this.subscribers[i] = sub;
    }
    return sub;
  }
}

/** One subscriber link of one client: the node it goes to ('' on one server), and the confirmed subscriptions it carries. */
interface Link {
  readonly i: number;
  readonly node: string;
  readonly channels: Set<string>;
}

/** The echo check of one link: its channel and that channel's slot, whether subscribed, the last echo sent, and since when it is out. */
interface Echo {
  /** The node of the link it checks. */
  readonly node: string;
  readonly channel: string;
  /** The echo channel's Cluster slot (0 on one server): when it maps to another node, the echo is made again on its link. */
  readonly slot: number;
  on: boolean;
  seq: number;
  /** When the last echo was sent, until it came back. */
  sentAt: number | undefined;
  /** The server took the last echo's SPUBLISH: an echo that does not come back was lost on the subscriber's link. */
  published: boolean;
}

const ECHO = '\necho';
/** The node of a link whose slot's master is not known yet: this and the slot. */
const UNKNOWN_MASTER = 'slot ';
/** The server's refusal by its ACL: a subscription it will refuse again. */
const NOPERM = /^NOPERM\b/;

/** An echo channel in `channel`'s slot (the lock's hash tag), named by the hub and the echo's serial (`<hub id>.<n>`). */
function echoChannel(channel: string, name: string): string {
  return `${channel}\n${name}${ECHO}`;
}

function keyOf(i: number, channel: string): string {
  return `${i}\n${channel}`;
}

/** `promise`, or a rejection with `timedOut()`'s error once `ms` passed. */
function bounded<T>(promise: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(timedOut()), ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Resolves with true once `needed` of `promises` fulfilled, or with false once too many failed for that. */
function confirmations(promises: readonly Promise<void>[], needed: number): Promise<boolean> {
  return new Promise((resolve) => {
    let ok = 0;
    let failed = 0;
    for (const p of promises) {
      p.then(
        () => ++ok >= needed && resolve(true),
        () => ++failed > promises.length - needed && resolve(false),
      );
    }
  });
}
