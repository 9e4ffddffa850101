// Soak: a bounded run at high contention in this process (SOAK_MS per
// topology, default 60 s), whose client heap, Redis used_memory and open
// connections must stay flat, and after whose close() no timer, subscription
// or key of the library is left.
//
// Run with --expose-gc (the fault suite's mocha config does) so that heap
// samples are taken after a full collection; without it they are noisier and
// the tolerance is wider.
import { expect } from 'chai';
import { type Cluster, Redis } from 'ioredis';
import { AcquireTimeoutError, type Lease, LockClient } from '../../src/index.js';
import { lockKeys } from '../../src/keys/keys.js';
import { parseInfo } from '../../src/testing/admin.js';
import { forEachTopology, type TopologyContext } from '../setup/topologies.js';

const SOAK_MS = Number(process.env.SOAK_MS ?? 60_000);
const WARMUP_MS = Math.min(5_000, SOAK_MS / 6);
const CLIENTS = 4;
const LOOPS_PER_CLIENT = 6;
const RESOURCES = ['s1', 's2', 's3', 's4'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const gc = (globalThis as { gc?: () => void }).gc;

interface Sample {
  at: number;
  heapUsed: number;
  usedMemory: number;
  connectedClients: number;
  operations: number;
}

/** One connection of its own to every master (the server, or each Cluster master). */
async function masterConnections(ctx: TopologyContext): Promise<Redis[]> {
  const nodes = ctx.kind === 'cluster' ? await ctx.cluster.masters() : [ctx.server];
  return nodes.map((n) => new Redis(n.port, n.host, { maxRetriesPerRequest: 1 }));
}

async function redisFigures(conns: readonly Redis[]): Promise<{ usedMemory: number; connectedClients: number }> {
  let usedMemory = 0;
  let connectedClients = 0;
  for (const conn of conns) {
    usedMemory += Number(parseInfo(await conn.info('memory')).get('used_memory'));
    connectedClients += Number(parseInfo(await conn.info('clients')).get('connected_clients'));
  }
  return { usedMemory, connectedClients };
}

function heapUsed(): number {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
}

/** Active resources of this process by type (timers, sockets...). */
function resources(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const type of process.getActiveResourcesInfo()) counts.set(type, (counts.get(type) ?? 0) + 1);
  return counts;
}

forEachTopology('soak', (ctx) => {
  it(`stays flat in memory and connections over ${SOAK_MS / 1000} s of high contention, and leaves nothing behind`, async function () {
    this.timeout(SOAK_MS + 120_000);
    const conns = await masterConnections(ctx);
    try {
      await soak(ctx, conns);
    } finally {
      for (const conn of conns) conn.disconnect();
    }
  });
});

async function soak(ctx: TopologyContext, conns: readonly Redis[]): Promise<void> {
  await sleep(200);
  const baseline = resources(); // before any client of the soak exists
  const redisClients: (Redis | Cluster)[] = Array.from({ length: CLIENTS }, () => ctx.client());
  await Promise.all(redisClients.map((r) => r.ping()));
  const clients = redisClients.map((r) => new LockClient(r, { leaseMs: 3_000, recheckMs: 200 }));

  let stop = false;
  let operations = 0;
  let timeouts = 0;
  let lost = 0;
  for (const c of clients) c.on('lost', () => lost++);
  const loop = async (locks: LockClient, i: number) => {
    while (!stop) {
      const resource = RESOURCES[Math.floor(Math.random() * RESOURCES.length)]!;
      const kind = Math.random();
      try {
        if (kind < 0.35) {
          await locks.withRead(resource, () => sleep(Math.random() * 3), { waitMs: 2_000 });
        } else if (kind < 0.7) {
          await locks.withWrite(resource, () => sleep(Math.random() * 2), { waitMs: 2_000 });
        } else if (kind < 0.8) {
          // Short waits that often time out: the queue and intent clean-up paths.
          await locks.withWrite(resource, () => undefined, { waitMs: 5 });
        } else if (kind < 0.9) {
          const lease: Lease | null = await locks.lock(resource).tryAcquireRead({ leaseMs: 1_000 });
          if (lease) {
            await lease.extend();
            await lease.release();
          }
        } else {
          // Reentrant read, then an upgrade attempt that may wait or conflict.
          await locks.withRead(
            resource,
            async () => {
              await locks.withRead(resource, () => undefined);
              const w = await locks.lock(resource).tryAcquireWrite({ owner: `${i}-${operations}` });
              await w?.release();
            },
            { waitMs: 2_000 },
          );
        }
      } catch (error) {
        if (error instanceof AcquireTimeoutError) timeouts++;
        else throw error;
      }
      operations++;
    }
  };
  // A loop's unexpected error stops the soak and fails the test once, at the end, as one rejection
  // (not as an unhandled rejection while the samples are still being taken).
  let failure: unknown;
  const running = clients.flatMap((c, k) =>
    Array.from({ length: LOOPS_PER_CLIENT }, (_, j) =>
      loop(c, k * LOOPS_PER_CLIENT + j).catch((error: unknown) => {
        failure ??= error;
        stop = true;
      }),
    ),
  );

  const samples: Sample[] = [];
  const sample = async () => samples.push({ at: Date.now(), heapUsed: heapUsed(), ...(await redisFigures(conns)), operations });
  const started = Date.now();
  await sleep(WARMUP_MS);
  await sample();
  while (!stop && Date.now() - started < SOAK_MS) {
    await sleep(Math.min(10_000, SOAK_MS - (Date.now() - started)));
    await sample();
  }
  stop = true;
  await Promise.all(running);
  if (failure !== undefined) {
    await Promise.all(clients.map((c) => c.close()));
    throw failure;
  }
  await Promise.all(clients.map((c) => c.close()));
  await sleep(300);
  const first = samples[0]!;
  const last = samples.at(-1)!;
  const mb = (n: number) => `${(n / 2 ** 20).toFixed(1)} MB`;
  console.log(
    `      soak [${ctx.kind}]: ${operations} operations in ${((last.at - started) / 1000).toFixed(0)} s (${timeouts} timed out by design, ${lost} leases lost); ` +
      `heap ${mb(first.heapUsed)} -> ${mb(last.heapUsed)}, Redis used_memory ${mb(first.usedMemory)} -> ${mb(last.usedMemory)}, ` +
      `connected_clients ${first.connectedClients} -> ${last.connectedClients}${gc ? '' : ' (no --expose-gc)'}`,
  );
  for (const s of samples)
    console.log(
      `        t=${((s.at - started) / 1000).toFixed(0)}s ops=${s.operations} heap=${mb(s.heapUsed)} used_memory=${mb(s.usedMemory)} clients=${s.connectedClients}`,
    );

  expect(operations).to.be.greaterThan(1_000);
  expect(lost, 'leases lost').to.equal(0);
  // Flat: the end is within a tolerance of the start, and no sample of the second half ran away.
  const heapTolerance = Math.max((gc ? 8 : 24) * 2 ** 20, first.heapUsed * 0.25);
  for (const s of samples.slice(Math.floor(samples.length / 2))) {
    expect(s.heapUsed - first.heapUsed, `heap growth at ${s.at - started} ms`).to.be.below(heapTolerance);
    expect(s.usedMemory - first.usedMemory, `Redis used_memory growth at ${s.at - started} ms`).to.be.below(2 * 2 ** 20);
    expect(s.connectedClients, 'connected clients').to.equal(first.connectedClients);
  }

  // After close(), and once the ioredis clients passed in are closed too: no timer or socket left.
  const end = await redisFigures(conns);
  for (const r of redisClients) r.disconnect();
  await sleep(500);
  const after = resources();
  for (const type of new Set([...baseline.keys(), ...after.keys()])) {
    if (type === 'FSReqCallback' || type === 'FSEventWrap') continue; // mocha's own file activity
    expect(after.get(type) ?? 0, `active ${type} after close()`).to.be.at.most(baseline.get(type) ?? 0);
  }
  // No subscription and no key left.
  const channels = RESOURCES.map((r) => lockKeys('rwlock', r).channel);
  for (const conn of conns) {
    const reply = (await conn.call('PUBSUB', 'SHARDNUMSUB', ...channels)) as (string | number)[];
    for (let i = 1; i < reply.length; i += 2) expect(Number(reply[i]), `subscribers of ${reply[i - 1]}`).to.equal(0);
    expect(await conn.dbsize(), 'keys left').to.equal(0);
  }
  console.log(
    `        after close(): connected_clients ${end.connectedClients} (the test's own ioredis clients still open), used_memory ${mb(end.usedMemory)}`,
  );
}
