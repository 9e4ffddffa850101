/**
 * Every operation takes effect at most once when the network drops a reply:
 * a fault proxy between the library's ioredis client and Redis closes the
 * connection right after the server replied to one script, and ioredis
 * resends it on the new connection (autoResendUnfulfilledCommands, on by
 * default). The proxy itself is checked first, with plain commands. Then
 * replies that land late: a grant past its acquire's bound, or past its
 * own lease, and an extension past the lease's local deadline.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { LockRedisClient } from '../../src/clients/index.js';
import {
  AcquireAbortedError,
  ClientClosedError,
  type Lease,
  LockClient,
  type LockClientOptions,
  LockNotHeldError,
  RedisUnavailableError,
} from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import {
  type ClusterFaultProxy,
  type FaultProxy,
  proxyCluster,
  type RedisMastersHandle,
  startFaultProxy,
  startRedisMasters,
} from '../../src/testing/index.js';
import { ALL_CLIENTS, disconnect, forEachTopology, quit } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { isGlide } from '../support/glide-clients.js';
import { taggedLegacyKeys } from '../support/old-scripts.js';
import { totalKeys } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';
import { connectLockClient, targetThrough } from '../support/targets.js';

/** The storage modes on one server or a Cluster; redlock mode has its own block below. */
const MODES = ['hash', 'legacy', 'bridge'] as const;

forEachTopology('exactly once, with replies dropped by the network', { clients: ALL_CLIENTS }, (ctx) => {
  let proxy: FaultProxy | ClusterFaultProxy;
  let through: LockRedisClient; // the library's client, of the suite's library: through the proxy
  let direct: RedisClient; // another process's view: straight to Redis
  const clients: LockRedisClient[] = [];

  beforeEach(async () => {
    direct = ctx.client();
    proxy = ctx.kind === 'standalone' ? await startFaultProxy({ target: { port: ctx.server.port } }) : await proxyCluster(ctx.cluster);
    through = await connectLockClient(targetThrough(proxy, ctx.clientKind)); // dropped connections are the test's doing: quiet
    clients.push(through);
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) disconnect(c);
    await proxy.close();
  });

  /** Options of a LockClient in `mode`; legacy key names share the lock's slot on a Cluster. */
  const modeOptions = (mode: (typeof MODES)[number]): LockClientOptions =>
    mode !== 'hash' && ctx.kind === 'cluster' ? { mode, legacyKeys: taggedLegacyKeys } : { mode };

  /**
   * Runs `op` while the reply to the next command that names `argument` (a
   * lock's state key: the next script call on that lock) is dropped; ioredis
   * resends it.
   */
  const dropping = async <T>(argument: string, op: () => Promise<T>): Promise<T> => {
    const dropped = proxy.dropAfterReply({ argument });
    const result = await op();
    await dropped;
    return result;
  };

  if (ctx.clientKind === 'ioredis') {
    it('the proxy drops a reply after the server ran the command, and ioredis resends it', async () => {
      const redis = through as RedisClient;
      await redis.set('n', '0');
      const dropped = proxy.dropAfterReply({ command: 'incr' });
      expect(await redis.incr('n')).to.equal(2); // the client sees only the resend's reply
      await dropped;
      expect(await direct.get('n')).to.equal('2'); // the server ran it twice
      expect(proxy.stats.drops).to.equal(1);
    });
  } else {
    it(`the proxy drops a reply after the server ran the command, and ${ctx.clientKind} fails it (no resend)`, async () => {
      // node-redis' sendCommand: (args) on one server, (firstKey, isReadonly, args) on a Cluster; GLIDE's customCommand.
      const send = (args: string[]) =>
        isGlide(through)
          ? (through as unknown as { customCommand(args: string[]): Promise<unknown> }).customCommand(args)
          : ctx.kind === 'cluster'
            ? (through as unknown as { sendCommand(key: string, ro: boolean, args: string[]): Promise<unknown> }).sendCommand(
                args[1]!,
                false,
                args,
              )
            : (through as unknown as { sendCommand(args: string[]): Promise<unknown> }).sendCommand(args);
      await send(['SET', 'n', '0']);
      const dropped = proxy.dropAfterReply({ command: 'incr' });
      expect(await rejection(send(['INCR', 'n']))).to.be.instanceOf(Error);
      await dropped;
      expect(await direct.get('n')).to.equal('1'); // the server ran it once; the client does not know
      expect(proxy.stats.drops).to.equal(1);
    });

    it(`a ${ctx.clientKind} client closed with a script call on the wire: ClientClosedError, not a resend`, async () => {
      const locks = new LockClient(through, { redisTimeoutMs: 10_000 });
      await (await locks.lock('destroyed').acquireWrite()).release(); // connected, script loaded
      proxy.delay(500); // each way: the call stays on the wire
      const scriptsSent = () => (proxy.stats.commands.evalsha ?? 0) + (proxy.stats.commands.eval ?? 0);
      const sentBefore = scriptsSent();
      const acquiring = rejection(locks.lock('destroyed').acquireWrite({ waitMs: 10_000 }));
      await eventually('the acquire to be on the wire', async () => scriptsSent() > sentBefore);
      disconnect(through);
      expect(await acquiring).to.be.instanceOf(ClientClosedError);
      await locks.close();
    });
  }

  // The proxy's own behaviour: once is enough (ioredis' commands).
  if (ctx.clientKind === 'ioredis')
    it("the proxy's delay is a latency: commands sent close together each come back a round trip later, not one after another", async () => {
      const through_ = through as RedisClient;
      await through_.ping(); // connected (on a Cluster: the slots are known)
      proxy.delay(200);
      // Eight commands 5 ms apart, eight chunks each way: one after another they would take 8 x 200 ms and more.
      const started = performance.now();
      const replies: Promise<number>[] = [];
      for (let i = 0; i < 8; i++) {
        replies.push(through_.incr('delayed').then(() => performance.now() - started));
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const times = await Promise.all(replies);
      proxy.delay(0);
      expect(Math.min(...times), 'the first reply').to.be.at.least(390); // 200 ms each way
      // Queued one after another, the replies would come at least 7 x 200 ms apart; as a latency, about
      // 35 ms apart (as sent). Half the queue's spread leaves room for a loaded machine.
      expect(Math.max(...times) - Math.min(...times), 'from the first reply to the last').to.be.below(700);
    });

  for (const mode of MODES) {
    it(`a resent inner release leaves the owner's outer write hold, and nobody else gets in (${mode} mode)`, async () => {
      const locks = new LockClient(through, modeOptions(mode));
      const others = new LockClient(direct, modeOptions(mode));
      const outer = await locks.lock('nested').acquireWrite();
      const inner = await locks.lock('nested').acquireWrite({ owner: outer.token }); // as a nested withWrite does
      await dropping(locks.lock(inner.resource).keys.state, () => inner.release());
      expect(outer.held).to.equal(true);
      expect(await others.lock('nested').tryAcquireWrite(), 'another writer').to.equal(null);
      expect(await others.lock('nested').tryAcquireRead(), 'another reader').to.equal(null);
      expect((await others.inspect('nested')).writer).to.deep.include({ owner: outer.token, holds: 1 });
      await outer.release();
      expect(await totalKeys(direct)).to.equal(0);
      await locks.close();
      await others.close();
    });
  }

  it('a resent reentrant read release leaves the outer read hold, and a waiting writer still waits', async () => {
    const locks = new LockClient(through);
    const others = new LockClient(direct, { recheckMs: 50 });
    const outer = await locks.lock('reads').acquireRead({ owner: 'reader' });
    const inner = await locks.lock('reads').acquireRead({ owner: 'reader' });
    const writer = others.lock('reads').acquireWrite({ waitMs: 10_000 });
    await eventually('the writer to wait', async () => (await others.inspect('reads')).queue.length === 1);
    await dropping(locks.lock(inner.resource).keys.state, () => inner.release());
    expect((await others.inspect('reads')).readers).to.have.length(1);
    expect((await others.inspect('reads')).readers[0]).to.include({ owner: 'reader', holds: 1 });
    await outer.release();
    await (await writer).release();
    await locks.close();
    await others.close();
  });

  for (const mode of MODES) {
    it(`a resent acquire counts one hold: after release the lock is free at once (${mode} mode)`, async () => {
      const locks = new LockClient(through, modeOptions(mode));
      const others = new LockClient(direct, modeOptions(mode));
      const lock = locks.lock('once');
      // The acquire's hold id is made inside acquire(): drop the reply of the next script naming the resource's key.
      const lease = await dropping(lock.keys.state, () => lock.acquireWrite());
      expect(proxy.stats.drops).to.equal(1);
      expect((await others.inspect('once')).writer).to.deep.include({ owner: lease.token, holds: 1 });
      await lease.release();
      const next = await others.lock('once').tryAcquireWrite();
      expect(next, 'the lock is free right after the release').to.not.equal(null);
      await next!.release();
      expect(await totalKeys(direct)).to.equal(0);
      await locks.close();
      await others.close();
    });

    it(`a resent release of an owner's last hold finds it gone: LockNotHeldError, and nothing stays locked (${mode} mode)`, async () => {
      const locks = new LockClient(through, modeOptions(mode));
      const lease: Lease = await locks.lock('last').acquireWrite();
      const error = await dropping(locks.lock(lease.resource).keys.state, () => rejection(lease.release()));
      expect(error).to.be.instanceOf(LockNotHeldError);
      expect(await totalKeys(direct)).to.equal(0);
      await locks.close();
    });
  }

  it('a resent acquire of a waiting writer that was granted meanwhile takes the lock once', async () => {
    const locks = new LockClient(through, { recheckMs: 5_000 });
    const others = new LockClient(direct);
    // Held by a holder that stops without releasing (a release would hand the lock over, with no try to
    // drop): the waiter's own try takes the lock once the holder's lease lapsed.
    await others.lock('queued').acquireWrite({ leaseMs: 300 });
    // The grant's reply, the bare fence (an integer), is dropped; the refusals before it pass.
    const granted = proxy.dropAfterReply({ argument: locks.lock('queued').keys.state, reply: ':' });
    const lease = await locks.lock('queued').acquireWrite({ waitMs: 10_000 });
    await granted;
    expect((await others.inspect('queued')).writer).to.deep.include({ owner: lease.token, holds: 1 });
    await lease.release();
    expect(await totalKeys(direct)).to.equal(0);
    await locks.close();
    await others.close();
  });
  /**
   * A LockClient through the proxy whose next write acquire of `resource` is on the wire (its
   * grant's reply ~200 ms away), and that acquire's rejection.
   */
  const acquireOnTheWire = async (resource: string, signal?: AbortSignal) => {
    const locks = new LockClient(through, { redisTimeoutMs: 10_000 });
    const lock = locks.lock(resource);
    await (await lock.acquireWrite()).release(); // connected, script loaded
    proxy.delay(100); // each way: the grant's reply comes ~200 ms after the call
    const scriptsSent = () => (proxy.stats.commands.evalsha ?? 0) + (proxy.stats.commands.eval ?? 0);
    const sentBefore = scriptsSent();
    const acquiring = rejection(lock.acquireWrite({ waitMs: 10_000, ...(signal ? { signal } : {}) }));
    await eventually('the acquire to be on the wire', async () => scriptsSent() > sentBefore);
    return { locks, acquiring };
  };

  it('an acquire aborted while its call is on the wire: close() gives the grant back before the client quits', async () => {
    const stop = new AbortController();
    const { locks, acquiring } = await acquireOnTheWire('aborted', stop.signal);
    stop.abort();
    expect(await acquiring).to.be.instanceOf(AcquireAbortedError);
    // As a process that stops does: close the LockClient, then quit the Redis client at once.
    await locks.close();
    await quit(through);
    expect(await totalKeys(direct), 'keys left in Redis').to.equal(0);
  });

  it('close() with an acquire on the wire settles once its grant is given back: quitting right after leaves nothing held', async () => {
    const { locks, acquiring } = await acquireOnTheWire('closing');
    // As a process that shuts down does: close the LockClient, then quit the Redis client at once.
    await locks.close();
    await quit(through);
    expect(await totalKeys(direct), 'keys left in Redis').to.equal(0);
    expect(await acquiring).to.be.instanceOf(ClientClosedError);
  });

  // Both wait behind the replies still delayed with a command on the lock's connection (ioredis').
  if (ctx.clientKind === 'ioredis')
    it("a grant that lands after its acquire's bound and lease is given back, also to an owner whose outer hold renews", async () => {
      const locks = new LockClient(through, { redisTimeoutMs: 300 });
      const others = new LockClient(direct);
      const lock = locks.lock('late');
      const outer = await lock.acquireWrite(); // auto-renewed: the owner's deadline keeps moving
      const holds = async () => (await others.lock('late').inspect()).writer?.holds ?? 0;
      proxy.delay(800); // each way: the inner grant lands ~800 ms after the call, its reply ~1,600 ms: past 300 + 1,000 ms
      const late = await rejection(lock.tryAcquireWrite({ owner: outer.token, leaseMs: 1000 }));
      expect(late).to.be.instanceOf(RedisUnavailableError);
      await eventually('the late grant to land', async () => (await holds()) === 2, 10_000);
      await eventually('the late grant to be given back', async () => (await holds()) === 1, 10_000);
      proxy.delay(0);
      await (through as RedisClient).exists(lock.keys.state); // on the lock's connection, behind every reply still delayed on its way
      expect(outer.held).to.equal(true);
      await outer.release();
      expect(await others.lock('late').tryAcquireWrite(), 'the lock is free once the outer hold is released').to.not.equal(null);
      await locks.close();
      await others.close();
    });

  if (ctx.clientKind === 'ioredis')
    it('a lease lost by its clock while its extension was on the wire is given back when that extension lands', async () => {
      const locks = new LockClient(through, { redisTimeoutMs: 5_000 });
      const others = new LockClient(direct);
      const lease = await locks.lock('overtaken').acquireWrite({ leaseMs: 1_000 });
      proxy.delay(700); // each way: the extension reaches Redis in time, its reply comes after the local deadline
      const extending = lease.extend(60_000).catch(() => undefined);
      await eventually('the lease to be reported lost', () => !lease.held);
      // The extension landed and made the lock last a minute; nobody holds it: it must be given back.
      await eventually('the lock to be free', async () => (await others.lock('overtaken').inspect()).mode === 'free', 5_000);
      await extending;
      proxy.delay(0);
      await locks.close();
      await others.close();
    });

  // A grant whose reply lands after its lease ran out is no lease: Redis may have let another owner
  // in meanwhile. Found by the fault suite: a writer's repeated grant of a hold a release had handed
  // it came back behind a 1.1 s stall, and overlapped the readers Redis let in after it expired.
  describe('grants whose reply lands after their lease ran out', () => {
    /** A fixed lease (not renewed), short enough to run out while its grant is held back. */
    const LEASE_MS = 300;
    const closing: LockClient[] = [];
    afterEach(async () => {
      for (const locks of closing.splice(0)) await locks.close();
    });

    /** A LockClient through the proxy whose next grant on `resource` (a bare fence) is held back until Redis let it expire. */
    const heldBackUntilExpired = async (resource: string) => {
      const locks = new LockClient(through);
      const others = new LockClient(direct);
      closing.push(locks, others);
      const lock = locks.lock(resource);
      await (await lock.acquireWrite()).release(); // connected, script loaded
      const held = proxy.stallAtReply({ argument: lock.keys.state, reply: ':' });
      const expired = async () => {
        await held;
        await eventually('Redis to let the held-back grant expire', async () => (await totalKeys(direct)) === 0);
      };
      return { lock, others, expired };
    };

    if (ctx.clientKind === 'ioredis')
      it('the proxy holds a reply back from stallAtReply: the server ran the command, its reply lands at resume()', async () => {
        const redis = through as RedisClient;
        const held = proxy.stallAtReply({ command: 'incr' });
        let answered = false;
        const late = redis.incr('n').then((n) => {
          answered = true;
          return n;
        });
        await held;
        expect(await direct.get('n'), 'run by the server').to.equal('1');
        expect(answered, 'answered during the stall').to.equal(false);
        proxy.resume();
        expect(await late).to.equal(1);
      });

    for (const mode of ['read', 'write'] as const) {
      it(`a ${mode} acquire tries again and resolves with the lease Redis holds now`, async () => {
        const { lock, others, expired } = await heldBackUntilExpired(`late-${mode}`);
        const acquiring = mode === 'read' ? lock.acquireRead({ leaseMs: LEASE_MS }) : lock.acquireWrite({ leaseMs: LEASE_MS });
        await expired();
        proxy.resume();
        const lease = await acquiring;
        expect(lease.signal.aborted, 'the lease is over as it is returned').to.equal(false);
        const info = await others.inspect(lock.resource);
        const holders = mode === 'write' ? [info.writer] : info.readers;
        expect(holders.map((h) => h?.owner)).to.deep.equal([lease.token]);
        expect(info.fence).to.equal(lease.fence);
        await lease.release();
        expect(await totalKeys(direct)).to.equal(0);
      });
    }

    it('a try finds the lock taken by another owner meanwhile: null, and nothing of its own left', async () => {
      const { lock, others, expired } = await heldBackUntilExpired('late-try');
      const trying = lock.tryAcquireWrite({ leaseMs: LEASE_MS });
      await expired();
      const other = await others.lock(lock.resource).acquireWrite();
      proxy.resume();
      expect(await trying).to.equal(null);
      const info = await others.inspect(lock.resource);
      expect(info.writer?.owner).to.equal(other.token);
      expect(info.readers).to.deep.equal([]);
      await other.release();
      expect(await totalKeys(direct)).to.equal(0);
    });
  });
});

describe('exactly once in redlock mode, with replies dropped by the network [3 independent servers]', function () {
  this.timeout(30_000);
  let masters: RedisMastersHandle;
  let proxies: FaultProxy[];
  let direct: Redis[]; // another process's view: straight to each server
  let through: Redis[]; // the library's clients: each through its server's proxy

  before(async function () {
    this.timeout(60_000);
    masters = await startRedisMasters(3);
  });
  after(async () => {
    await masters?.stop();
  });
  beforeEach(async () => {
    proxies = await Promise.all(masters.servers.map((server) => startFaultProxy({ target: { port: server.port } })));
    through = proxies.map((proxy) => new Redis({ host: proxy.host, port: proxy.port }));
    for (const c of through) c.on('error', () => undefined); // the dropped connections are the test's doing
    direct = masters.clients();
  });
  afterEach(async () => {
    for (const c of [...through, ...direct]) c.disconnect();
    await Promise.all(proxies.map((proxy) => proxy.close()));
    await masters.flush();
  });

  /** The replies to the next script call naming `argument` on two of the three servers are dropped; ioredis resends both. */
  const dropOnMajority = (argument: string) => Promise.all(proxies.slice(0, 2).map((proxy) => proxy.dropAfterReply({ argument })));
  const keysLeft = async () => (await Promise.all(direct.map((c) => c.dbsize()))).reduce((a, b) => a + b, 0);

  it("a resent inner release on a majority of servers leaves the owner's outer write hold", async () => {
    const locks = new LockClient(through, { mode: 'redlock' });
    const others = new LockClient(direct, { mode: 'redlock' });
    const outer = await locks.lock('nested').acquireWrite();
    const inner = await locks.lock('nested').acquireWrite({ owner: outer.token });
    const dropped = dropOnMajority(locks.lock('nested').keys.state);
    await inner.release();
    await dropped;
    expect(outer.held).to.equal(true);
    expect(await others.lock('nested').tryAcquireWrite(), 'another writer').to.equal(null);
    await outer.release();
    await eventually('every server to be empty', async () => (await keysLeft()) === 0);
    await locks.close();
    await others.close();
  });

  it("a nested read's release retried after an unknown outcome leaves the owner's write: nobody else gets in", async () => {
    const locks = new LockClient(through, { mode: 'redlock', redisTimeoutMs: 300 });
    const others = new LockClient(direct, { mode: 'redlock' });
    const write = await locks.lock('retried').acquireWrite();
    const read = await locks.lock('retried').acquireRead({ owner: write.token });
    const { state } = locks.lock('retried').keys;
    for (const proxy of proxies) proxy.delay(400); // each way: the release runs on every server, its reply comes too late
    expect(await rejection(read.release())).to.be.instanceOf(RedisUnavailableError);
    await eventually('the read hold to be released on every server', async () =>
      (await Promise.all(direct.map((c) => c.hexists(state, `r:${write.token}`)))).every((held) => held === 0),
    );
    for (const proxy of proxies) proxy.delay(0);
    await Promise.all(through.map((c) => c.exists(state))); // behind the replies still delayed on their way
    await read.release(); // the documented retry: the hold is already gone on every server
    await Promise.all(through.map((c) => c.exists(state))); // behind whatever the retry sent
    expect(write.held).to.equal(true);
    expect(await others.lock('retried').tryAcquireWrite(), 'another writer').to.equal(null);
    await write.release();
    await eventually('every server to be empty', async () => (await keysLeft()) === 0);
    await locks.close();
    await others.close();
  });

  it('a resent acquire on a majority of servers counts one hold: after release the lock is free at once', async () => {
    const locks = new LockClient(through, { mode: 'redlock' });
    const others = new LockClient(direct, { mode: 'redlock' });
    const lock = locks.lock('once');
    const dropped = dropOnMajority(lock.keys.state);
    const lease = await lock.acquireWrite();
    await dropped;
    await lease.release();
    const next = await others.lock('once').tryAcquireWrite();
    expect(next, 'the lock is free right after the release').to.not.equal(null);
    await next!.release();
    await eventually('every server to be empty', async () => (await keysLeft()) === 0);
    await locks.close();
    await others.close();
  });
});
