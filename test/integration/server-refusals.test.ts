/**
 * Every other way a busy or shared server says no, on one server and on the
 * Cluster master of the locks' slot: another client's long script (`BUSY`), a
 * failed background save (`MISCONF`), too few replicas (`NOREPLICAS`), a pause
 * of writes (`CLIENT PAUSE WRITE`, as managed failovers and upgrades do), and
 * no room for the wake-up subscriber's connection (`maxclients`). For each:
 * renewed leases ride it out, nothing is left held, every bound holds, and
 * where the server says why, the error is a `ServerRefusedError` naming it
 * and what to fix. Each test puts the server back in `finally`.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { type Lease, LockClient, RedisUnavailableError, type ServerCondition, ServerRefusedError } from '../../src/index.js';
import { forEachTopology, type TopologyContext } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { rejection } from '../support/rejection.js';

/** Every lock of these tests shares one hash tag: one master serves them all. */
const TAG = '{refusal}';
/** Renewed every second; a condition of a second or so costs nothing held. */
const LEASE_MS = 3_000;

/** The server of the locks' slot: an admin connection to it, and its process id. */
async function lockServer(ctx: TopologyContext): Promise<{ admin: Redis; pid: number }> {
  if (ctx.kind === 'standalone') return { admin: ctx.client(), pid: ctx.server.pid };
  const node = await ctx.cluster.masterForKey(TAG);
  const admin = node.client();
  return { admin, pid: node.pid };
}

/** The children of process `pid` (Linux): a server's background save. */
function childrenOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return text === '' ? [] : text.split(/\s+/).map(Number);
}

const infoField = async (admin: Redis, section: string, field: string) =>
  new RegExp(`^${field}:(\\S+)`, 'm').exec(await admin.info(section))?.[1];

/**
 * A LockClient holding renewed leases (a writer, two readers) and a writer
 * that waits behind another, through a condition `start` brings about and
 * `end` ends: a new try is refused with the condition's `ServerRefusedError`,
 * renewal is refused the same way while it lasts, the waiting writer waits
 * on, and once it ends every lease is still held, the waiting writer gets
 * the lock, and nothing is left.
 */
async function ridesOut(
  ctx: TopologyContext,
  condition: ServerCondition,
  fix: RegExp,
  start: (admin: Redis, pid: number) => Promise<void>,
  end: (admin: Redis) => Promise<void>,
): Promise<void> {
  const { admin, pid } = await lockServer(ctx);
  const locks = new LockClient(ctx.client(), { leaseMs: LEASE_MS });
  const refusedRenewals: ServerRefusedError[] = [];
  const others: string[] = [];
  locks.on('renewalFailed', (error: Error) => {
    if (error instanceof ServerRefusedError) refusedRenewals.push(error);
    else others.push(`renewalFailed: ${error.message}`);
  });
  locks.on('lost', (error: Error) => others.push(`lost: ${error.message}`));
  try {
    const held: Lease[] = [
      await locks.lock(`${TAG}:w`).acquireWrite(),
      await locks.lock(`${TAG}:r`).acquireRead(),
      await locks.lock(`${TAG}:r`).acquireRead(),
    ];
    const blocker = await locks.lock(`${TAG}:q`).acquireWrite();
    let waited: Lease | Error | undefined;
    const waiting = locks
      .lock(`${TAG}:q`)
      .acquireWrite({ waitMs: 30_000 })
      .then(
        (lease) => (waited = lease),
        (error: Error) => (waited = error),
      );
    await eventually('the writer to queue', async () => (await locks.lock(`${TAG}:q`).inspect()).queue.length === 1);

    let ended = false;
    await start(admin, pid);
    try {
      const refused = await rejection(locks.lock(`${TAG}:new`).tryAcquireWrite());
      expect(refused, refused.message).to.be.instanceOf(ServerRefusedError);
      expect((refused as ServerRefusedError).condition).to.equal(condition);
      expect(refused.message).to.match(fix);
      await eventually('a renewal refused', () => refusedRenewals.length > 0, 10_000);
      for (const error of refusedRenewals) expect(error.condition).to.equal(condition);
      expect(waited, 'the waiting writer, while the server refuses').to.equal(undefined);
      await end(admin);
      ended = true;
    } finally {
      if (!ended) await end(admin);
    }
    // Renewal comes through again: every lease still held, none reported lost.
    const renewals = locks.stats().renewals;
    await eventually('a renewal round after it', () => locks.stats().renewals > renewals, 10_000);
    expect(held.filter((lease) => !lease.held)).to.deep.equal([]);
    await blocker.release();
    await waiting;
    expect(waited, 'the waiting writer, once the server takes writes again').to.not.be.instanceOf(Error);
    await (waited as Lease).release();
    for (const lease of held) await lease.release();
    expect(others).to.deep.equal([]);
    expect(await admin.keys(`rwlock*${TAG}*`)).to.deep.equal([]);
  } finally {
    await locks.close();
  }
}

forEachTopology('a server that refuses', (ctx) => {
  it("BUSY: another client's script past busy-reply-threshold, until SCRIPT KILL", async function () {
    this.timeout(60_000);
    const { admin } = await lockServer(ctx);
    const threshold = ((await admin.config('GET', 'busy-reply-threshold')) as string[])[1]!;
    const runner = admin.duplicate();
    let running: Promise<unknown> = Promise.resolve();
    try {
      await ridesOut(
        ctx,
        'busy',
        /running another client's script .* SCRIPT KILL/,
        async (server) => {
          await server.config('SET', 'busy-reply-threshold', '100');
          running = runner.eval('while true do end', 0).catch(() => undefined);
          await eventually('the server to answer BUSY', async () =>
            String(await server.ping().catch((e: Error) => e.message)).startsWith('BUSY'),
          );
        },
        async (server) => {
          await server.call('SCRIPT', 'KILL');
          await running;
        },
      );
    } finally {
      await admin.call('SCRIPT', 'KILL').catch(() => undefined);
      await running;
      await admin.config('SET', 'busy-reply-threshold', threshold);
      runner.disconnect();
    }
  });

  it('MISCONF: a failed background save with stop-writes-on-bgsave-error, until a save succeeds', async function () {
    this.timeout(60_000);
    const { admin } = await lockServer(ctx);
    const save = ((await admin.config('GET', 'save')) as string[])[1]!;
    const saved = async (status: 'ok' | 'err') =>
      (await infoField(admin, 'persistence', 'rdb_bgsave_in_progress')) === '0' &&
      (await infoField(admin, 'persistence', 'rdb_last_bgsave_status')) === status;
    try {
      await ridesOut(
        ctx,
        'save-failed',
        /last background save failed .* stop-writes-on-bgsave-error no/,
        async (server, pid) => {
          // A save the server takes for failed: its child killed (slowed down so that it is still running).
          await server.config('SET', 'save', '3600 1');
          await server.config('SET', 'rdb-key-save-delay', '1000000');
          await server.set(`${TAG}:save`, '1');
          const before = new Set(childrenOf(pid));
          await server.bgsave();
          let child: number | undefined;
          await eventually('the save to fork', () => (child = childrenOf(pid).find((c) => !before.has(c))) !== undefined);
          process.kill(child!, 'SIGKILL');
          await eventually('the save to fail', () => saved('err'));
        },
        async (server) => {
          await server.del(`${TAG}:save`).catch(() => undefined);
          await server.config('SET', 'rdb-key-save-delay', '0');
          await server.bgsave();
          await eventually('a save to succeed', () => saved('ok'));
        },
      );
    } finally {
      await admin.config('SET', 'rdb-key-save-delay', '0');
      if (!(await saved('ok'))) {
        await admin.bgsave().catch(() => undefined);
        await eventually('a save to succeed', () => saved('ok'));
      }
      await admin.config('SET', 'save', save);
      await admin.del(`${TAG}:save`);
    }
  });

  it('NOREPLICAS: fewer replicas than min-replicas-to-write', async function () {
    this.timeout(60_000);
    const { admin } = await lockServer(ctx);
    const replicas = Number(await infoField(admin, 'replication', 'connected_slaves'));
    try {
      await ridesOut(
        ctx,
        'too-few-replicas',
        /fewer replicas than min-replicas-to-write .* lower min-replicas-to-write/,
        async (server) => void (await server.config('SET', 'min-replicas-to-write', String(replicas + 1))),
        async (server) => void (await server.config('SET', 'min-replicas-to-write', '0')),
      );
    } finally {
      await admin.config('SET', 'min-replicas-to-write', '0');
    }
  });

  it('CLIENT PAUSE WRITE: the calls wait, within their bounds; leases ride it out, a late grant is given back', async function () {
    this.timeout(60_000);
    const { admin } = await lockServer(ctx);
    const PAUSE_MS = 1_500;
    // The server answers nothing while paused, and says nothing of it: a call bounded below the pause times out.
    const patient = new LockClient(ctx.client(), { leaseMs: LEASE_MS, redisTimeoutMs: 2 * PAUSE_MS });
    const quick = new LockClient(ctx.client(), { leaseMs: LEASE_MS });
    const lost: string[] = [];
    patient.on('lost', (error: Error) => lost.push(error.message));
    try {
      const held = [await patient.lock(`${TAG}:w`).acquireWrite(), await patient.lock(`${TAG}:r`).acquireRead()];
      const blocker = await patient.lock(`${TAG}:q`).acquireWrite();
      const waiting = patient.lock(`${TAG}:q`).acquireWrite({ waitMs: 20_000 });
      await eventually('the writer to queue', async () => (await patient.lock(`${TAG}:q`).inspect()).queue.length === 1);
      await quick.lock(`${TAG}:new`).inspect(); // its server check done: its first call below is the try
      await admin.call('CLIENT', 'PAUSE', String(PAUSE_MS), 'WRITE');
      const paused = performance.now();
      const [tried, released] = await Promise.all([
        rejection(quick.lock(`${TAG}:new`).tryAcquireWrite()).then((error) => ({ error, ms: performance.now() - paused })),
        blocker.release().then(() => performance.now() - paused),
      ]);
      // The try's bound (redisTimeoutMs, 1 s) passed first: its outcome unknown, it is given back once the pause ends.
      expect(tried.error).to.be.instanceOf(RedisUnavailableError);
      expect(tried.error.message).to.match(/did not answer within 1000 ms/);
      expect(tried.ms, 'the try rejected within its bound (ms)').to.be.below(1_000 + 1_000);
      expect(released, 'the release, answered once the pause ended (ms)').to.be.at.least(PAUSE_MS - 100);
      await (await waiting).release();
      await eventually('the late grant given back', async () => (await admin.exists(quick.lock(`${TAG}:new`).keys.state)) === 0);
      expect(held.filter((lease) => !lease.held)).to.deep.equal([]);
      for (const lease of held) await lease.release();
      expect(lost).to.deep.equal([]);
      expect(await admin.keys(`rwlock*${TAG}*`)).to.deep.equal([]);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
      await quick.close();
      await patient.close();
    }
  });

  it('maxclients reached when the wake-up subscriber connects: waiters re-check, nothing is lost, wake-ups resume', async function () {
    this.timeout(60_000);
    const { admin } = await lockServer(ctx);
    const maxclients = ((await admin.config('GET', 'maxclients')) as string[])[1]!;
    const locks = new LockClient(ctx.client(), { leaseMs: LEASE_MS, recheckMs: 200 });
    const errors: Error[] = [];
    locks.on('subscriberError', (error: Error) => errors.push(error));
    try {
      // Its connection to the locks' master made; its subscriber connection not yet.
      const blocker = await locks.lock(`${TAG}:q`).acquireWrite();
      const connected = Number(await infoField(admin, 'clients', 'connected_clients'));
      await admin.config('SET', 'maxclients', String(connected));
      const waiting = locks.lock(`${TAG}:q`).acquireWrite({ waitMs: 20_000 });
      waiting.catch(() => undefined); // awaited below; a failed assertion before must not leave it unhandled
      await eventually('the subscriber refused', () => errors.length > 0);
      console.log(`      [${ctx.kind}] the subscriber at maxclients: ${[...new Set(errors.map((e) => e.message))].join(' | ')}`);
      // The client library hides the server's reply (ioredis: write EPIPE, the connection closed), so the
      // error says what it saw; a server reply naming it would be a ServerRefusedError ('maxclients').
      for (const error of errors) if (error instanceof ServerRefusedError) expect(error.condition).to.equal('maxclients');
      await blocker.release();
      const lease = await waiting; // by its re-check
      await admin.config('SET', 'maxclients', maxclients);
      // Room again: the subscriber connects, and a release wakes the next waiter.
      const next = locks.lock(`${TAG}:q`).acquireWrite({ waitMs: 20_000 });
      next.catch(() => undefined);
      const { channel } = locks.lock(`${TAG}:q`).keys;
      const subscribers = async () => Number(((await admin.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number])[1]);
      await eventually('the subscriber to connect and subscribe', async () => (await subscribers()) > 0, 20_000);
      await lease.release();
      await (await next).release();
      expect(await admin.keys(`rwlock*${TAG}*`)).to.deep.equal([]);
    } finally {
      await admin.config('SET', 'maxclients', maxclients);
      await locks.close();
    }
  });
});
