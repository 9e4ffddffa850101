/**
 * LockClient events and stats(): what an operator's dashboard sees of
 * grants, waits, timeouts, losses, renewal failures and subscriber
 * failures, against a real Redis.
 */
import { expect } from 'chai';
import type { LockRedisClient } from '../../src/clients/index.js';
import {
  AcquireAbortedError,
  AcquireTimeoutError,
  type ContentionInfo,
  type Lease,
  type LockClientOptions,
  type LockStats,
  RedisUnavailableError,
} from '../../src/index.js';
import { isCluster, type RedisClient } from '../../src/redis.js';
import { ALL_CLIENTS, forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { suiteLockClients } from '../support/lock-clients.js';
import { masters } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';

/** Every grant is in exactly one bucket. */
function histogramTotal(stats: LockStats): number {
  return stats.waitTime.counts.reduce((a, b) => a + b, 0);
}

forEachTopology('LockClient events and stats', { clients: ALL_CLIENTS }, (ctx) => {
  const clients = suiteLockClients(ctx, { recheckMs: 50 });
  const open = (options?: LockClientOptions, on?: LockRedisClient) => clients.open(options, on);

  it('counts grants and releases, and emits acquired and released with their times', async () => {
    const locks = open();
    const acquired: [Lease, number][] = [];
    const released: [Lease, number][] = [];
    locks.on('acquired', (lease, waitedMs) => acquired.push([lease, waitedMs]));
    locks.on('released', (lease, heldMs) => released.push([lease, heldMs]));
    const a = await locks.lock('ev:1').acquireWrite();
    const b = await locks.lock('ev:2').acquireRead();
    expect(locks.stats()).to.include({ acquires: 2, releases: 0, heldLeases: 2, waits: 0 });
    await a.release();
    await locks.withRead('ev:3', () => undefined);
    const stats = locks.stats();
    expect(stats).to.include({ acquires: 3, releases: 2, heldLeases: 1, waits: 0, timeouts: 0, losses: 0 });
    expect(histogramTotal(stats)).to.equal(3);
    expect(stats.waitTime.count).to.equal(3);
    expect(stats.waitTime.counts).to.have.length(stats.waitTime.boundsMs.length + 1);
    expect(acquired.map(([l]) => l))
      .to.include.members([a, b])
      .and.to.have.length(3);
    for (const [, ms] of acquired) expect(ms).to.be.a('number').and.at.least(0);
    expect(released.map(([l]) => l.resource)).to.deep.equal(['ev:1', 'ev:3']);
    expect(released[0]![1]).to.be.at.least(0);
    await b.release();
    expect(locks.stats().heldLeases).to.equal(0);
  });

  it('reports contention once per acquire, its wait in the histogram, and the wake-up its release sent', async () => {
    const holder = open();
    const waiter = open({ recheckMs: 10_000 }); // only a wake-up ends the wait in time
    const contended: ContentionInfo[] = [];
    const waited: number[] = [];
    waiter.on('contended', (info) => contended.push(info));
    waiter.on('acquired', (_, ms) => waited.push(ms));
    const held = await holder.lock('ev:wait').acquireWrite();
    const called = performance.now();
    const waiting = waiter.lock('ev:wait').acquireRead({ waitMs: 8_000 });
    // The acquire counts its wait from a moment between these two (set before its first await).
    const returned = performance.now();
    await eventually('the reader to be refused', () => contended.length === 1);
    const channel = waiter.lock('ev:wait').keys.channel;
    await eventually('the reader to subscribe to its wake-ups', async () => (await subscribers(clients.redis, channel)) === 1);
    const releasedAt = performance.now();
    await held.release();
    const lease = await waiting; // its re-check would come after 8 s
    await eventually('the wake-up message to arrive', () => waiter.stats().wakeups === 1);
    expect(contended).to.have.length(1);
    expect(contended[0]).to.include({ resource: 'ev:wait', mode: 'read', owner: lease.token, blockedBy: 'write', waitMs: 8_000 });
    const stats = waiter.stats();
    expect(stats).to.include({ acquires: 1, waits: 1, pollingFallbacks: 0 });
    // The wait is the time from the call to the grant, and lands in its bucket.
    expect(waited).to.have.length(1);
    expect(waited[0]) // to 0.1 ms
      .to.be.at.least(releasedAt - returned - 0.05)
      .and.at.most(performance.now() - called + 0.05);
    expect(stats.waitTime.sumMs).to.equal(waited[0]);
    const bucket = stats.waitTime.boundsMs.findIndex((bound) => waited[0]! <= bound);
    expect(stats.waitTime.counts[bucket < 0 ? stats.waitTime.boundsMs.length : bucket]).to.equal(1);
    await lease.release();
  });

  it('gives the times of events and stats to 0.1 ms', async () => {
    const locks = open();
    const times: number[] = [];
    locks.on('acquired', (_, waitedMs) => times.push(waitedMs));
    locks.on('released', (_, heldMs) => times.push(heldMs));
    for (let i = 0; i < 5; i++) await locks.withWrite(`ev:tenths:${i}`, () => undefined);
    times.push(locks.stats().waitTime.sumMs);
    expect(times).to.have.length(11);
    expect(times.filter((ms) => ms !== Math.round(ms * 10) / 10)).to.deep.equal([]);
  });

  it('counts timeouts, busy tries and aborts apart', async () => {
    const locks = open();
    const other = open();
    const held = await locks.lock('ev:busy').acquireWrite();
    expect(await other.lock('ev:busy').tryAcquireRead()).to.equal(null);
    expect(await rejection(other.lock('ev:busy').acquireWrite({ waitMs: 60 }))).to.be.instanceOf(AcquireTimeoutError);
    const controller = new AbortController();
    const aborted = rejection(other.lock('ev:busy').acquireRead({ signal: controller.signal }));
    await eventually('the reader to wait', () => other.stats().waits === 3);
    controller.abort();
    expect(await aborted).to.be.instanceOf(AcquireAbortedError);
    expect(other.stats()).to.include({ acquires: 0, waits: 3, busy: 1, timeouts: 1, aborts: 1, failures: 0 });
    await held.release();
  });

  it('counts a lease lost when Redis no longer holds it', async () => {
    // Renewed every second: a loaded machine's late renewal must not lose it by its deadline first.
    const locks = open({ leaseMs: 3_000 });
    let lostEvents = 0;
    let why = '';
    locks.on('lost', (error) => {
      lostEvents++;
      why = error.message;
    });
    await locks.lock('ev:lost').acquireWrite();
    await eventually('a renewal', () => locks.stats().renewals >= 1);
    await ctx.flush(); // its keys are gone: the next renewal finds it not held
    await eventually('the loss', () => locks.stats().losses === 1, 5_000);
    expect(lostEvents).to.equal(1);
    expect(why, 'found by the renewal, not run out by its deadline').to.match(/renewal found it no longer held/);
    expect(locks.stats().heldLeases).to.equal(0);
  });

  it('reports a renewal round Redis did not answer as renewalFailed, and keeps the lease', async () => {
    const locks = open({ leaseMs: 1_500, redisTimeoutMs: 100 }); // renews every 500 ms
    const failures: [RedisUnavailableError, readonly Lease[]][] = [];
    locks.on('renewalFailed', (error, leases) => failures.push([error, leases]));
    const lease = await locks.lock('ev:renew').acquireWrite();
    const before = locks.stats().renewalFailures;
    // Paused for 900 ms right after a renewal, Redis holds the next one (500 ms later) past its
    // 100 ms bound. A loaded machine may fire that renewal late, after the pause: then again.
    for (let attempt = 0; attempt < 3 && failures.length === 0; attempt++) {
      const renewed = locks.stats().renewals;
      await eventually('a renewal', () => locks.stats().renewals > renewed, 5_000);
      const paused = locks.stats().renewals;
      for (const node of await masters(clients.redis)) await node.call('CLIENT', 'PAUSE', '900', 'ALL');
      await eventually(
        'the round the pause held to fail, or a later one to renew',
        () => failures.length > 0 || locks.stats().renewals > paused,
        5_000,
      );
    }
    expect(failures, 'failed renewal rounds').to.have.length.at.least(1);
    const renewedBeforeFailing = locks.stats().renewals;
    expect(failures[0]![0]).to.be.instanceOf(RedisUnavailableError);
    expect(failures[0]![1]).to.include(lease);
    expect(locks.stats().renewalFailures).to.be.greaterThan(before);
    await eventually('a renewal after the pause', () => locks.stats().renewals > renewedBeforeFailing, 5_000);
    expect(lease.held).to.equal(true);
    await lease.release();
  });

  it("reports a release that failed after the function threw as backgroundError, and throws the function's error", async () => {
    const locks = open({ redisTimeoutMs: 100 });
    const background: Error[] = [];
    locks.on('backgroundError', (error) => background.push(error));
    const boom = new Error('boom');
    const error = await rejection(
      locks.withWrite('ev:bg', async () => {
        for (const node of await masters(clients.redis)) await node.call('CLIENT', 'PAUSE', '500', 'ALL');
        throw boom;
      }),
    );
    expect(error).to.equal(boom);
    expect(background).to.have.length(1);
    expect(background[0]).to.be.instanceOf(RedisUnavailableError);
    expect(background[0]!.message).to.include('releasing the write lock on "ev:bg"');
  });

  it('reports a subscription Redis refuses as subscriberError, and the waiter falls back to re-checks', async () => {
    const user = `rwlock-test-${process.pid}`;
    const nodes = isCluster(clients.redis) ? await allNodes(clients.redis) : [clients.redis];
    // A user that may do everything but SSUBSCRIBE (on every node: a Cluster does not share ACLs).
    for (const node of nodes) await node.call('ACL', 'SETUSER', user, 'on', 'nopass', '~*', '&*', '+@all', '-ssubscribe');
    try {
      const limited = await ctx.lockRedis({ user: { username: user, password: 'x' } });
      const holder = open();
      const waiter = open({ recheckMs: 50 }, limited);
      const errors: Error[] = [];
      waiter.on('subscriberError', (error) => errors.push(error));
      const held = await holder.lock('ev:sub').acquireWrite();
      const waiting = waiter.lock('ev:sub').acquireWrite({ waitMs: 10_000 });
      await eventually('the subscription to fail', () => errors.length >= 1);
      await held.release();
      const lease = await waiting; // found by a re-check
      expect(String(errors[0]!.message)).to.match(/NOPERM|permission/i);
      expect(waiter.stats()).to.include({ acquires: 1, pollingFallbacks: 1 });
      expect(waiter.stats().subscriberErrors).to.be.at.least(1);
      await lease.release();
    } finally {
      for (const node of nodes) await node.call('ACL', 'DELUSER', user);
    }
  });
});

/** Sharded subscribers of `channel`, on every master together. */
async function subscribers(redis: RedisClient, channel: string): Promise<number> {
  let total = 0;
  for (const node of await masters(redis)) {
    const reply = (await node.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number];
    total += Number(reply[1]);
  }
  return total;
}

/** Every node of a Cluster client, replicas included, once it is ready. */
async function allNodes(redis: RedisClient) {
  await masters(redis);
  return (redis as import('ioredis').Cluster).nodes('all');
}
