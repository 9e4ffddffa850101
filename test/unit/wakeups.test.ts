import { expect } from 'chai';
import calculateSlot from 'cluster-key-slot';
import sinon from 'sinon';
import type { Driver, SubscriberEvents } from '../../src/clients/driver.js';
import { driverFor } from '../../src/clients/index.js';
import { handedChannel } from '../../src/keys/keys.js';
import { MAX_DURATION_MS } from '../../src/options.js';
import type { RedisClient } from '../../src/redis.js';
import { linkBounds, WakeupHub, Watch } from '../../src/wakeups.js';

/** linkCheckMs's default, pinned: the hubs below are made without one. */
const ECHO_CHECK_MS = 2_500;

describe('Watch (waiter sleep)', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => (clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })));
  afterEach(() => clock.restore());

  it('returns at once when a wake-up arrived before the sleep began', async () => {
    const watch = new Watch(() => undefined);
    watch.notify();
    let done = false;
    void watch.sleep(10_000).then(() => (done = true));
    await clock.tickAsync(0);
    expect(done).to.equal(true);
  });

  it('ends the sleep on a wake-up', async () => {
    const watch = new Watch(() => undefined);
    let done = false;
    void watch.sleep(10_000).then(() => (done = true));
    await clock.tickAsync(5);
    expect(done).to.equal(false);
    watch.notify();
    await clock.tickAsync(0);
    expect(done).to.equal(true);
  });

  it('lets a waiting writer sleep through releases that name another writer as next', async () => {
    const writer = new Watch(() => undefined, 'me');
    const reader = new Watch(() => undefined);
    for (const message of ['write:other', 'read:other:with:colons', 'write:me:not-quite']) {
      writer.notify(message);
      reader.notify(message);
      expect(writer.woken, message).to.equal(false);
      expect(reader.woken, message).to.equal(true);
      reader.woken = false;
    }
    for (const message of ['write:me', 'read', 'abandon']) {
      writer.notify(message);
      expect(writer.woken, message).to.equal(true);
      writer.woken = false;
    }
    writer.notify(); // the hub closing
    expect(writer.woken).to.equal(true);
  });

  it("wakes a writer a release handed the lock to, with each node's grant; a writer handed nothing sleeps on", () => {
    const writer = new Watch(() => undefined, 'me and: you');
    const reader = new Watch(() => undefined);
    writer.notify('handed h1 1700000000123 1700000000123456 me and');
    reader.notify('handed h1 1700000000123 1700000000123456 me and');
    expect(writer.woken).to.equal(false);
    expect(writer.handed).to.deep.equal([]);
    expect(reader.woken).to.equal(true); // readers wake on every message
    expect(reader.handed).to.deep.equal([]);
    writer.notify('handed h2 1700000000999 1700000000999001 me and: you', 2);
    expect(writer.woken).to.equal(true);
    expect(writer.handed[2]).to.deep.equal({ holdId: 'h2', queuedUntil: 1700000000999, fence: 1700000000999001 });
    writer.notify('handed h4 1700000001000 1700000001000001 me and: you', 0);
    expect(writer.handed.map((h) => h?.holdId)).to.deep.equal(['h4', undefined, 'h2']); // by node
    writer.woken = false;
    writer.notify('handed h3 1 malformed', 1);
    expect(writer.woken).to.equal(false);
    expect(writer.handed[1]).to.equal(undefined);
  });

  it('ends the sleep after its bound without a wake-up', async () => {
    const watch = new Watch(() => undefined);
    let done = false;
    void watch.sleep(300).then(() => (done = true));
    await clock.tickAsync(299);
    expect(done).to.equal(false);
    await clock.tickAsync(1);
    expect(done).to.equal(true);
    expect(clock.countTimers()).to.equal(0);
  });

  it('ends the sleep on abort and leaves no timer behind', async () => {
    const watch = new Watch(() => undefined);
    const controller = new AbortController();
    let done = false;
    void watch.sleep(10_000, controller.signal).then(() => (done = true));
    controller.abort();
    await clock.tickAsync(0);
    expect(done).to.equal(true);
    expect(clock.countTimers()).to.equal(0);
  });
});

describe('WakeupHub: one shared subscriber, channels kept 5 s after their last waiter', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => (clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })));
  afterEach(() => clock.restore());

  /**
   * A stand-in for an ioredis client, under its driver: records what the hub
   * asks of its subscriber connection, but for the echo channels of its link
   * check (wakeup-links.test.ts checks those).
   */
  function fakeClient() {
    const calls: string[] = [];
    const record = (call: string) => void (call.endsWith('\necho') || calls.push(call));
    let duplicates = 0;
    const subscriber = {
      ssubscribe: async (channel: string) => record(`ssubscribe ${channel}`),
      sunsubscribe: async (channel: string) => record(`sunsubscribe ${channel}`),
      on: () => subscriber,
      disconnect: () => void calls.push('disconnect'),
    };
    const client = {
      options: {},
      status: 'ready',
      call: async () => undefined,
      defineCommand: () => undefined,
      once: () => client, // the driver closes its subscriber when the client ends
      off: () => client,
      duplicate: () => {
        duplicates++;
        return subscriber;
      },
    } as unknown as RedisClient;
    return { client: driverFor(client), calls, duplicates: () => duplicates };
  }

  it('shares one connection and one subscription among the waiters of a lock', async () => {
    const fake = fakeClient();
    const hub = new WakeupHub([fake.client]);
    const watches = [await hub.watch('a', 100), await hub.watch('a', 100), await hub.watch('b', 100)];
    expect(fake.duplicates()).to.equal(1);
    expect(fake.calls).to.deep.equal(['ssubscribe a', 'ssubscribe b']);
    for (const w of watches) w.close();
    hub.close();
  });

  it('watches at once only a channel whose subscription is confirmed, and not after it was dropped', async () => {
    const fake = fakeClient();
    const hub = new WakeupHub([fake.client]);
    expect(hub.watchIfSubscribed('a')).to.equal(undefined); // never subscribed
    const pending = hub.watch('a', 100);
    expect(hub.watchIfSubscribed('a')).to.equal(undefined); // subscribing, not yet confirmed
    (await pending).close();
    const early = hub.watchIfSubscribed('a', 'me');
    expect(early).to.be.instanceOf(Watch);
    early!.close();
    await clock.tickAsync(5_000); // unsubscribed 5 s after its last waiter
    expect(fake.calls).to.deep.equal(['ssubscribe a', 'sunsubscribe a']);
    expect(hub.watchIfSubscribed('a')).to.equal(undefined);
    hub.close();
  });

  it("has a waiting writer watch its client's own channel too where releases hand over, confirmed before it watches at once", async () => {
    const fake = fakeClient();
    const hub = new WakeupHub([fake.client], undefined, 'c1');
    const own = handedChannel('a', 'c1');
    const writer = await hub.watch('a', 100, 'me');
    const reader = await hub.watch('a', 100);
    expect(fake.calls).to.deep.equal(['ssubscribe a', `ssubscribe ${own}`]);
    // Every writer of this client shares the client's channel: confirmed, it watches at once.
    const other = hub.watchIfSubscribed('a', 'you');
    expect(other).to.be.instanceOf(Watch);
    writer.close();
    other!.close();
    reader.close();
    await clock.tickAsync(5_000);
    expect(fake.calls).to.deep.equal(['ssubscribe a', `ssubscribe ${own}`, `sunsubscribe ${own}`, 'sunsubscribe a']);
    // Subscribed to the lock's channel alone (a reader's wait), a writer of a lock that hands over watches once
    // both are confirmed; of a lock that does not, at once.
    const again = await hub.watch('a', 100);
    expect(hub.watchIfSubscribed('a', 'me')).to.equal(undefined);
    again.close();
    hub.close();
    const legacyFake = fakeClient();
    const legacyHub = new WakeupHub([legacyFake.client]);
    const legacyReader = await legacyHub.watch('a', 100);
    const legacy = legacyHub.watchIfSubscribed('a', 'me');
    expect(legacy).to.be.instanceOf(Watch);
    legacy!.close();
    legacyReader.close();
    legacyHub.close();
  });

  it('unsubscribes a channel exactly 5 s after its last waiter left, unless another came meanwhile', async () => {
    const fake = fakeClient();
    const hub = new WakeupHub([fake.client]);
    (await hub.watch('a', 100)).close();
    await clock.tickAsync(4_999);
    expect(fake.calls).to.deep.equal(['ssubscribe a']);
    await clock.tickAsync(1);
    expect(fake.calls).to.deep.equal(['ssubscribe a', 'sunsubscribe a']);

    // A waiter within the 5 s keeps the subscription, and the next one does not subscribe again.
    (await hub.watch('b', 100)).close();
    await clock.tickAsync(4_000);
    const again = await hub.watch('b', 100);
    await clock.tickAsync(10_000);
    expect(fake.calls.filter((c) => c.endsWith(' b'))).to.deep.equal(['ssubscribe b']);
    again.close();
    await clock.tickAsync(5_000);
    expect(fake.calls.filter((c) => c.endsWith(' b'))).to.deep.equal(['ssubscribe b', 'sunsubscribe b']);
    hub.close();
  });
});

describe('WakeupHub: one echo check per subscriber link', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => (clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] })));
  afterEach(() => clock.restore());

  /**
   * A Cluster client's driver: slots on masters n0, n1 and n2 (by slot
   * modulo 3, unless moved), a subscriber that confirms at once, and
   * SPUBLISH that echoes on it unless its master's link is silent.
   */
  function fakeCluster() {
    const moved = new Map<number, string>();
    const masterOf = (slot: number) => moved.get(slot) ?? `n${slot % 3}`;
    const subscribed = new Set<string>();
    const published: string[] = [];
    const reconnects: string[][] = [];
    const silent = new Set<string>();
    let events: SubscriberEvents | undefined;
    const driver = {
      cluster: true,
      masterOf,
      isReplyError: () => false,
      publish: async (channel: string, message: string) => {
        published.push(channel);
        if (subscribed.has(channel) && !silent.has(masterOf(calculateSlot(channel))))
          queueMicrotask(() => events?.message(channel, message));
        return 1;
      },
      subscriber: (e: SubscriberEvents) => {
        events = e;
        return {
          subscribe: async (channel: string) => void subscribed.add(channel),
          unsubscribe: (channel: string) => void subscribed.delete(channel),
          reconnect: (channels: readonly string[]) => {
            reconnects.push([...channels]);
            for (const c of channels) subscribed.delete(c);
          },
          close: () => undefined,
        };
      },
    } as unknown as Driver;
    /** The echo channels subscribed, by the master their slot maps to. */
    const echoes = () => [...subscribed].filter((c) => c.endsWith('\necho')).map((c) => masterOf(calculateSlot(c)));
    return { driver, moved, masterOf, subscribed, published, reconnects, silent, echoes };
  }

  it('publishes one echo per master with subscriptions, drops it with its last one, and moves it with its slot', async () => {
    const fake = fakeCluster();
    const hub = new WakeupHub([fake.driver]);
    const channels = Array.from({ length: 30 }, (_, n) => `{lock-${n}}`);
    const nodeOf = (channel: string) => fake.masterOf(calculateSlot(channel));
    const on = (node: string) => channels.filter((c) => nodeOf(c) === node);
    expect(['n0', 'n1', 'n2'].every((node) => on(node).length > 1)).to.equal(true);
    const watches = new Map<string, Watch>();
    for (const c of channels) watches.set(c, await hub.watch(c, 100));
    await clock.tickAsync(0);
    expect(fake.echoes().sort()).to.deep.equal(['n0', 'n1', 'n2']);
    await clock.tickAsync(2 * ECHO_CHECK_MS);
    expect(fake.published.length).to.equal(6); // one per master and check, not one per channel
    expect(fake.reconnects).to.deep.equal([]);

    // n0's channels all left: its echo goes with the last one (5 s later).
    for (const c of on('n0')) watches.get(c)!.close();
    await clock.tickAsync(5_000);
    expect(fake.echoes().sort()).to.deep.equal(['n1', 'n2']);

    // The slot of n1's echo moves to n2: n1 is checked by an echo in the slot of another of its channels.
    const n1Echo = [...fake.subscribed].find((c) => c.endsWith('\necho') && fake.masterOf(calculateSlot(c)) === 'n1')!;
    const anchor = channels.find((c) => n1Echo.startsWith(`${c}\n`))!;
    fake.moved.set(calculateSlot(anchor), 'n2');
    await clock.tickAsync(ECHO_CHECK_MS);
    expect(fake.echoes().sort()).to.deep.equal(['n1', 'n2']);
    expect(fake.subscribed.has(n1Echo)).to.equal(false);
    const sent = fake.published.length;
    await clock.tickAsync(ECHO_CHECK_MS);
    expect(fake.published.length - sent).to.equal(2);

    // n2's link goes silent: every channel on it (the moved one too) is made again and its waiters wake; n1's sleep on.
    fake.silent.add('n2');
    for (const w of watches.values()) w.woken = false;
    await clock.tickAsync(2 * ECHO_CHECK_MS);
    expect(fake.reconnects).to.have.length(1);
    const onN2 = on('n2').sort(); // the moved channel among them
    expect(onN2).to.include(anchor);
    expect(fake.reconnects[0]!.filter((c) => !c.endsWith('\necho')).sort()).to.deep.equal(onN2);
    expect(channels.filter((c) => watches.get(c)!.woken).sort()).to.deep.equal(onN2);
    for (const w of watches.values()) w.close();
    hub.close();
  });

  it('checks every channel of one server by a single echo', async () => {
    const fake = fakeCluster();
    const hub = new WakeupHub([{ ...fake.driver, cluster: false } as Driver]);
    const watches = await Promise.all(Array.from({ length: 50 }, (_, n) => hub.watch(`{lock-${n}}`, 100)));
    await clock.tickAsync(3 * ECHO_CHECK_MS);
    expect([...fake.subscribed].filter((c) => c.endsWith('\necho'))).to.have.length(1);
    expect(fake.published).to.have.length(3);
    for (const w of watches) w.close();
    await clock.tickAsync(5_000);
    expect([...fake.subscribed]).to.deep.equal([]);
    hub.close();
  });
});

describe('WakeupHub: the link bounds follow linkCheckMs', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => (clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] })));
  afterEach(() => clock.restore());

  /**
   * One server's driver: a subscriber that confirms at once (or never, with
   * `confirm` false), SPUBLISH that echoes on it unless `silent`, and what
   * the hub asked of it.
   */
  function fakeServer(confirm = true) {
    const published: number[] = [];
    const reconnects: string[][] = [];
    const options: unknown[] = [];
    const state = { silent: false };
    const subscribed = new Set<string>();
    let events: SubscriberEvents | undefined;
    const driver = {
      cluster: false,
      masterOf: () => '',
      isReplyError: () => false,
      publish: async (channel: string, message: string) => {
        published.push(clock.now);
        if (subscribed.has(channel) && !state.silent) queueMicrotask(() => events?.message(channel, message));
        return 1;
      },
      subscriber: (e: SubscriberEvents, o: unknown) => {
        events = e;
        options.push(o);
        return {
          subscribe: (channel: string) => (confirm ? Promise.resolve(void subscribed.add(channel)) : new Promise<void>(() => undefined)),
          unsubscribe: (channel: string) => void subscribed.delete(channel),
          reconnect: (channels: readonly string[]) => void reconnects.push([...channels]),
          close: () => undefined,
        };
      },
    } as unknown as Driver;
    return { driver, published, reconnects, options, state };
  }

  /** When a link that goes silent right after an echo came back is found lost, in ms after it went silent. */
  async function noticedAfter(hub: WakeupHub, fake: ReturnType<typeof fakeServer>, checkMs: number): Promise<number> {
    const watch = await hub.watch('{a}', 100);
    await clock.tickAsync(checkMs + 1); // the first echo sent, and back
    expect(fake.published).to.have.length(1);
    fake.state.silent = true;
    const silentAt = clock.now;
    while (fake.reconnects.length === 0 && clock.now - silentAt < 10 * checkMs) await clock.tickAsync(10);
    watch.close();
    return clock.now - silentAt;
  }

  it('by default: an echo every 2.5 s, a silent link found within 5 s, a 5 s handshake and a 10 s subscribe bound', async () => {
    const fake = fakeServer();
    const hub = new WakeupHub([fake.driver]);
    expect(fake.options).to.deep.equal([]);
    const noticed = await noticedAfter(hub, fake, ECHO_CHECK_MS);
    expect(fake.options).to.deep.equal([{ handshakeMs: 5_000, confirmMs: 7_500 }]);
    expect(fake.published[0]).to.equal(ECHO_CHECK_MS);
    expect(noticed).to.be.within(ECHO_CHECK_MS, 2 * ECHO_CHECK_MS);
    hub.close();

    const never = fakeServer(false);
    const errors: Error[] = [];
    const stuck = new WakeupHub([never.driver], { message: () => undefined, unconfirmed: () => undefined, error: (e) => errors.push(e) });
    const watching = stuck.watch('{b}', 100);
    await clock.tickAsync(100);
    (await watching).close();
    await clock.tickAsync(9_899);
    expect(errors).to.deep.equal([]);
    await clock.tickAsync(1);
    expect(errors.map((e) => e.message)).to.deep.equal([
      'the server did not confirm the wake-up subscription to "{b}" within 10000 ms; waiters re-check until it does',
    ]);
    stuck.close();
  });

  it('linkCheckMs 400: an echo every 400 ms, a silent link found within 800 ms, an 800 ms handshake and a 1.6 s subscribe bound', async () => {
    const fake = fakeServer();
    const hub = new WakeupHub([fake.driver], undefined, undefined, 400);
    const noticed = await noticedAfter(hub, fake, 400);
    expect(fake.options).to.deep.equal([{ handshakeMs: 800, confirmMs: 1_200 }]);
    expect(fake.published[0]).to.equal(400);
    expect(noticed).to.be.within(400, 800);
    hub.close();

    const never = fakeServer(false);
    const errors: Error[] = [];
    const stuck = new WakeupHub(
      [never.driver],
      { message: () => undefined, unconfirmed: () => undefined, error: (e) => errors.push(e) },
      undefined,
      400,
    );
    const watching = stuck.watch('{b}', 100);
    await clock.tickAsync(100);
    (await watching).close();
    await clock.tickAsync(1_499);
    expect(errors).to.deep.equal([]);
    await clock.tickAsync(1);
    expect(errors.map((e) => e.message)).to.deep.equal([
      'the server did not confirm the wake-up subscription to "{b}" within 1600 ms; waiters re-check until it does',
    ]);
    stuck.close();
  });

  it('keeps the bounds of the longest linkCheckMs within what a Node timer can wait', () => {
    expect(linkBounds(MAX_DURATION_MS)).to.deep.equal({
      checkMs: MAX_DURATION_MS,
      echoSubscribeMs: MAX_DURATION_MS,
      subscribeMs: MAX_DURATION_MS,
      handshakeMs: MAX_DURATION_MS,
      confirmMs: MAX_DURATION_MS,
    });
    expect(linkBounds(2_500)).to.deep.equal({
      checkMs: 2_500,
      echoSubscribeMs: 5_000,
      subscribeMs: 10_000,
      handshakeMs: 5_000,
      confirmMs: 7_500,
    });
  });
});
