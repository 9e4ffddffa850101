// a LockClient closed while its hub's first subscription
// is in flight (a shutdown while a writer waits). The subscription's
// confirmation lands after close(): the hub must not then make a subscriber
// again, subscribe its echo channel, or start its echo timer (which would
// publish an echo every linkCheckMs, 2.5 s by default, for ever through the
// user's open client). The hubs here check every LINK_CHECK_MS: a timer
// started after close() would publish within each of those. Nor may a
// waiter whose first try was refused subscribe after close() was called
// from a `contended` listener, between that try and its subscription.
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { driverFor } from '../../src/clients/index.js';
import { ClientClosedError, LockClient } from '../../src/index.js';
import { WakeupHub } from '../../src/wakeups.js';
import { forEachTopology, NODE_REDIS_IN_CI_AND_GLIDE } from '../setup/topologies.js';
import { rejection } from '../support/rejection.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The hubs' `linkCheckMs` (a fifth of the default): no SPUBLISH over two of these after close() means no echo timer. */
const LINK_CHECK_MS = 500;

// Slow (echo periods): ioredis in npm test; node-redis 5 and GLIDE, where it found bugs, in npm run test:clients.
forEachTopology('a hub closed while its first subscription is in flight', { clients: NODE_REDIS_IN_CI_AND_GLIDE }, (ctx) => {
  /** Every master's own connection (the test's look at the servers). */
  async function masters(): Promise<Redis[]> {
    if (ctx.kind === 'standalone') return [new Redis(ctx.server.port, ctx.server.host)];
    return (await ctx.cluster.masters()).map((m) => new Redis(m.port, m.host));
  }
  async function shardChannels(conns: Redis[]): Promise<string[]> {
    return (await Promise.all(conns.map((c) => c.call('PUBSUB', 'SHARDCHANNELS') as Promise<string[]>))).flat();
  }
  /** The connections named `name` on every master, and those of them subscribed to anything. */
  async function connectionsNamed(conns: Redis[], name: string): Promise<{ open: number; subscribed: number }> {
    let open = 0;
    let subscribed = 0;
    for (const c of conns) {
      for (const line of String(await c.call('CLIENT', 'LIST')).split('\n')) {
        if (!line.includes(` name=${name} `)) continue;
        open++;
        if (/ (?:sub|psub|ssub)=[1-9]/.test(line)) subscribed++;
      }
    }
    return { open, subscribed };
  }
  async function spublishes(conns: Redis[]): Promise<number> {
    let n = 0;
    for (const c of conns) n += Number(/^cmdstat_spublish:calls=(\d+)/m.exec(await c.info('commandstats'))?.[1] ?? 0);
    return n;
  }

  it('hub.close() right after watch(): nothing subscribed, no echo published afterwards', async function () {
    this.timeout(40_000);
    const conns = await masters();
    try {
      const driver = driverFor(await ctx.lockRedis())!;
      const hub = new WakeupHub(
        [driver],
        { message: () => undefined, unconfirmed: () => undefined, error: () => undefined },
        undefined,
        LINK_CHECK_MS,
      );
      const watching = hub.watch('rwlock:{close-race}:wake', 3_000);
      hub.close(); // the subscription is on the wire
      await watching.catch(() => undefined);
      await sleep(LINK_CHECK_MS); // a late confirmation's echo would be subscribed by now, and its first check due
      const before = await spublishes(conns);
      await sleep(2 * LINK_CHECK_MS);
      const after = await spublishes(conns);
      const left = await shardChannels(conns);
      console.log(
        `      [${ctx.kind}, ${ctx.clientKind}] after close: ${after - before} SPUBLISH in ${2 * LINK_CHECK_MS} ms; subscribed: ${JSON.stringify(left)}`,
      );
      expect(after - before, 'echoes published after close()').to.equal(0);
      expect(
        left.filter((c) => c.includes('close-race')),
        'channels subscribed after close()',
      ).to.deep.equal([]);
    } finally {
      for (const c of conns) c.disconnect();
    }
  });

  it('LockClient.close() while a writer waits for its first subscription: no echo published afterwards', async function () {
    this.timeout(40_000);
    const conns = await masters();
    const holderLocks = new LockClient(await ctx.lockRedis());
    const waiterLocks = new LockClient(await ctx.lockRedis(), { recheckMs: 60_000, linkCheckMs: LINK_CHECK_MS });
    try {
      const holder = await holderLocks.lock('close-race-2').acquireWrite();
      const subscribedBefore = (await shardChannels(conns)).length;
      const waiting = waiterLocks.lock('close-race-2').acquireWrite({ waitMs: 30_000 });
      waiting.catch(() => undefined);
      // Close as soon as the waiter's try was refused (its subscription then goes on the wire).
      for (let i = 0; i < 2_000 && (await holderLocks.inspect('close-race-2')).queue.length === 0; i++) await sleep(1);
      await waiterLocks.close();
      await holder.release();
      await sleep(LINK_CHECK_MS); // a late confirmation's echo would be subscribed by now, and its first check due
      const before = await spublishes(conns);
      await sleep(2 * LINK_CHECK_MS);
      const after = await spublishes(conns);
      const left = (await shardChannels(conns)).filter((c) => c.includes('close-race-2'));
      console.log(
        `      [${ctx.kind}, ${ctx.clientKind}] after LockClient.close(): ${after - before} SPUBLISH; subscribed: ${JSON.stringify(left)} (before: ${subscribedBefore})`,
      );
      expect(after - before, 'echoes published after close()').to.equal(0);
      expect(left, 'channels subscribed after close()').to.deep.equal([]);
    } finally {
      await holderLocks.close();
      for (const c of conns) c.disconnect();
    }
  });

  it('LockClient.close() from a contended listener: no subscriber connection or channel left once it settles', async function () {
    this.timeout(40_000);
    const conns = await masters();
    const name = `close-from-listener-${ctx.clientKind}`;
    const holderLocks = new LockClient(await ctx.lockRedis());
    const waiterLocks = new LockClient(await ctx.lockRedis({ name }), { recheckMs: 60_000, linkCheckMs: LINK_CHECK_MS });
    try {
      const holder = await holderLocks.lock('close-from-listener').acquireWrite();
      const before = await connectionsNamed(conns, name);
      let closing: Promise<void> | undefined;
      waiterLocks.on('contended', () => void (closing ??= waiterLocks.close()));
      // The first try is refused: the listener closes the client before the waiter subscribes.
      const error = await rejection(waiterLocks.lock('close-from-listener').acquireWrite({ waitMs: 30_000 }));
      expect(error).to.be.instanceOf(ClientClosedError);
      expect(closing, 'the contended event ran').to.not.equal(undefined);
      await closing;
      await holder.release();
      // A subscription made after close() is on its server within a few ms: look for LINK_CHECK_MS.
      let channels: string[] = [];
      for (const end = performance.now() + LINK_CHECK_MS; channels.length === 0 && performance.now() < end; await sleep(20))
        channels = (await shardChannels(conns)).filter((c) => c.includes('close-from-listener'));
      const after = await connectionsNamed(conns, name);
      console.log(
        `      [${ctx.kind}, ${ctx.clientKind}] close() from a contended listener: channels ${JSON.stringify(channels)}, connections ${JSON.stringify(after)} (before: ${JSON.stringify(before)})`,
      );
      expect(channels, 'channels subscribed after close()').to.deep.equal([]);
      expect(after.subscribed, 'subscriber connections of the closed client').to.equal(0);
      // On a Cluster the client itself may connect to another master meanwhile; one server has one connection.
      if (ctx.kind === 'standalone') expect(after.open, 'connections of the closed client').to.equal(before.open);
    } finally {
      await holderLocks.close();
      for (const c of conns) c.disconnect();
    }
  });
});
