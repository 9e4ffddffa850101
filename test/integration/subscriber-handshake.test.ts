// a link that goes silent during the subscriber's
// handshake. The hub notices the silent subscriber link (echo check) and has
// it made again; the new connection is accepted but never answered (the
// silent middlebox still there for that one connection), then the network
// heals for every later connection. The subscriber must be restored (a
// handshake timeout, or the hub's subscribe bound dropping the connection),
// so that a release afterwards wakes the waiter within the documented bound,
// not after recheckMs. ioredis: `ServerSubscriber.reconnect()` does nothing
// unless the connection is 'ready', and ioredis' connectTimeout ends at the
// TCP connect: its ready check (INFO) waits for ever. Every bound here
// derives from the waiter's linkCheckMs (LINK_CHECK_MS): noticed within two
// periods, a handshake (GLIDE) dropped after two, a subscription after four.
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { expect } from 'chai';
import type { LockRedisClient } from '../../src/clients/index.js';
import { LockClient } from '../../src/index.js';
import { disconnect, forEachTopology, NODE_REDIS_IN_CI_AND_GLIDE } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { connectLockClient } from '../support/targets.js';

const RECHECK_MS = 60_000;
/** The waiter's `linkCheckMs`: a fifth of the default, well above an echo's round trip on a loaded machine. */
const LINK_CHECK_MS = 500;
/** A release wakes the restored waiter within this (its subscription is back: at once, by the message). */
const NOTICED_MS = 2 * LINK_CHECK_MS;
/** A loaded machine's margin: in ms, as before linkCheckMs (a stalled event loop does not shrink with the period); far below RECHECK_MS. */
const MARGIN_MS = 3_000;

/** A TCP proxy whose links can be silenced, each on its own, and which can make the next new link silent from the start. */
class SilencingProxy {
  private server!: Server;
  readonly links: { client: Socket; upstream: Socket; silent: boolean; subscriber: boolean }[] = [];
  silenceNext = 0;
  accepted = 0;
  /** `SPUBLISH` commands sent through the proxy (the hub's echoes, on the client's own connection). */
  spublishes = 0;
  port = 0;
  constructor(private readonly target: number) {}
  async start(): Promise<void> {
    this.server = createServer((client) => {
      this.accepted++;
      const upstream = tcpConnect(this.target, '127.0.0.1');
      const link = { client, upstream, silent: this.silenceNext > 0, subscriber: false };
      if (this.silenceNext > 0) this.silenceNext--;
      this.links.push(link);
      client.on('data', (d: Buffer) => {
        const sent = d.toString('latin1');
        if (/ssubscribe/i.test(sent)) link.subscriber = true;
        this.spublishes += sent.match(/\$8\r\nspublish\r\n/gi)?.length ?? 0; // the command's name (a script's source may name it too)
        if (!link.silent) upstream.write(d);
      });
      upstream.on('data', (d: Buffer) => link.silent || client.write(d));
      for (const s of [client, upstream]) s.on('error', () => undefined);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
  }
  silenceSubscribers(): number {
    let n = 0;
    for (const l of this.links) {
      if (!l.subscriber || l.silent || l.client.destroyed) continue;
      l.silent = true;
      n++;
    }
    return n;
  }
  async close(): Promise<void> {
    for (const l of this.links) {
      l.client.destroy();
      l.upstream.destroy();
    }
    await new Promise((resolve) => this.server.close(resolve));
  }
}

forEachTopology('a subscriber link silent during its handshake', { clients: NODE_REDIS_IN_CI_AND_GLIDE }, (ctx) => {
  if (ctx.kind !== 'standalone') return;
  let proxy: SilencingProxy | undefined;
  const opened: LockClient[] = [];
  const clients: LockRedisClient[] = [];
  afterEach(async () => {
    for (const l of opened.splice(0)) await l.close();
    for (const c of clients.splice(0)) disconnect(c);
    await proxy?.close();
    proxy = undefined;
  });

  it('the subscriber is made again past a silent handshake, and a later release wakes the waiter within the bound', async function () {
    this.timeout(90_000);
    proxy = new SilencingProxy(ctx.server.port);
    await proxy.start();
    const through = await connectLockClient({
      kind: 'standalone',
      nodes: [{ host: '127.0.0.1', port: proxy.port }],
      client: ctx.clientKind,
    });
    clients.push(through);
    const holderLocks = new LockClient(await ctx.lockRedis(), { recheckMs: RECHECK_MS, leaseMs: 60_000 });
    const waiterLocks = new LockClient(through, { recheckMs: RECHECK_MS, leaseMs: 60_000, linkCheckMs: LINK_CHECK_MS });
    opened.push(holderLocks, waiterLocks);
    const holder = await holderLocks.lock('hs').acquireWrite();
    const waiting = waiterLocks.lock('hs').acquireWrite({ waitMs: 80_000 });
    waiting.catch(() => undefined);
    await eventually('the writer queued', async () => (await holderLocks.inspect('hs')).queue.length === 1, 10_000);
    await eventually('subscribed through the proxy', () => proxy!.links.some((l) => l.subscriber), 10_000);
    // The echo check running: a second echo is sent only once the first came back (else the link is lost).
    await eventually('two echoes sent', () => proxy!.spublishes >= 2, 10_000);
    // The next connection (the subscriber made again) is silent from its start; later ones are not.
    proxy.silenceNext = 1;
    const acceptedBefore = proxy.accepted;
    const linksBefore = proxy.links.length;
    expect(proxy.silenceSubscribers()).to.be.at.least(1);
    // Noticed (within two periods), made again into the silent connection, then made again past it.
    await eventually('a new connection made', () => proxy!.accepted > acceptedBefore, 15_000);
    await eventually(
      'subscribed again past the silent handshake',
      () => proxy!.links.slice(linksBefore).some((l) => !l.silent && l.subscriber),
      40_000,
    );
    await holder.release();
    const released = performance.now();
    const lease = await waiting;
    const tookMs = performance.now() - released;
    console.log(
      `      [${ctx.kind}, ${ctx.clientKind}] silent handshake: granted ${Math.round(tookMs)} ms after the release; connections ${proxy.accepted - acceptedBefore} since`,
    );
    await lease.release();
    expect(tookMs).to.be.below(NOTICED_MS + MARGIN_MS);
  });
});
