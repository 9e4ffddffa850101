// Wake-up links that never die silently. A subscriber
// connection whose link goes silent (an idle timeout in a NAT or load
// balancer: the fault proxy drops everything on that one connection, and
// tells neither side) is noticed by the hub's echo check within two checks
// (2 × linkCheckMs), reported (`subscriberErrors`), its waiters re-check at
// once, and it is made again. recheckMs is 60 s throughout: a waiter woken
// within the bound was woken by the library noticing, not by its re-check.
// On the code before, each of these waited out recheckMs. The LockClients
// here check their links every LINK_CHECK_MS, not the default 2.5 s, so the
// bounds are measured in those periods; test/unit/wakeups.test.ts pins the
// defaults (an echo every 2.5 s, a silent link found within 5 s).
import { setMaxListeners } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import calculateSlot from 'cluster-key-slot';
import type { Redis } from 'ioredis';
import type { Driver } from '../../src/clients/driver.js';
import { driverFor, type LockRedisClient } from '../../src/clients/index.js';
import { RespSubscriber } from '../../src/clients/resp-subscriber.js';
import { LockClient } from '../../src/index.js';
import { type ClusterFaultProxy, type FaultProxy, proxyCluster, startFaultProxy, startRedisServer } from '../../src/testing/index.js';
import { WakeupHub } from '../../src/wakeups.js';
import { ALL_CLIENTS, disconnect, forEachTopology, selectedClients, selectedTopologies } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { masters } from '../support/redis-stats.js';
import { connectLockClient, targetThrough } from '../support/targets.js';

/** Never reached: a waiter that gets the lock before this was woken by the library, not by its re-check. */
const RECHECK_MS = 60_000;
/**
 * The waiters' `linkCheckMs`: a fifth of the default, and long enough that
 * an echo's round trip on a loaded machine (2 busy cores) stays well within
 * one period.
 */
const LINK_CHECK_MS = 500;
/**
 * The bound on noticing a silent link (two echo checks), and a margin for a
 * loaded machine: in ms, as before linkCheckMs, since a stalled event loop
 * or a slow script call on 2 busy cores does not shrink with the period.
 * Still far below RECHECK_MS, so a waiter within it was woken by the echo check.
 */
const NOTICED_MS = 2 * LINK_CHECK_MS;
const MARGIN_MS = 3_000;
/**
 * A connection that closed (a server restart, a killed client) is found by
 * its close, not by the echo check, and made again with backoff (up to 5 s
 * between tries): the bound these had with the default period (two checks
 * and a margin), whatever linkCheckMs.
 */
const RESTORED_MS = 13_000;
/** Waiters on distinct locks in the cost test: each lock has a channel of its own. */
const WAITERS = 200;
/**
 * The cost test's `linkCheckMs`: 200 subscriptions at once on a Cluster load
 * the machine more, and a late echo would count as a silent link there.
 */
const COST_CHECK_MS = 1_000;
/** Echo checks the cost test counts over. */
const PERIODS = 4;
/** The handshake bound the RespSubscriber test gives (the hub gives 2 × linkCheckMs, 5 s by default). */
const HANDSHAKE_MS = 1_000;

/** `SPUBLISH` calls `node` served so far (`INFO commandstats`). */
async function spublishCalls(node: Redis): Promise<number> {
  return Number(/^cmdstat_spublish:calls=(\d+)/m.exec(await node.info('commandstats'))?.[1] ?? 0);
}

/** The sharded channels subscribed on `node`: the locks' channels, and the hub's echo channels. */
async function shardChannels(node: Redis): Promise<{ locks: number; echoes: number }> {
  const channels = (await node.call('PUBSUB', 'SHARDCHANNELS')) as string[];
  const echoes = channels.filter((c) => c.endsWith('\necho')).length;
  return { locks: channels.length - echoes, echoes };
}

forEachTopology('wake-up links', { clients: ALL_CLIENTS }, (ctx) => {
  let proxy: FaultProxy | ClusterFaultProxy | undefined;
  const opened: LockClient[] = [];
  const clients: LockRedisClient[] = [];

  afterEach(async () => {
    for (const locks of opened.splice(0)) await locks.close();
    for (const c of clients.splice(0)) disconnect(c);
    await proxy?.close();
    proxy = undefined;
  });

  const open = (client: LockRedisClient, linkCheckMs = LINK_CHECK_MS): LockClient => {
    const locks = new LockClient(client, { recheckMs: RECHECK_MS, leaseMs: 30_000, linkCheckMs });
    opened.push(locks);
    return locks;
  };

  it('a waiting writer gets the lock within the bound of a release when only its subscriber link went silent', async function () {
    this.timeout(60_000);
    proxy = ctx.kind === 'cluster' ? await proxyCluster(ctx.cluster) : await startFaultProxy({ target: { port: ctx.server.port } });
    const through = await connectLockClient(targetThrough(proxy, ctx.clientKind));
    clients.push(through);
    const holderLocks = open(await ctx.lockRedis());
    const waiterLocks = open(through);
    const holder = await holderLocks.lock('silent').acquireWrite();
    const waiting = waiterLocks.lock('silent').acquireWrite({ waitMs: 50_000 });
    let granted: number | undefined;
    waiting.then(
      () => (granted = performance.now()),
      () => undefined,
    );
    // Queued, its channel and the hub's echo channel subscribed (through the proxy): then the link goes silent.
    await eventually('the writer queued', async () => (await holderLocks.inspect('silent')).queue.length === 1, 10_000);
    await eventually('the subscriptions made', () => (proxy!.stats.commands.ssubscribe ?? 0) >= 2, 10_000);
    // The hub's first echo sent: its echo subscription is confirmed.
    await eventually('the first echo', () => (proxy!.stats.commands.spublish ?? 0) >= 1, 10_000);
    const subscribedBefore = proxy.stats.commands.ssubscribe ?? 0;
    const reported: string[] = [];
    waiterLocks.on('subscriberError', (error) => reported.push(error.message));
    expect(proxy.silenceSubscribers()).to.be.at.least(1);
    await holder.release();
    const released = performance.now();
    const lease = await waiting;
    const tookMs = (granted ?? performance.now()) - released;
    console.log(`      [${ctx.kind}, ${ctx.clientKind}] silent link: granted ${Math.round(tookMs)} ms after the release`);
    expect(tookMs).to.be.below(NOTICED_MS + MARGIN_MS);
    await lease.release();
    // Restored: the next hand-over wakes at once, on the new connection.
    const again = await holderLocks.lock('silent').acquireWrite();
    const next = waiterLocks.lock('silent').acquireWrite({ waitMs: 50_000 });
    await eventually('the writer queued again', async () => (await holderLocks.inspect('silent')).queue.length === 1, 10_000);
    await eventually('subscribed again', () => (proxy!.stats.commands.ssubscribe ?? 0) > subscribedBefore, 15_000);
    await again.release();
    const releasedAgain = performance.now();
    await (await next).release();
    expect(performance.now() - releasedAgain).to.be.below(NOTICED_MS + MARGIN_MS);
    // One silenced link, said once: not again as the connection the hub made again closes.
    expect(reported, 'subscriberError events').to.have.length(1);
    expect(reported[0]).to.match(/^the wake-up subscriber connection stopped delivering/);
  });

  // GLIDE restores a Cluster subscription after a reconnect by itself and says nothing of it:
  // before, a release in the gap went unheard until the waiter's re-check (here never).
  it('a waiting reader re-checks once its subscription is back after its connections were reset, a release in the gap unheard', async function () {
    this.timeout(60_000);
    proxy = ctx.kind === 'cluster' ? await proxyCluster(ctx.cluster) : await startFaultProxy({ target: { port: ctx.server.port } });
    const proxies = 'proxies' in proxy ? proxy.proxies : [proxy];
    const through = await connectLockClient(targetThrough(proxy, ctx.clientKind));
    clients.push(through);
    const holderLocks = open(await ctx.lockRedis());
    // No echo check within the test: only the subscriber's own report of the reconnect can wake it.
    const waiterLocks = open(through, RECHECK_MS);
    waiterLocks.on('subscriberError', () => undefined);
    // Once uncontended: its scripts are loaded, so that each try is one EVALSHA through the proxy.
    await (await waiterLocks.lock('reset').acquireRead()).release();
    const scripts = () => (proxy!.stats.commands.evalsha ?? 0) + (proxy!.stats.commands.eval ?? 0);
    const before = scripts();
    const holder = await holderLocks.lock('reset').acquireWrite();
    // A reader: it sends nothing while it waits (a queued writer keeps its place by tries, which GLIDE fails at once mid-reconnect).
    const waiting = waiterLocks.lock('reset').acquireRead({ waitMs: 50_000 });
    waiting.catch(() => undefined);
    const nodes = await masters(ctx.client());
    const subscribers = async () => (await Promise.all(nodes.map(shardChannels))).reduce((n, c) => n + c.locks, 0);
    await eventually('its channel subscribed', async () => (await subscribers()) > 0, 10_000);
    // Its try once subscribed made, and answered (a command behind it on the same connection came back):
    // it sleeps now, until woken (the holder's lease and recheckMs are far off).
    await eventually('its second try', () => scripts() >= before + 2, 10_000);
    await driverFor(through)!.waitForReplicas(calculateSlot(waiterLocks.lock('reset').keys.state), 0, 1);
    // Every connection through the proxies reset, and none let in again until the library said it noticed
    // (a subscriber error: its subscription closed, or could not be made again) and the release was
    // published to nobody.
    const errors = waiterLocks.stats().subscriberErrors;
    for (const p of proxies) await p.refuse();
    await eventually('its subscription gone from the server', async () => (await subscribers()) === 0, 10_000);
    await eventually('the subscriber noticed', () => waiterLocks.stats().subscriberErrors > errors, 10_000);
    await holder.release();
    for (const p of proxies) await p.accept();
    const back = performance.now();
    const lease = await waiting;
    const tookMs = performance.now() - back;
    console.log(`      [${ctx.kind}, ${ctx.clientKind}] connections reset: granted ${Math.round(tookMs)} ms after they were let in again`);
    expect(tookMs, 'woken once its subscription was back').to.be.below(RESTORED_MS);
    await lease.release();
  });

  it(`checks the link by one echo per subscriber connection, not per lock (${WAITERS} waiters on distinct locks)`, async function () {
    this.timeout(90_000);
    const holderLocks = open(await ctx.lockRedis());
    const waiterLocks = open(await ctx.lockRedis(), COST_CHECK_MS);
    const names = Array.from({ length: WAITERS }, (_, n) => `cost-${n}`);
    const leases = await Promise.all(names.map((name) => holderLocks.lock(name).acquireWrite()));
    const stop = new AbortController();
    setMaxListeners(WAITERS + 10, stop.signal);
    const waits = names.map((name) => waiterLocks.lock(name).acquireRead({ waitMs: 80_000, signal: stop.signal }));
    for (const w of waits) w.catch(() => undefined);
    try {
      const nodes = await masters(ctx.client());
      const count = async () => Promise.all(nodes.map(shardChannels));
      await eventually('every lock subscribed', async () => (await count()).reduce((n, c) => n + c.locks, 0) >= WAITERS, 30_000);
      await eventually('the echo checks started', async () => (await count()).every((c) => c.locks === 0 || c.echoes > 0), 15_000);
      const channels0 = await count();
      // The echoes settled (subscribed, the first SPUBLISH on every master with locks), then PERIODS of them counted.
      const first = await Promise.all(nodes.map(spublishCalls));
      await eventually(
        'the first echoes',
        async () => (await Promise.all(nodes.map(spublishCalls))).every((n, i) => n > first[i]! || channels0[i]!.locks === 0),
        15_000,
      );
      const before = await Promise.all(nodes.map(spublishCalls));
      await new Promise((resolve) => setTimeout(resolve, PERIODS * COST_CHECK_MS));
      const after = await Promise.all(nodes.map(spublishCalls));
      const channels = await count();
      const perPeriod = nodes.map((_, n) => (after[n]! - before[n]!) / PERIODS);
      console.log(
        `      [${ctx.kind}, ${ctx.clientKind}] ${WAITERS} waiting locks: echo channels per master ${channels.map((c) => c.echoes).join('/')}, ` +
          `SPUBLISH per ${COST_CHECK_MS} ms per master ${perPeriod.map((p) => p.toFixed(1)).join('/')}`,
      );
      for (const [n, c] of channels.entries()) {
        if (c.locks === 0) continue;
        expect(c.echoes, `echo channels on master ${n}`).to.equal(1);
        // One echo a period; a loaded machine may fit one check more or less in the window.
        expect(after[n]! - before[n]!, `SPUBLISH on master ${n} over ${PERIODS} periods`).to.be.within(1, PERIODS + 1);
      }
      expect(waiterLocks.stats().subscriberErrors).to.equal(0);
    } finally {
      stop.abort();
      await Promise.allSettled(waits);
      await Promise.all(leases.map((l) => l.release()));
    }
  });

  // GLIDE bounds a Cluster subscription's confirmation itself (2 s), before the hub's echo bound
  // (2 × linkCheckMs) when linkCheckMs is over 1 s, and says no more when the server refuses it.
  if (ctx.kind === 'cluster' && ctx.clientKind === 'glide') {
    it('a link check whose subscription GLIDE gave up on (its master slow for 2 s) is tried again, and then finds a silent link', async function () {
      this.timeout(90_000);
      const linkCheckMs = 1_500;
      proxy = await proxyCluster(ctx.cluster);
      const { glideCluster } = await import('../support/glide-clients.js');
      // Its calls wait out the stall below (the tests' GLIDE clients give up after 2 s).
      const { nodes: addresses, natMap } = targetThrough(proxy);
      const through = await glideCluster({ addresses, natMap, requestTimeoutMs: 20_000 });
      clients.push(through);
      const holderLocks = open(await ctx.lockRedis());
      const waiterLocks = open(through, linkCheckMs);
      const reported: string[] = [];
      waiterLocks.on('subscriberError', (error) => reported.push(error.message));
      const holder = await holderLocks.lock('slow-echo').acquireWrite();
      // The link check's subscription is held back at the proxy, and everything after it, past GLIDE's 2 s.
      const held = proxy.stallAtCommand({ command: 'ssubscribe', argument: '\necho' });
      const waiting = waiterLocks.lock('slow-echo').acquireWrite({ waitMs: 80_000 });
      let granted: number | undefined;
      waiting.then(
        () => (granted = performance.now()),
        () => undefined,
      );
      await held;
      await eventually('GLIDE gave up on the subscription', () => reported.length > 0, 15_000);
      proxy.resume();
      console.log(`      [${ctx.kind}, ${ctx.clientKind}] the link check's subscription given up: ${JSON.stringify(reported)}`);
      // Tried again at a next check: its echoes go out again.
      const published = proxy.stats.commands.spublish ?? 0;
      await eventually('the link check back', () => (proxy!.stats.commands.spublish ?? 0) > published + 1, 10 * linkCheckMs);
      await eventually('the writer queued', async () => (await holderLocks.inspect('slow-echo')).queue.length === 1, 10_000);
      expect(proxy.silenceSubscribers()).to.be.at.least(1);
      await holder.release();
      const released = performance.now();
      await (await waiting).release();
      const tookMs = (granted ?? performance.now()) - released;
      console.log(`      [${ctx.kind}, ${ctx.clientKind}] then a silent link: granted ${Math.round(tookMs)} ms after the release`);
      expect(tookMs).to.be.below(2 * linkCheckMs + MARGIN_MS);
      // Said as what happened: not confirmed in time, and tried again (not a refusal for good).
      expect(reported[0]).to.match(/^the wake-up link check's subscription was not confirmed .* tried again at the next check/);
    });
  }

  if (ctx.kind === 'standalone') {
    it('a link check refused for a moment (BUSY: another client runs a long script) goes on, and then finds a silent link', async function () {
      this.timeout(60_000);
      proxy = await startFaultProxy({ target: { port: ctx.server.port } });
      const through = await connectLockClient(targetThrough(proxy, ctx.clientKind));
      clients.push(through);
      const holderLocks = open(await ctx.lockRedis());
      const waiterLocks = open(through);
      const admin = ctx.client();
      const threshold = await admin.config('GET', 'busy-reply-threshold');
      const holder = await holderLocks.lock('busy-echo').acquireWrite();
      const waiting = waiterLocks.lock('busy-echo').acquireWrite({ waitMs: 50_000 });
      let granted: number | undefined;
      waiting.then(
        () => (granted = performance.now()),
        () => undefined,
      );
      await eventually('the writer queued', async () => (await holderLocks.inspect('busy-echo')).queue.length === 1, 10_000);
      await eventually('the first echo', () => (proxy!.stats.commands.spublish ?? 0) >= 1, 10_000);
      // Another client's script runs for three checks; past 50 ms the server answers BUSY to every other call.
      const rejected = async () => Number(/^cmdstat_spublish:.*rejected_calls=(\d+)/m.exec(await admin.info('commandstats'))?.[1] ?? 0);
      const rejectedBefore = await rejected();
      await admin.config('SET', 'busy-reply-threshold', '50');
      try {
        const spin = `local t = redis.call('TIME') local from = t[1] * 1e6 + t[2]
          repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - from > tonumber(ARGV[1]) * 1000 return 1`;
        await ctx.client().eval(spin, 0, String(3 * LINK_CHECK_MS));
      } finally {
        await admin.config('SET', 'busy-reply-threshold', threshold[1]!);
      }
      expect(await rejected(), 'an echo refused with BUSY').to.be.above(rejectedBefore);
      // The checks go on: a link silenced now is found, and the waiter woken.
      const published = proxy.stats.commands.spublish ?? 0;
      await eventually('an echo after the script', () => (proxy!.stats.commands.spublish ?? 0) > published, 5 * LINK_CHECK_MS);
      expect(proxy.silenceSubscribers()).to.be.at.least(1);
      await holder.release();
      const released = performance.now();
      await (await waiting).release();
      const tookMs = (granted ?? performance.now()) - released;
      console.log(
        `      [${ctx.kind}, ${ctx.clientKind}] silent link after a BUSY echo: granted ${Math.round(tookMs)} ms after the release`,
      );
      expect(tookMs).to.be.below(NOTICED_MS + MARGIN_MS);
    });

    it('a waiting writer re-checks once its subscription is back after the server restarted', async function () {
      this.timeout(60_000);
      const holderLocks = open(await ctx.lockRedis());
      const waiterLocks = open(await ctx.lockRedis());
      holderLocks.on('lost', () => undefined);
      const holder = await holderLocks.lock('restart').acquireWrite();
      const waiting = waiterLocks.lock('restart').acquireWrite({ waitMs: 50_000 });
      waiting.catch(() => undefined);
      await eventually('the writer queued', async () => (await holderLocks.inspect('restart')).queue.length === 1, 10_000);
      // Its channel and the hub's echo channel subscribed on the server.
      const redis = ctx.client();
      await eventually('subscribed', async () => ((await redis.call('PUBSUB', 'SHARDCHANNELS')) as string[]).length >= 2, 10_000);
      expect(holder.holdId).to.be.a('string'); // its hold goes with the server's data: the lock is free once the server is back
      await ctx.server.restart();
      const back = performance.now();
      await (await waiting).release();
      const tookMs = performance.now() - back;
      console.log(`      [${ctx.kind}, ${ctx.clientKind}] server restarted: granted ${Math.round(tookMs)} ms after it answered again`);
      expect(tookMs).to.be.below(RESTORED_MS);
      expect(waiterLocks.stats().subscriberErrors).to.be.above(0);
    });
  }
});

describe('wake-up subscriber handshake', () => {
  let server: Server;
  const sockets: Socket[] = [];
  before(async () => {
    server = createServer((socket) => sockets.push(socket)); // accepts, and never answers
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('rejects within its bound against a server that accepts and never answers', async function () {
    this.timeout(30_000);
    const port = (server.address() as { port: number }).port;
    const errors: Error[] = [];
    const sub = new RespSubscriber(
      () => ({ addresses: [{ host: '127.0.0.1', port }], password: 'secret' }),
      { message: () => undefined, error: (e) => errors.push(e), lost: () => undefined },
      () => false,
      HANDSHAKE_MS,
    );
    const started = performance.now();
    try {
      const outcome = await sub.subscribe('c').then(
        () => 'subscribed',
        (error: Error) => error.message,
      );
      const tookMs = performance.now() - started;
      expect(outcome).to.equal(
        `the wake-up subscriber could not connect (127.0.0.1:${port}: no answer within ${HANDSHAKE_MS} ms); waiters re-check meanwhile`,
      );
      expect(tookMs).to.be.within(HANDSHAKE_MS - 5, HANDSHAKE_MS + 2_000); // the margin of a loaded machine, as before
    } finally {
      sub.close();
    }
  });

  it('tries the next address when the first one refuses', async function () {
    this.timeout(30_000);
    const redis = await startRedisServer();
    const refused = createServer();
    await new Promise<void>((resolve) => refused.listen(0, '127.0.0.1', resolve));
    const deadPort = (refused.address() as { port: number }).port;
    await new Promise((resolve) => refused.close(resolve));
    const messages: string[] = [];
    const sub = new RespSubscriber(
      () => ({
        addresses: [
          { host: '127.0.0.1', port: deadPort },
          { host: '127.0.0.1', port: redis.port },
        ],
      }),
      { message: (_, m) => messages.push(m), error: () => undefined, lost: () => undefined },
      () => false,
      HANDSHAKE_MS,
    );
    try {
      await sub.subscribe('{c}x');
      const admin = redis.client();
      await admin.spublish('{c}x', 'hello');
      await eventually('the message', () => messages.includes('hello'));
    } finally {
      sub.close();
      await redis.stop();
    }
  });
});

describe('wake-up subscriber that cannot be made', () => {
  it('says why once, by a subscriber error, and its waiters re-check', async () => {
    const errors: Error[] = [];
    let fallbacks = 0;
    let tries = 0;
    const driver = {
      subscriber: () =>
        new RespSubscriber(
          () => {
            tries++;
            return { addresses: [{ host: '127.0.0.1', port: 1 }], unusable: 'the GLIDE client authenticates with IAM' };
          },
          { message: () => undefined, error: (e) => errors.push(e), lost: () => undefined },
          () => false,
          HANDSHAKE_MS,
        ),
    } as unknown as Driver;
    const hub = new WakeupHub([driver], { message: () => undefined, unconfirmed: () => fallbacks++, error: (e) => errors.push(e) });
    try {
      for (const channel of ['{a}', '{b}', '{a}']) (await hub.watch(channel, 1_000)).close();
      expect(errors.map((e) => e.message)).to.deep.equal(['the GLIDE client authenticates with IAM']);
      expect(fallbacks).to.equal(3);
      expect(tries).to.equal(1);
    } finally {
      hub.close();
    }
  });
});

if (selectedClients(ALL_CLIENTS).includes('glide') && selectedTopologies().includes('standalone')) {
  describe('GLIDE wake-up subscriber on one server', () => {
    /** A writer woken by the release's message gets the lock well within this (recheckMs is 60 s). */
    const WOKEN_MS = 2_500;
    const opened: LockClient[] = [];
    const closing: { close(): void }[] = [];
    afterEach(async () => {
      for (const locks of opened.splice(0)) await locks.close();
      for (const c of closing.splice(0)) c.close();
    });

    /** How long after a release a writer waiting on `waiterClient` gets the lock (recheckMs is 60 s). */
    async function wokenWithinBound(holderClient: LockRedisClient, waiterClient: LockRedisClient, resource: string): Promise<number> {
      const holderLocks = new LockClient(holderClient, { recheckMs: RECHECK_MS });
      const waiterLocks = new LockClient(waiterClient, { recheckMs: RECHECK_MS });
      opened.push(holderLocks, waiterLocks);
      return handOver(holderLocks, waiterLocks, resource);
    }

    /** How long after `holderLocks` releases `resource` a writer waiting on `waiterLocks` gets it. */
    async function handOver(holderLocks: LockClient, waiterLocks: LockClient, resource: string): Promise<number> {
      const holder = await holderLocks.lock(resource).acquireWrite();
      const waiting = waiterLocks.lock(resource).acquireWrite({ waitMs: 50_000 });
      await eventually('the writer queued', async () => (await holderLocks.inspect(resource)).queue.length === 1, 10_000);
      await holder.release();
      const released = performance.now();
      await (await waiting).release();
      return performance.now() - released;
    }

    for (const how of ['requirepass', 'ACL SETUSER'] as const) {
      it(`authenticates with the password set by updateConnectionPassword after a rotation (${how})`, async function () {
        this.timeout(60_000);
        const redis = await startRedisServer();
        const admin = redis.client();
        try {
          const username = how === 'ACL SETUSER' ? 'app' : undefined;
          if (username) await admin.call('ACL', 'SETUSER', username, 'on', '>old-secret', '~*', '&*', '+@all');
          else await admin.config('SET', 'requirepass', 'old-secret');
          const { GlideClient } = await import('@valkey/valkey-glide');
          const options = { addresses: [{ host: '127.0.0.1', port: redis.port }], requestTimeout: 2_000 };
          const credentials = { ...(username && { username }), password: 'old-secret' };
          const holder = await GlideClient.createClient({ ...options, credentials });
          const waiter = await GlideClient.createClient({ ...options, credentials });
          closing.push(holder, waiter);
          const holderLocks = new LockClient(holder as never, { recheckMs: RECHECK_MS });
          const waiterLocks = new LockClient(waiter as never, { recheckMs: RECHECK_MS });
          opened.push(holderLocks, waiterLocks);
          // The waiter's subscriber connects with the old password; then the password turns, and the
          // server drops the subscriber connection: the same LockClient must connect again with the new one.
          expect(await handOver(holderLocks, waiterLocks, 'rotate-1')).to.be.below(5_000);
          if (username) {
            await admin.call('ACL', 'SETUSER', username, '>new-secret', '<old-secret');
          } else {
            await admin.auth('old-secret');
            await admin.config('SET', 'requirepass', 'new-secret');
            await admin.auth('new-secret');
          }
          await holder.updateConnectionPassword('new-secret', true);
          await waiter.updateConnectionPassword('new-secret', true);
          await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
          const tookMs = await handOver(holderLocks, waiterLocks, 'rotate-1');
          console.log(`      [standalone, glide] after a password rotation (${how}): granted ${Math.round(tookMs)} ms after the release`);
          expect(tookMs).to.be.below(RESTORED_MS);
        } finally {
          admin.disconnect();
          await redis.stop();
        }
      });
    }

    it('connects past a first listed address that is down', async function () {
      this.timeout(60_000);
      const redis = await startRedisServer();
      const refused = createServer();
      await new Promise<void>((resolve) => refused.listen(0, '127.0.0.1', resolve));
      const deadPort = (refused.address() as { port: number }).port;
      await new Promise((resolve) => refused.close(resolve));
      try {
        const { GlideClient } = await import('@valkey/valkey-glide');
        const holder = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: redis.port }], requestTimeout: 2_000 });
        const waiter = await GlideClient.createClient({
          addresses: [
            { host: '127.0.0.1', port: deadPort },
            { host: '127.0.0.1', port: redis.port },
          ],
          requestTimeout: 2_000,
        });
        closing.push(holder, waiter);
        const tookMs = await wokenWithinBound(holder as never, waiter as never, 'first-down');
        console.log(`      [standalone, glide] first address down: granted ${Math.round(tookMs)} ms after the release`);
        expect(tookMs).to.be.below(WOKEN_MS);
      } finally {
        await redis.stop();
      }
    });

    it("connects through GLIDE's addressResolver, and past a first address that is down", async function () {
      this.timeout(60_000);
      const redis = await startRedisServer();
      try {
        const { GlideClient } = await import('@valkey/valkey-glide');
        const holder = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: redis.port }], requestTimeout: 2_000 });
        const resolved = await GlideClient.createClient({
          addresses: [{ host: 'wakeups.invalid', port: 1 }],
          addressResolver: (host, port) => (host === 'wakeups.invalid' ? ['127.0.0.1', redis.port] : [host, port]),
          requestTimeout: 2_000,
        });
        closing.push(holder, resolved);
        const tookMs = await wokenWithinBound(holder as never, resolved as never, 'resolver');
        console.log(`      [standalone, glide] through addressResolver: granted ${Math.round(tookMs)} ms after the release`);
        expect(tookMs).to.be.below(WOKEN_MS);
      } finally {
        await redis.stop();
      }
    });
  });
}
