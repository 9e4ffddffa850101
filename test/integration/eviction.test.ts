/**
 * The eviction risk, said at first use: a master with `maxmemory` set and a
 * `maxmemory-policy` other than `noeviction` may evict a held lock's key, and
 * a second owner can then take the lock while the first still holds it. The
 * server check reads both from `INFO memory` on every master, and tells the
 * process (a warning with its code, once per master and policy), every
 * LockClient (an event, `stats()`, `inspect`) and the CLI; `onEvictionRisk`
 * turns it into a refusal or silences it. Against real servers whose policy
 * each test sets (`CONFIG SET`, restored after), on both topologies and every
 * client library; the danger itself on a server of its own.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { forgetEvictionWarnings } from '../../src/backends/eviction.js';
import { ioredisCli, withBounds } from '../../src/cli/cli-redis.js';
import type { CliIO } from '../../src/cli/command.js';
import { look } from '../../src/cli/commands/top.js';
import { main } from '../../src/cli/main.js';
import type { LockRedisClient } from '../../src/clients/index.js';
import { ClientClosedError, type EvictionRisk, EvictionRiskError, Lease, LockClient, LockLostError } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import {
  type FaultProxy,
  type RedisMastersHandle,
  type RedisServerHandle,
  startFaultProxy,
  startRedisMasters,
  startRedisServer,
} from '../../src/testing/index.js';
import {
  ALL_CLIENTS,
  disconnect,
  forEachTopology,
  ONE_NODE_REDIS,
  quit,
  selectedClients,
  type TopologyContext,
} from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { suiteLockClients } from '../support/lock-clients.js';
import { commandCalls, masters, scriptCalls, totalKeys } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';
import { connectLockClient, targetThrough } from '../support/targets.js';

const CODE = 'RWLOCK_EVICTION_RISK';
const MB_100 = 100 * 2 ** 20;

/** The process warnings of the library's code, from the test's start (the printing to stderr stays Node's). */
function processWarnings(): Error[] {
  const warnings: Error[] = [];
  const listen = (warning: Error & { code?: string }) => void (warning.code === CODE && warnings.push(warning));
  beforeEach(() => {
    warnings.length = 0;
    forgetEvictionWarnings(); // each test sees its own
    process.on('warning', listen);
  });
  afterEach(() => {
    process.off('warning', listen);
  });
  return warnings;
}

/** Lets warnings emitted by now reach their listeners (Node emits them on the next tick). */
const settled = () => new Promise((resolve) => setImmediate(resolve));

/** Sets `maxmemory` and `maxmemory-policy` on every master of `redis`. */
async function configure(redis: RedisClient, maxmemory: string, policy: string): Promise<void> {
  for (const node of await masters(redis)) await node.config('SET', 'maxmemory', maxmemory, 'maxmemory-policy', policy);
}

/** The `evictionRisk` events of `locks`, from now. */
function heardBy(locks: LockClient): EvictionRisk[] {
  const heard: EvictionRisk[] = [];
  locks.on('evictionRisk', (risk) => heard.push(risk));
  return heard;
}

/**
 * `warns` and `refuses` (`onEvictionRisk: 'refuse'`) each take and release `resource`, and nothing is
 * said: no warning, no event, no risk in `inspect()` or `stats()`.
 */
async function saysNothing(warnings: readonly Error[], warns: LockClient, refuses: LockClient, resource: string): Promise<void> {
  const heard = [heardBy(warns), heardBy(refuses)];
  await (await warns.lock(resource).acquireWrite()).release();
  await (await refuses.lock(resource).acquireWrite()).release();
  expect((await warns.inspect(resource)).evictionRisk).to.equal(undefined);
  await settled();
  expect(warnings).to.have.length(0);
  expect(heard.flat()).to.have.length(0);
  expect(warns.stats().evictionRisks).to.deep.equal([]);
}

/**
 * Runs `during` with the process's uncaught exceptions caught (mocha's own
 * listener, which fails the test, set aside meanwhile): those thrown until it
 * settled, and the tick after.
 */
async function uncaughtDuring(during: () => Promise<void>): Promise<unknown[]> {
  const thrown: unknown[] = [];
  const caught = (error: unknown) => void thrown.push(error);
  const mocha = process.listeners('uncaughtException');
  process.removeAllListeners('uncaughtException');
  process.on('uncaughtException', caught);
  try {
    await during();
    await settled();
  } finally {
    process.off('uncaughtException', caught);
    for (const listener of mocha) process.on('uncaughtException', listener);
  }
  return thrown;
}

/** The ports of the masters, as the risks name them (`host:port`). */
async function masterPorts(redis: RedisClient): Promise<string[]> {
  return (await masters(redis)).map((node) => String(node.options.port)).sort();
}
const portsOf = (risks: readonly EvictionRisk[]) => risks.map((risk) => risk.node.replace(/^.*:/, '')).sort();

forEachTopology('eviction risk', { clients: ALL_CLIENTS }, (ctx) => {
  const clients = suiteLockClients(ctx);
  const warnings = processWarnings();
  afterEach(async () => {
    await configure(ctx.client(), '0', 'noeviction'); // the shared servers' own settings
  });

  it('warns the process once per master and policy, with its code; tells every LockClient; stats() and inspect() show it', async () => {
    const { redis } = clients;
    await configure(redis, '100mb', 'allkeys-lru');
    const ports = await masterPorts(redis);
    const locks = clients.open();
    const heard = heardBy(locks);
    await (await locks.lock('evict:{1}').acquireWrite()).release();
    await eventually('an event per master', () => heard.length === ports.length);
    await eventually('a warning per master', () => warnings.length === ports.length);
    expect(portsOf(heard)).to.deep.equal(ports);
    for (const warning of warnings) {
      expect(warning.name).to.equal('RWLockEvictionWarning');
      expect(warning.message)
        .to.match(/^redis-rwlock: the Redis master \S+ has maxmemory 100mb and maxmemory-policy allkeys-lru, /)
        .and.to.match(/another owner can then take the lock while its holder still holds it/);
      expect((warning as Error & { detail?: string }).detail)
        .to.match(/CONFIG SET maxmemory-policy noeviction/)
        .and.to.match(/even the fence keys of fenced writes \(fencedSet\) may be evicted/);
    }
    expect(locks.stats().evictionRisks.map((r) => [r.policy, r.maxmemoryBytes])).to.deep.equal(ports.map(() => ['allkeys-lru', MB_100]));
    const info = await locks.inspect('evict:{1}');
    expect(info.evictionRisk).to.include({ policy: 'allkeys-lru', maxmemoryBytes: MB_100 });

    // Another LockClient on the same Redis client, and one on a Redis client of its own: each hears
    // of the masters through its event, and the process is not warned again.
    const ownRedis = await ctx.lockRedis();
    for (const on of [clients.lockRedis, ownRedis]) {
      const other = clients.open({}, on);
      const heardOther = heardBy(other);
      await (await other.lock('evict:{2}').acquireWrite()).release();
      await other.inspect('evict:{2}'); // its client's masters read
      await eventually('the other LockClient told', () => heardOther.length === ports.length);
      expect(portsOf(other.stats().evictionRisks)).to.deep.equal(ports);
    }
    await settled();
    expect(warnings).to.have.length(ports.length);
    expect(heard, 'told once per master and policy').to.have.length(ports.length);
    expect(await totalKeys(redis)).to.equal(0);
  });

  it('a LockClient whose evictionRisk listener throws keeps no other LockClient from hearing of every master', async () => {
    const { redis } = clients;
    await configure(redis, '100mb', 'allkeys-lru');
    const ports = await masterPorts(redis);
    const faulty = clients.open();
    faulty.on('evictionRisk', () => {
      throw new Error('a faulty listener');
    });
    const locks = clients.open({ onEvictionRisk: 'refuse' });
    const heard = heardBy(locks);
    const thrown = await uncaughtDuring(async () => {
      await (await faulty.lock('evict:{1}').acquireWrite()).release();
      await eventually('the other LockClient told of every master', () => heard.length === ports.length);
    });
    expect(portsOf(heard)).to.deep.equal(ports);
    expect(portsOf(locks.stats().evictionRisks)).to.deep.equal(ports);
    expect(await rejection(locks.lock('evict:{1}').tryAcquireWrite())).to.be.instanceOf(EvictionRiskError);
    // The listener's error is the process's, as a listener's of any background event: once per master it was told of.
    expect(thrown.map((error) => (error as Error).message)).to.deep.equal(ports.map(() => 'a faulty listener'));
    await settled();
    expect(warnings).to.have.length(ports.length);
  });

  it("onEvictionRisk: 'ignore' warns nothing; its event and stats() still say it", async () => {
    const { redis } = clients;
    await configure(redis, '100mb', 'volatile-lru');
    const ports = await masterPorts(redis);
    const locks = clients.open({ onEvictionRisk: 'ignore' });
    const heard = heardBy(locks);
    await (await locks.lock('evict:{1}').acquireWrite()).release();
    expect((await locks.inspect('evict:{1}')).evictionRisk).to.include({ policy: 'volatile-lru' });
    await eventually('an event per master', () => heard.length === ports.length);
    expect(portsOf(locks.stats().evictionRisks)).to.deep.equal(ports);
    await settled();
    expect(warnings).to.have.length(0);
  });

  it("onEvictionRisk: 'refuse' rejects every acquire with EvictionRiskError, sends no script and leaves no key", async () => {
    const { redis } = clients;
    await configure(redis, '100mb', 'volatile-ttl');
    const locks = clients.open({ onEvictionRisk: 'refuse' });
    const scriptsBefore = await scriptCalls(redis);
    let ran = false;
    const attempts = [
      () => locks.lock('evict:{3}').acquireWrite({ waitMs: 200 }),
      () => locks.lock('evict:{3}').acquireRead({ waitMs: 200 }),
      () => locks.lock('evict:{3}').tryAcquireWrite(),
      () => locks.withWrite('evict:{3}', () => void (ran = true)),
      () => locks.acquireAll([{ resource: 'evict:{3}', mode: 'write' }]),
    ];
    for (const attempt of attempts) {
      const error = await rejection(attempt());
      expect(error).to.be.instanceOf(EvictionRiskError);
      const refusal = error as EvictionRiskError;
      expect(refusal.code).to.equal(CODE);
      expect(refusal).to.include({ resource: 'evict:{3}', policy: 'volatile-ttl', maxmemoryBytes: MB_100 });
      expect(refusal.message)
        .to.match(/^refused to acquire the (write|read) lock on "evict:\{3\}", and wrote nothing: the Redis master \S+ has maxmemory 100mb/)
        .and.to.match(/CONFIG SET maxmemory-policy noeviction/)
        .and.to.match(/onEvictionRisk: 'warn' or 'ignore'$/);
    }
    expect(ran).to.equal(false);
    expect(await totalKeys(redis)).to.equal(0);
    expect((await scriptCalls(redis)) - scriptsBefore, 'script calls').to.equal(0);
    expect(locks.stats().failures).to.equal(attempts.length);
    await settled();
    expect(warnings, 'the refusal says it, not a warning').to.have.length(0);
  });

  for (const [maxmemory, policy] of [
    ['100mb', 'noeviction'],
    ['0', 'allkeys-lru'],
  ] as const) {
    it(`says nothing with maxmemory ${maxmemory} and maxmemory-policy ${policy}, and 'refuse' acquires`, async () => {
      const { redis } = clients;
      await configure(redis, maxmemory, policy);
      await saysNothing(warnings, clients.open(), clients.open({ onEvictionRisk: 'refuse' }), 'evict:{4}');
    });
  }

  it('sees a policy changed while its connections were dropped: the reconnect reads it again', async () => {
    const { redis } = clients;
    await configure(redis, '100mb', 'noeviction');
    const locks = clients.open({ onEvictionRisk: 'refuse' }, await ctx.lockRedis());
    const heard = heardBy(locks);
    const lock = locks.lock('evict:{5}');
    await (await lock.acquireWrite()).release();
    await locks.inspect('evict:{5}');
    expect(heard).to.have.length(0);

    await configure(redis, '100mb', 'volatile-lru');
    for (const node of await masters(redis)) {
      // GLIDE reconnects without a word: what a restart or failover also does, losing the scripts, shows it there.
      if (ctx.clientKind === 'glide') await node.script('FLUSH');
      await node.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    }
    await eventually(
      'acquires refused',
      async () => {
        const outcome = await lock.tryAcquireWrite().catch((error: unknown) => error);
        if (outcome instanceof Lease) await outcome.release();
        return outcome instanceof EvictionRiskError;
      },
      15_000,
      50,
    );
    expect(heard.map((risk) => risk.policy)).to.include('volatile-lru');
    expect(await totalKeys(redis)).to.equal(0);
  });

  it('sees a policy changed on a node that lost its scripts (a restart, a failover), and warns again', async () => {
    const { redis } = clients;
    await configure(redis, '100mb', 'allkeys-lru');
    const ports = await masterPorts(redis);
    const locks = clients.open();
    const heard = heardBy(locks);
    await (await locks.lock('evict:{6}').acquireWrite()).release();
    await locks.inspect('evict:{6}');
    await eventually('a warning per master', () => warnings.length === ports.length);
    await configure(redis, '100mb', 'allkeys-random');
    for (const node of await masters(redis)) await node.script('FLUSH');
    await (await locks.lock('evict:{6}').acquireWrite()).release(); // NOSCRIPT on its master
    await eventually('the new policy heard', () => heard.some((risk) => risk.policy === 'allkeys-random'));
    expect(locks.stats().evictionRisks.map((risk) => risk.policy)).to.include('allkeys-random');
    await eventually('warned of the new policy', () => warnings.some((w) => /maxmemory-policy allkeys-random/.test(w.message)));
  });

  it('a policy that stops evicting and starts again is warned of again; stats() leaves it meanwhile', async () => {
    const { redis } = clients;
    const ports = await masterPorts(redis);
    const locks = clients.open();
    const heard = heardBy(locks);
    /** Sets `policy`, makes every master lose the scripts (as a failover does), and uses the client: its masters are read again. */
    const turnTo = async (policy: string) => {
      await configure(redis, '100mb', policy);
      for (const node of await masters(redis)) await node.script('FLUSH');
      for (const port of ports) await (await locks.lock(await resourceOnPort(port)).acquireWrite()).release();
    };
    const resourceOnPort = (port: string) =>
      ctx.kind === 'cluster' ? resourceOn(ctx, locks, Number(port)) : Promise.resolve('evict:{flip}');
    await turnTo('allkeys-lru');
    await eventually('warned of allkeys-lru', () => warnings.length === ports.length);
    await turnTo('noeviction');
    await eventually('no risk left', () => locks.stats().evictionRisks.length === 0);
    await turnTo('allkeys-lru');
    await eventually('warned of allkeys-lru again', () => warnings.length === 2 * ports.length);
    expect(heard.map((risk) => risk.policy)).to.deep.equal([...ports, ...ports].map(() => 'allkeys-lru'));
    expect(portsOf(locks.stats().evictionRisks)).to.deep.equal(ports);
  });

  it('asks again a master that could not answer at the first use (busy with a script), and hears it once it can', async () => {
    const { redis } = clients;
    await configure(redis, '100mb', 'volatile-lru');
    const ports = await masterPorts(redis);
    const [busy, other] = await masters(redis);
    const warns = clients.open();
    const refuses = clients.open({ onEvictionRisk: 'refuse' });
    const heard = heardBy(refuses);
    // On a Cluster, a lock of another master: after the script ends nothing but the check asks the busy one.
    const resource = ctx.kind === 'cluster' ? await resourceOn(ctx, warns, other!.options.port!) : 'evict:{busy}';
    await busy!.config('SET', 'busy-reply-threshold', '50');
    const looper = new Redis({ host: busy!.options.host, port: busy!.options.port });
    const looping = looper.eval('while true do end', 0).catch(() => undefined);
    try {
      await eventually('the master busy', async () =>
        /^BUSY/.test(String(await busy!.info('memory').catch((error: Error) => error.message))),
      );
      // The first use: the busy master answers BUSY to INFO (and, on one server, to the script).
      const first = await warns
        .lock(resource)
        .tryAcquireWrite()
        .catch((error: unknown) => error);
      if (first instanceof Lease) await first.release();
      expect(portsOf(refuses.stats().evictionRisks)).to.not.include(String(busy!.options.port));
      await busy!.call('SCRIPT', 'KILL');
      await looping;
      await eventually('the busy master heard', () => portsOf(heard).includes(String(busy!.options.port)));
      expect(portsOf(refuses.stats().evictionRisks)).to.deep.equal(ports);
      expect(await rejection(refuses.lock(resource).tryAcquireWrite())).to.be.instanceOf(EvictionRiskError);
      await eventually('a warning per master', () => warnings.length === ports.length);
    } finally {
      await busy!.call('SCRIPT', 'KILL').catch(() => undefined);
      await looping;
      looper.disconnect();
      await busy!.config('SET', 'busy-reply-threshold', '5000');
    }
  });

  it("'refuse': a queued writer that a release hands the lock to after the policy changed is refused, and gives it back", async () => {
    const { redis } = clients;
    await configure(redis, '100mb', 'noeviction');
    const holder = clients.open({ onEvictionRisk: 'ignore' });
    // Its tries come only when a release wakes it: the release's hand-over is what it meets.
    const waiter = clients.open({ onEvictionRisk: 'refuse', recheckMs: 60_000 });
    const held = await holder.lock('evict:{handed}').acquireWrite();
    const waiting = waiter
      .lock('evict:{handed}')
      .acquireWrite({ waitMs: 50_000 })
      .catch((error: unknown) => error);
    await eventually('a writer queued', async () => (await holder.inspect('evict:{handed}')).queue.length === 1);
    await configure(redis, '100mb', 'allkeys-lru');
    for (const node of await masters(redis)) await node.script('FLUSH');
    await eventually('the policy read again', async () => {
      expect(await holder.lock('evict:{handed}').tryAcquireWrite()).to.equal(null); // NOSCRIPT on its master
      return waiter.stats().evictionRisks.length > 0;
    });
    await held.release(); // hands the lock to the queued writer
    expect(await waiting).to.be.instanceOf(EvictionRiskError);
    await eventually('the handed hold given back', async () => (await totalKeys(redis)) === 0);
  });

  it('reads INFO once per master for every LockClient on a Redis client, not on each acquire', async () => {
    const { redis } = clients;
    await configure(redis, '100mb', 'volatile-lru');
    const ports = await masterPorts(redis);
    const before = await commandCalls(redis, ['info']);
    const opened = Array.from({ length: 10 }, (_, i) => clients.open({ onEvictionRisk: i % 2 === 0 ? 'warn' : 'ignore' }));
    for (let i = 0; i < 1_000; i++) await (await opened[i % opened.length]!.lock(`evict:{${i % 37}}`).acquireWrite()).release();
    const infos = (await commandCalls(redis, ['info'])) - before;
    // INFO memory per master, INFO cluster on one server, the first count's own INFO commandstats, and the
    // ready checks of the test's other clients: fewer than one per LockClient, let alone one per acquire.
    expect(infos, 'INFO calls in 1,000 acquires by 10 LockClients').to.be.below(opened.length * ports.length);
    await settled();
    expect(warnings, 'once per master').to.have.length(ports.length);
    expect(await totalKeys(redis)).to.equal(0);
  });

  it("'refuse' after a policy change: held leases renew, extend, release and force-release; a queued writer is refused and leaves", async () => {
    const { redis } = clients;
    await configure(redis, '100mb', 'noeviction');
    const locks = clients.open({ onEvictionRisk: 'refuse', leaseMs: 1_500 });
    const held = await locks.lock('evict:{held}').acquireWrite();
    const forced = await locks.lock('evict:{forced}').acquireRead();
    const queued = rejection(locks.lock('evict:{held}').acquireWrite({ waitMs: 30_000 }));
    await eventually('a writer queued', async () => (await locks.inspect('evict:{held}')).queue.length === 1);

    await configure(redis, '100mb', 'allkeys-lru');
    for (const node of await masters(redis)) await node.script('FLUSH'); // as a failover would: the next script reads the policy again
    const refusal = await queued;
    expect(refusal).to.be.instanceOf(EvictionRiskError);
    expect(refusal.message).to.match(/^refused to acquire the write lock on "evict:\{held\}", and wrote nothing: /);
    expect((await locks.inspect('evict:{held}')).queue, 'the refused writer left the queue').to.have.length(0);
    expect(await rejection(locks.lock('evict:{held}').tryAcquireRead())).to.be.instanceOf(EvictionRiskError);

    const renewals = locks.stats().renewals;
    await eventually('renewed since', () => locks.stats().renewals > renewals);
    await held.extend();
    const info = await locks.inspect('evict:{held}');
    expect(info.writer?.owner).to.equal(held.token);
    expect(info.evictionRisk).to.include({ policy: 'allkeys-lru' });
    await held.release();
    expect((await locks.forceRelease('evict:{forced}')).deleted).to.not.have.length(0);
    expect(await rejection(forced.extend())).to.be.instanceOf(LockLostError);
    expect(await totalKeys(redis)).to.equal(0);
  });

  if (ctx.kind === 'cluster') {
    it("one master of a Cluster evicts: 'refuse' refuses the locks of every master; inspect() names it on its own locks", async () => {
      const { redis } = clients;
      const [evicting, ...safe] = await masters(redis);
      await evicting!.config('SET', 'maxmemory', '100mb', 'maxmemory-policy', 'allkeys-lru');
      const locks = clients.open({ onEvictionRisk: 'refuse' });
      const onSafe = await resourceOn(ctx, locks, safe[0]!.options.port!);
      const onEvicting = await resourceOn(ctx, locks, evicting!.options.port!);
      for (const resource of [onSafe, onEvicting]) {
        const refusal = await rejection(locks.lock(resource).tryAcquireWrite());
        expect(refusal).to.be.instanceOf(EvictionRiskError);
        expect(refusal).to.include({ resource, node: `${evicting!.options.host}:${evicting!.options.port}` });
      }
      expect((await locks.inspect(onSafe)).evictionRisk).to.equal(undefined);
      expect((await locks.inspect(onEvicting)).evictionRisk).to.include({ policy: 'allkeys-lru' });
      expect(await totalKeys(redis)).to.equal(0);
    });

    it('a replica with a policy that evicts, promoted by a failover: its first script reads it, and acquires are refused', async () => {
      const { redis } = clients;
      const locks = clients.open({ onEvictionRisk: 'refuse' });
      const heard = heardBy(locks);
      await (await locks.lock('evict:{failover}').acquireWrite()).release();
      const master = await ctx.cluster.masterForKey(locks.lock('evict:{failover}').keys.state);
      const [replica] = await ctx.cluster.replicasOf(master.port);
      const admin = new Redis({ host: replica!.host, port: replica!.port });
      try {
        await admin.config('SET', 'maxmemory', '100mb', 'maxmemory-policy', 'volatile-lfu');
      } finally {
        admin.disconnect();
      }
      expect(locks.stats().evictionRisks, 'a replica is no master').to.deep.equal([]);
      await ctx.cluster.manualFailover(replica!.port);
      await eventually(
        'acquires refused',
        async () => {
          const outcome = await locks
            .lock('evict:{failover}')
            .tryAcquireWrite()
            .catch((error: unknown) => error);
          if (outcome instanceof Lease) await outcome.release();
          return outcome instanceof EvictionRiskError;
        },
        15_000,
        50,
      );
      expect(portsOf(heard)).to.deep.equal([String(replica!.port)]);
      expect(portsOf(locks.stats().evictionRisks)).to.deep.equal([String(replica!.port)]);
      expect(await totalKeys(redis)).to.equal(0);
    });
  }

  it('the CLI shows it: inspect, list and top, as text and as JSON', async () => {
    const { redis } = clients;
    await configure(redis, '100mb', 'allkeys-lfu');
    const ports = await masterPorts(redis);
    const locks = clients.open({ onEvictionRisk: 'ignore' });
    const lease = await locks.lock('evict:{cli}').acquireWrite();
    try {
      const target = cliTarget(ctx);
      const inspect = await run(['inspect', 'evict:{cli}', ...target]);
      expect(inspect.out).to.match(/^eviction +\S+ may evict lock keys: maxmemory 100mb, maxmemory-policy allkeys-lfu /m);
      expect(JSON.parse((await run(['inspect', 'evict:{cli}', '--json', ...target])).out).evictionRisk).to.include({
        policy: 'allkeys-lfu',
        maxmemoryBytes: MB_100,
      });
      expect((await run(['list', ...target])).out.match(/may evict lock keys/g)).to.have.length(ports.length);
      expect(portsOf(JSON.parse((await run(['list', '--json', ...target])).out).evictionRisks)).to.deep.equal(ports);
      expect((await run(['top', '-n', '1', ...target])).out.match(/may evict lock keys: maxmemory 100mb/g)).to.have.length(ports.length);
      expect(portsOf(JSON.parse((await run(['top', '-n', '1', '--json', ...target])).out).evictionRisks)).to.deep.equal(ports);
      await settled();
      expect(warnings, 'said in the output, not as a warning').to.have.length(0);

      await configure(redis, '100mb', 'noeviction');
      expect((await run(['inspect', 'evict:{cli}', ...target])).out).to.not.match(/eviction/);
      expect((await run(['list', ...target])).out).to.not.match(/may evict/);
    } finally {
      await lease.release();
    }
  });

  if (ctx.clientKind === 'ioredis') {
    // The CLI's own client (ioredis) on the topology: once per topology.
    it("top's every refresh reads the masters' policy again: a policy set to noeviction leaves its summary, one that evicts joins it", async () => {
      const { redis } = clients;
      await configure(redis, '100mb', 'allkeys-lfu');
      const ports = await masterPorts(redis);
      const cli = withBounds(ioredisCli(redis), 5_000);
      expect(portsOf((await look(cli, 'rwlock', 10)).evictionRisks)).to.deep.equal(ports);
      await configure(redis, '100mb', 'noeviction');
      expect((await look(cli, 'rwlock', 10)).evictionRisks).to.deep.equal([]);
      await configure(redis, '100mb', 'volatile-ttl');
      expect((await look(cli, 'rwlock', 10)).evictionRisks.map((risk) => risk.policy)).to.deep.equal(ports.map(() => 'volatile-ttl'));
    });
  }
});

/** A resource whose lock lives on the Cluster master on `port`. */
async function resourceOn(ctx: TopologyContext & { kind: 'cluster' }, locks: LockClient, port: number): Promise<string> {
  for (let i = 0; ; i++) {
    const resource = `evict:{${i}}`;
    if ((await ctx.cluster.masterForKey(locks.lock(resource).keys.state)).port === port) return resource;
  }
}

/** Runs the CLI in this process; its exit code must be 0. */
async function run(args: string[]): Promise<{ out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIO = { interactive: false, out: (text) => void (out += text), err: (text) => void (err += text), ask: async () => '' };
  const code = await main(args, io);
  expect(code, `redis-rwlock ${args.join(' ')}: ${err}`).to.equal(0);
  return { out, err };
}

function cliTarget(ctx: TopologyContext): string[] {
  return ctx.kind === 'cluster'
    ? ['--cluster', ctx.cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',')]
    : ['--redis', `redis://${ctx.server.host}:${ctx.server.port}`];
}

describe('eviction risk: a user who may not run INFO', function () {
  this.timeout(30_000);
  const warnings = processWarnings();
  let server: RedisServerHandle;
  before(async () => {
    server = await startRedisServer({ args: ['--maxmemory', '100mb', '--maxmemory-policy', 'allkeys-lru'] });
    const admin = new Redis({ host: '127.0.0.1', port: server.port });
    await admin.call('ACL', 'SETUSER', 'noinfo', 'on', '>secret', '~*', '&*', '+@all', '-info');
    admin.disconnect();
  });
  after(() => server.stop());

  for (const kind of ['ioredis', 'node-redis'] as const) {
    it(`${kind}: cannot tell, so it says nothing, refuses nothing, and the locks work`, async () => {
      const auth = { username: 'noinfo', password: 'secret' };
      const client: LockRedisClient =
        kind === 'ioredis'
          ? new Redis({ host: '127.0.0.1', port: server.port, ...auth, enableReadyCheck: false })
          : await createClient({ socket: { host: '127.0.0.1', port: server.port }, ...auth }).connect();
      const locks = new LockClient(client);
      const refusing = new LockClient(client, { onEvictionRisk: 'refuse' });
      try {
        await saysNothing(warnings, locks, refusing, 'a');
      } finally {
        await Promise.all([locks.close(), refusing.close()]);
        if (kind === 'ioredis') (client as Redis).disconnect();
        else (client as unknown as { destroy(): void }).destroy();
      }
    });
  }
});

describe('eviction risk: the danger itself', function () {
  this.timeout(60_000);
  const warnings = processWarnings();
  let server: RedisServerHandle;
  const opened: { close(): unknown }[] = [];
  before(async () => {
    // ElastiCache's default policy: only keys with a TTL are evicted, and every lock key has one.
    server = await startRedisServer({ args: ['--maxmemory', '4mb', '--maxmemory-policy', 'volatile-lru'] });
  });
  afterEach(async () => {
    for (const item of opened.splice(0).reverse()) await item.close();
  });
  after(() => server.stop());

  const redisClient = () => {
    const redis = new Redis({ host: '127.0.0.1', port: server.port });
    opened.push({ close: () => redis.disconnect() });
    return redis;
  };
  const lockClient = (redis: Redis) => {
    const locks = new LockClient(redis);
    opened.unshift(locks); // closed before its Redis client
    return locks;
  };

  it('a full server evicts a held lock, a second owner takes it, the holder learns at its renewal; the warning said so first', async () => {
    const admin = redisClient();
    const holder = lockClient(redisClient());
    const lease = await holder.lock('rebuild').acquireWrite();
    await holder.inspect('rebuild'); // its server read
    expect(holder.stats().evictionRisks.map((risk) => risk.policy)).to.deep.equal(['volatile-lru']);
    await eventually('the warning', () => warnings.length === 1);
    expect(warnings[0]!.message).to.match(/has maxmemory 4mb and maxmemory-policy volatile-lru/);
    expect((warnings[0] as Error & { detail?: string }).detail).to.match(/fencedSet\) stay safe meanwhile: their fence keys carry no TTL/);

    // Fill the server with keys of no TTL until it evicts: the lock's are the only ones it may take.
    const state = holder.lock('rebuild').keys.state;
    const evictedBefore = await evictedKeys(admin);
    const junk: string[] = [];
    const value = 'x'.repeat(1024);
    await eventually(
      'the lock key evicted',
      async () => {
        const batch = Array.from({ length: 100 }, (_, i) => `junk:${junk.length + i}`);
        junk.push(...batch);
        await admin.pipeline(batch.map((key) => ['set', key, value])).exec(); // OOM replies once nothing is left to evict
        return (await admin.exists(state)) === 0;
      },
      20_000,
      0,
    );
    expect((await evictedKeys(admin)) - evictedBefore).to.be.at.least(1);
    for (let i = 0; i < junk.length; i += 500) await admin.unlink(...junk.slice(i, i + 500)); // the pressure passes

    const other = lockClient(redisClient());
    const second = await other.lock('rebuild').tryAcquireWrite();
    expect(second, 'a second write lease').to.not.equal(null);
    expect(lease.held, 'while the first still believes it holds').to.equal(true);
    expect(lease.signal.aborted).to.equal(false);
    expect(await rejection(lease.extend())).to.be.instanceOf(LockLostError); // what its next renewal finds
    expect(lease.signal.aborted).to.equal(true);
    await second!.release();
  });
});

/** The server's `evicted_keys` (INFO stats). */
async function evictedKeys(redis: Redis): Promise<number> {
  return Number(/^evicted_keys:(\d+)/m.exec(await redis.info('stats'))?.[1]);
}

describe('eviction risk: redlock mode', function () {
  this.timeout(30_000);
  const warnings = processWarnings();
  let nodes: RedisMastersHandle;
  let admin: Redis[];
  const opened: (LockClient | Redis)[] = [];
  before(async () => {
    nodes = await startRedisMasters(3);
    admin = nodes.clients();
  });
  afterEach(async () => {
    for (const item of opened.splice(0)) await (item instanceof LockClient ? item.close() : item.disconnect());
    for (const node of admin) await node.config('SET', 'maxmemory', '0', 'maxmemory-policy', 'noeviction');
    await nodes.flush();
  });
  after(async () => {
    for (const node of admin) node.disconnect();
    await nodes.stop();
  });

  /** A redlock LockClient on the three servers, whose first `evicting` evict. */
  async function redlockOn(evicting: number): Promise<LockClient> {
    for (const [i, node] of admin.entries()) {
      await node.config('SET', 'maxmemory', '100mb', 'maxmemory-policy', i < evicting ? 'allkeys-lru' : 'noeviction');
    }
    const clients = nodes.clients();
    const locks = new LockClient(clients, { mode: 'redlock', onEvictionRisk: 'refuse' });
    opened.push(locks, ...clients);
    return locks;
  }
  const keysOnEach = () => Promise.all(admin.map((node) => node.dbsize()));

  it("'refuse': a node that may evict is left out, and the other two grant", async () => {
    const locks = await redlockOn(1);
    const lease = await locks.lock('evict').acquireWrite();
    expect(await keysOnEach()).to.deep.equal([0, 1, 1]);
    const info = await locks.inspect('evict');
    expect(info.nodes?.map((view) => view?.evictionRisk?.policy)).to.deep.equal(['allkeys-lru', undefined, undefined]);
    expect(locks.stats().evictionRisks.map((risk) => risk.node)).to.deep.equal([`127.0.0.1:${nodes.servers[0]!.port}`]);
    await lease.release();
    expect(await keysOnEach()).to.deep.equal([0, 0, 0]);
  });

  it("'refuse': a majority that may evict refuses the acquire with EvictionRiskError, and leaves nothing on any node", async () => {
    const locks = await redlockOn(2);
    const refusal = await rejection(locks.lock('evict').acquireWrite({ waitMs: 200 }));
    expect(refusal).to.be.instanceOf(EvictionRiskError);
    expect(refusal.message).to.match(
      /^refused to acquire the write lock on "evict", and wrote nothing: the Redis master 127\.0\.0\.1:\d+ has maxmemory 100mb/,
    );
    expect(await keysOnEach()).to.deep.equal([0, 0, 0]);
    await settled();
    expect(warnings).to.have.length(0);
  });
});

describe('eviction risk: close() while the first read waits for the server', function () {
  this.timeout(30_000);
  let server: RedisServerHandle;
  let proxy: FaultProxy;
  let admin: Redis;
  before(async () => {
    server = await startRedisServer({ args: ['--maxmemory', '100mb', '--maxmemory-policy', 'noeviction'] });
    admin = new Redis({ host: '127.0.0.1', port: server.port });
  });
  beforeEach(async () => {
    proxy = await startFaultProxy({ target: { port: server.port } });
  });
  afterEach(async () => {
    proxy.resume();
    await proxy.close();
  });
  after(async () => {
    admin.disconnect();
    await server.stop();
  });

  for (const kind of selectedClients(ONE_NODE_REDIS)) {
    it(`${kind}: a refusing acquire waiting for it ends with ClientClosedError; close() settles once its late grant is given back`, async () => {
      const redis = await connectLockClient(targetThrough(proxy, kind));
      const locks = new LockClient(redis, { onEvictionRisk: 'refuse', redisTimeoutMs: 10_000 });
      try {
        const held = proxy.stallAtReply({ command: 'info', argument: 'memory' }); // its reply, and all after it
        const acquiring = rejection(locks.lock('evict').acquireWrite({ waitMs: 10_000 }));
        await held;
        const closing = locks.close();
        expect(await acquiring).to.be.instanceOf(ClientClosedError);
        const scriptsBefore = await scriptCalls(admin);
        proxy.resume(); // the server answers within redisTimeoutMs: the read, then the acquire's script
        await closing;
        await quit(redis);
        expect(await admin.dbsize(), 'nothing held once the Redis client quit').to.equal(0);
        expect((await scriptCalls(admin)) - scriptsBefore, 'the late grant and its give-back').to.equal(2);
      } finally {
        disconnect(redis);
      }
    });
  }
});
