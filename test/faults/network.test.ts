// Faults between the clients and Redis: every connection of the history
// workload goes through a fault proxy (redis-rwlock/testing) that drops the
// reply to a script call after the server ran it (the LockClients' client,
// ioredis or node-redis, resends it on a new connection), stalls the network in both directions, longer than
// redisTimeoutMs at times, and resets every connection. The first row runs on
// ioredis and node-redis 6: node-redis 5 answers a call made as its connection
// resets with another command's reply (pinned in node-redis.test.ts), which
// here made overlaps, a lock taken for a lease, and clients that never
// reconnected. Workers retry a
// release whose outcome is unknown, as the README advises. The checker must
// find no violation, no lost update, every lost lease reported, and no lock
// left taken after its release (a resent acquire counted twice would keep it
// taken for a whole lease).
//
// Two more rows at the edges of a process's life: graceful shutdowns (close(),
// then quit()) of random processes while their loops wait or acquire, after
// which nothing of theirs may be held; and replies delayed past
// redisTimeoutMs, so that acquires give up at their bound while their grants
// land later, each of which must be given back as it lands.
import { setTimeout as delay } from 'node:timers/promises';
import { expect } from 'chai';
import { LockClient, RedisUnavailableError } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import { type ClusterFaultProxy, type FaultProxy, proxyCluster, startFaultProxy } from '../../src/testing/index.js';
import { forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { type FaultWindow, longestHandoffMs } from '../support/history.js';
import { WORKLOAD_DEFAULTS, Workload } from '../support/history-run.js';
import { connectTarget, targetThrough } from '../support/targets.js';
import { checkAndReport, counters } from './support.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const LEASE_MS = WORKLOAD_DEFAULTS.leaseMs;
const RESOURCES = WORKLOAD_DEFAULTS.resources;
/** The workers' redisTimeoutMs (the library's default). */
const REDIS_TIMEOUT_MS = 1_000;
/**
 * The longest a lock may stand free while a process waits for it. A hold
 * counted twice (a resent acquire) keeps it taken for the rest of its lease
 * past the real hold's release, nearly LEASE_MS (holds last a few ms); a
 * waiter whose wake-up a reset lost waits out one recheckMs (500 ms).
 */
const STUCK_MS = 0.75 * LEASE_MS;
/** Graceful shutdowns per run, and the proxy's delay meanwhile. */
const SHUTDOWNS = 5;
const SHUTDOWN_DELAY_MS = 10;
/** Windows of replies delayed past redisTimeoutMs per run, and the workers' lease and wait then. */
const DELAY_WINDOWS = 3;
const LATE_LEASE_MS = 6_000;
const LATE_WAIT_MS = 500;
/** The faults, in this order, each after a random pause of 150-500 ms. */
const PLAN = Array.from({ length: 4 }, () => ['drop', 'stall', 'drop', 'reset', 'drop', 'stall'] as const).flat();

/** What Redis shows taken on `resources` (holds and places in the writers' queue), by owner. */
async function taken(inspector: LockClient, resources: readonly string[]): Promise<{ resource: string; owner: string; as: string }[]> {
  const found: { resource: string; owner: string; as: string }[] = [];
  for (const resource of resources) {
    const info = await inspector.inspect(resource);
    if (info.writer) found.push({ resource, owner: info.writer.owner, as: 'writer' });
    for (const r of info.readers) found.push({ resource, owner: r.owner, as: 'reader' });
    for (const q of info.queue) found.push({ resource, owner: q.owner, as: 'queued' });
  }
  return found;
}

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

forEachTopology('network faults between clients and Redis', { clients: ['ioredis', 'node-redis6', 'glide'] }, (ctx) => {
  let workload: Workload | undefined;
  let proxy: FaultProxy | ClusterFaultProxy | undefined;
  let inspector: LockClient | undefined;
  let probeRedis: RedisClient | undefined;
  afterEach(async () => {
    workload?.killAll();
    probeRedis?.disconnect();
    await inspector?.close();
    await proxy?.close();
  });

  it('replies dropped and resent, stalls and resets during the history workload: exactly once, nothing stuck', async function () {
    this.timeout(120_000);
    proxy = ctx.kind === 'standalone' ? await startFaultProxy({ target: { port: ctx.server.port } }) : await proxyCluster(ctx.cluster);
    workload = new Workload(targetThrough(proxy, ctx.clientKind), { durationMs: 60_000, ops: 100_000, retryUnknownRelease: true });
    await workload.launch(4);

    const stalls: FaultWindow[] = [];
    let resets = 0;
    for (const step of PLAN) {
      await sleep(150 + Math.random() * 350);
      if (step === 'drop') {
        // The next script call on any connection runs, and its reply is lost with the connection.
        const dropped = proxy.dropAfterReply({ command: 'evalsha' });
        const late = delay(10_000, undefined, { ref: false }).then(() => {
          throw new Error('no script call came through the proxy within 10 s');
        });
        await Promise.race([dropped, late]);
      } else if (step === 'stall') {
        const start = Date.now();
        proxy.stall();
        await sleep(100 + Math.random() * 1_100); // up to past redisTimeoutMs (1000 ms)
        proxy.resume();
        stalls.push({ kind: 'other', start, end: Date.now() });
      } else {
        proxy.reset();
        resets++;
      }
    }
    const drops = proxy.stats.drops;
    await sleep(1_000);
    workload.stop();
    const history = await workload.finish(60_000);
    const handoff = longestHandoffMs(history, stalls);
    const result = checkAndReport(
      `network: replies dropped, stalls, resets${ctx.clientKind === 'ioredis' ? '' : ` (${ctx.clientKind})`}`,
      ctx,
      history,
      {
        counters: await counters(ctx.client(), WORKLOAD_DEFAULTS.resources),
        // On a loaded 2-core host every process's event loop stalls at times for 0.2-0.5 s (seen
        // with node-redis 6 on the Cluster, 2 runs in 10): a holder paused past its renewals (a
        // handed hold lasts its 1.1 s queue heartbeat until extended) is told once it runs again.
        autoLeaseMs: LEASE_MS,
        recoveryMs: handoff,
        notes:
          `${drops} replies dropped and resent, ${stalls.length} stalls of up to ${Math.round(Math.max(...stalls.map((s) => s.end - s.start)))} ms, ` +
          `${resets} resets; recovery = longest a released lock stayed taken while a process waited (stalls not counted)`,
      },
    );
    expect(drops, 'replies dropped').to.equal(PLAN.filter((step) => step === 'drop').length);
    expect(result.violations).to.deep.equal([]);
    expect(result.grants).to.be.greaterThan(100);
    // Each lock was taken again soon after its release: never held on by a hold counted twice.
    expect(handoff, 'longest a released lock stood free while a process waited').to.be.below(STUCK_MS);
  });

  // The lifecycle rows run on ioredis; the network row above on node-redis 6 and GLIDE too.
  if (ctx.clientKind === 'ioredis')
    it('graceful shutdowns (close, then quit) of random processes in the middle of acquires: exactly once, nothing of theirs left held', async function () {
      this.timeout(120_000);
      proxy = ctx.kind === 'standalone' ? await startFaultProxy({ target: { port: ctx.server.port } }) : await proxyCluster(ctx.cluster);
      // A few ms each way: acquires are on the wire, not only waiting, when close() is called.
      proxy.delay(SHUTDOWN_DELAY_MS);
      workload = new Workload(targetThrough(proxy), { durationMs: 60_000, ops: 100_000, retryUnknownRelease: true });
      await workload.launch(4);
      inspector = new LockClient(ctx.client()); // straight to Redis: what the others see
      const shutdowns: { name: string; left: string[] }[] = [];
      for (let i = 0; i < SHUTDOWNS; i++) {
        await sleep(300 + Math.random() * 400);
        const live = workload.workers.filter((w) => w.child.exitCode === null && w.child.signalCode === null);
        const victim = live[Math.floor(Math.random() * live.length)]!;
        expect(await workload.shutdown(victim), `${victim.name}'s exit code`).to.equal(0);
        // Right after it exited, while the others run: none of its owners (its operations' ids) holds or waits.
        const left = (await taken(inspector, RESOURCES)).filter((t) => t.owner.startsWith(`${victim.name}:`));
        shutdowns.push({ name: victim.name, left: left.map((t) => `${t.resource} ${t.as} ${t.owner}`) });
        await workload.launch(1); // keeps the load
      }
      await sleep(500);
      workload.stop();
      const history = await workload.finish(60_000);
      const closing = [...history.shutdowns].map(([name, s]) => ({ name, ...s, closeMs: history.done.get(name)?.closeMs ?? NaN }));
      const withAcquires = closing.filter((s) => s.acquiring > 0);
      const closedAcquires = history.failures.filter((f) => f.name === 'ClientClosedError');
      // The library's message tells a call on the wire from a wait.
      const onTheWire = closedAcquires.filter((f) => f.message.includes('while the acquire was in flight')).length;
      const result = checkAndReport('network: graceful shutdowns (close, quit) mid-acquire', ctx, history, {
        counters: await counters(ctx.client(), RESOURCES),
        notes:
          `${closing.length} processes shut down, ${withAcquires.length} with acquires in flight ` +
          `(${closing.reduce((n, s) => n + s.acquiring, 0)} in all), ${closedAcquires.length} ended with ClientClosedError (${onTheWire} on the wire); ` +
          `close() took median ${Math.round(median(closing.map((s) => s.closeMs)))} ms, at most ${Math.round(Math.max(...closing.map((s) => s.closeMs)))} ms; ` +
          `proxy delay ${SHUTDOWN_DELAY_MS} ms each way`,
      });
      expect(
        shutdowns.filter((s) => s.left.length > 0),
        'held or queued after its process shut down',
      ).to.deep.equal([]);
      expect(closing.map((s) => s.name).sort(), 'processes that shut down').to.deep.equal(shutdowns.map((s) => s.name).sort());
      expect(withAcquires.length, 'shutdowns with acquires in flight').to.be.greaterThan(0);
      // Only a process that shut down sees ClientClosedError, and only from its close() on.
      for (const f of closedAcquires)
        expect(f.at, `${f.id} ended by close()`).to.be.at.least(history.shutdowns.get(f.process)?.at ?? Infinity);
      expect(result.violations).to.deep.equal([]);
      expect(result.grants).to.be.greaterThan(100);
      expect(await taken(inspector, RESOURCES), 'taken once every process has finished').to.deep.equal([]);
    });

  // The lifecycle rows run on ioredis (issue 26); the network row above on node-redis 6 and GLIDE too.
  if (ctx.clientKind === 'ioredis')
    it('replies delayed past redisTimeoutMs: acquires give up at their bound, each grant that lands later is given back', async function () {
      this.timeout(120_000);
      proxy = ctx.kind === 'standalone' ? await startFaultProxy({ target: { port: ctx.server.port } }) : await proxyCluster(ctx.cluster);
      // waitMs 500: an acquire's bound is redisTimeoutMs (waitMs + 250 ms, at least redisTimeoutMs), which a
      // delayed reply misses. A lease much longer than a late grant may stay: one left to lapse by itself shows.
      workload = new Workload(targetThrough(proxy), {
        durationMs: 60_000,
        ops: 100_000,
        retryUnknownRelease: true,
        waitMs: LATE_WAIT_MS,
        leaseMs: LATE_LEASE_MS,
      });
      await workload.launch(4);
      inspector = new LockClient(ctx.client());
      // Besides the workload, whose late grants depend on which locks are free when a delayed call lands, a
      // probe through the proxy tries a lock of its own in each window: its grant surely lands late.
      probeRedis = connectTarget(targetThrough(proxy));
      probeRedis.on('error', () => undefined);
      const probe = new LockClient(probeRedis);
      const probes = Array.from({ length: DELAY_WINDOWS }, (_, i) => `probe-${i}`);
      for (const p of probes) await (await probe.lock(p).acquireWrite()).release(); // connected to its node, script loaded
      // Straight to Redis, every 20 ms: when each owner was first and last seen holding a lock.
      const seen = new Map<string, { resource: string; first: number; last: number }>();
      let watching = true;
      const watcher = (async () => {
        while (watching) {
          const at = Date.now();
          for (const t of await taken(inspector!, [...RESOURCES, ...probes])) {
            if (t.as === 'queued') continue;
            const s = seen.get(t.owner);
            if (s) s.last = at;
            else seen.set(t.owner, { resource: t.resource, first: at, last: at });
          }
          await sleep(20);
        }
      })();
      watcher.catch(() => undefined); // its failure is awaited below, not unhandled meanwhile
      const windows: FaultWindow[] = [];
      let longestDelay = 0;
      for (let i = 0; i < DELAY_WINDOWS; i++) {
        await sleep(300 + Math.random() * 400);
        // Each way: a reply comes 1.1-1.5 s after its call, past redisTimeoutMs; the call ran on the server before.
        const ms = 550 + Math.random() * 200;
        longestDelay = Math.max(longestDelay, ms);
        const start = Date.now();
        proxy.delay(ms);
        const probed = probe
          .lock(probes[i]!)
          .tryAcquireWrite({ owner: probes[i]! })
          .then(
            (lease) => lease,
            (error: unknown) => error,
          );
        await sleep(REDIS_TIMEOUT_MS + 300 + Math.random() * 700);
        proxy.delay(0);
        expect(await probed, `${probes[i]}'s try`).to.be.instanceOf(RedisUnavailableError);
        // What was sent in the window still arrives up to a round trip later.
        windows.push({ kind: 'other', start, end: Date.now() + 2 * ms });
      }
      await sleep(1_500);
      workload.stop();
      const history = await workload.finish(60_000);
      watching = false;
      await watcher;
      await probe.close();
      // A late grant: Redis granted it, the caller was told the acquire failed.
      const failed = new Set([...history.failures.map((f) => f.id), ...probes]);
      const late = [...seen].filter(([owner]) => failed.has(owner)).map(([owner, s]) => ({ owner, ...s, heldMs: s.last - s.first }));
      const handoff = longestHandoffMs(history, windows);
      // Known limit: a lease reported lost (its local deadline passed) while its renewal was on the wire
      // stays held if that renewal lands: nothing gives it back, it runs out a lease later.
      const leftover = await taken(inspector, [...RESOURCES, ...probes]);
      const lost = new Set(history.holds.filter((h) => h.lostAt !== undefined).map((h) => h.id));
      const result = checkAndReport('network: replies delayed past redisTimeoutMs', ctx, history, {
        counters: await counters(ctx.client(), RESOURCES),
        recoveryMs: handoff,
        notes:
          `${windows.length} windows of ${REDIS_TIMEOUT_MS + 300}-${REDIS_TIMEOUT_MS + 1_000} ms with 550-750 ms each way; ` +
          `${late.length} late grants seen in Redis (${probes.length} of a probe), each given back within ${Math.round(Math.max(0, ...late.map((l) => l.heldMs)))} ms of landing ` +
          `(lease ${LATE_LEASE_MS} ms, waitMs ${LATE_WAIT_MS}); ${leftover.length} leases reported lost still held at the end (a renewal that landed late); recovery = longest a released lock stayed taken while a process waited (delay windows not counted)`,
      });
      expect(result.violations).to.deep.equal([]);
      expect(result.grants).to.be.greaterThan(50); // most of the time, calls are slower than their bound
      expect(
        history.failures.filter((f) => f.name === 'RedisUnavailableError').length,
        'acquires that gave up at their bound',
      ).to.be.greaterThan(0);
      expect(
        probes.filter((p) => !seen.has(p)),
        'probes whose late grant was not seen in Redis',
      ).to.deep.equal([]);
      // Given back as it lands (a round trip through the delay, then the give-back's way there), well before its lease.
      for (const l of late) expect(l.heldMs, `${l.owner}'s late grant on ${l.resource} held for`).to.be.below(2 * longestDelay + 1_000);
      expect(handoff, 'longest a released lock stayed taken').to.be.below(LEASE_MS);
      expect(
        leftover.filter((t) => !lost.has(t.owner)),
        'taken once every process has finished (but leases reported lost)',
      ).to.deep.equal([]);
      const free = async () => (await taken(inspector!, [...RESOURCES, ...probes])).length === 0;
      if (leftover.length > 0) await eventually('the leases reported lost to run out', free, LATE_LEASE_MS + 1_000, 50);
    });
});
