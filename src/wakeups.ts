import type { Cluster, Redis } from 'ioredis';
import { isCluster, type RedisClient } from './redis.js';

/** How long a channel stays subscribed after its last waiter left, so that a busy lock is not resubscribed on every wait. */
const LINGER_MS = 5_000;

/**
 * One waiter's view of a lock's wake-up channel. `woken` turns true on every
 * release message; the waiter clears it before each try, so a release that
 * lands between a try and the following sleep ends that sleep at once.
 */
export class Watch {
  woken = false;
  private wake: (() => void) | undefined;

  constructor(private readonly leave: (watch: Watch) => void) {}

  notify(): void {
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

/**
 * Shares one subscriber connection (on a Cluster, one per master, through
 * ioredis' sharded subscribers) among every waiter of one LockClient, and
 * fans each release message out to the waiters of that lock.
 */
export class WakeupHub {
  private subscriber: Redis | Cluster | undefined;
  private readonly watchers = new Map<string, Set<Watch>>();
  private readonly subscribed = new Map<string, Promise<void>>();
  private readonly lingering = new Map<string, NodeJS.Timeout>();

  constructor(private readonly client: RedisClient) {}

  /**
   * Starts watching `channel`; resolves once the subscription is confirmed, or
   * after `confirmWithinMs` at the latest (the waiter then relies on its
   * re-checks until the subscription comes through).
   */
  async watch(channel: string, confirmWithinMs: number): Promise<Watch> {
    const watch = new Watch((w) => this.unwatch(channel, w));
    let set = this.watchers.get(channel);
    if (!set) this.watchers.set(channel, (set = new Set()));
    set.add(watch);
    clearTimeout(this.lingering.get(channel));
    this.lingering.delete(channel);

    let confirmed = this.subscribed.get(channel);
    if (!confirmed) {
      confirmed = this.connection()
        .ssubscribe(channel)
        .then(
          () => undefined,
          () => void this.subscribed.delete(channel), // next waiter tries again
        );
      this.subscribed.set(channel, confirmed);
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([confirmed, new Promise<void>((resolve) => (timer = setTimeout(resolve, confirmWithinMs)))]);
    clearTimeout(timer);
    return watch;
  }

  /** Stops every subscription and closes the subscriber connection(s). */
  close(): void {
    for (const timer of this.lingering.values()) clearTimeout(timer);
    this.lingering.clear();
    this.subscribed.clear();
    for (const set of this.watchers.values()) for (const w of set) w.notify();
    this.watchers.clear();
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }

  private unwatch(channel: string, watch: Watch): void {
    const set = this.watchers.get(channel);
    if (!set?.delete(watch) || set.size > 0) return;
    this.watchers.delete(channel);
    const timer = setTimeout(() => {
      this.lingering.delete(channel);
      if (this.watchers.has(channel)) return;
      this.subscribed.delete(channel);
      this.subscriber?.sunsubscribe(channel).catch(() => undefined);
    }, LINGER_MS);
    timer.unref();
    this.lingering.set(channel, timer);
  }

  private connection(): Redis | Cluster {
    if (!this.subscriber) {
      const sub = isCluster(this.client)
        ? this.client.duplicate(undefined, { shardedSubscribers: true })
        : this.client.duplicate({ lazyConnect: false });
      sub.on('smessage', (channel: string) => {
        for (const w of this.watchers.get(channel) ?? []) w.notify();
      });
      // Connection errors are retried by ioredis; waiters fall back to re-checks meanwhile.
      sub.on('error', () => undefined);
      this.subscriber = sub;
    }
    return this.subscriber;
  }
}
