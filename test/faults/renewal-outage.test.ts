// Renewal that rides out an outage, whatever its phase against the renewal
// period. A fault proxy stalls every connection of a
// LockClient (leaseMs 3000, redisTimeoutMs 200, renewed every 1000 ms) at a
// phase after a renewal round starts. A round that fails is retried soon,
// not a period later, so the lease must survive an outage of the documented
// bound (docs/production.md, "Choosing leaseMs": 2 × leaseMs / 3 −
// 2 × redisTimeoutMs = 1600 ms) at every phase; when the outage ends with
// every connection reset (the tries on the wire lost), the bound less the
// client's reconnect delay, allowed 300 ms here (it took 60-160 ms); and one
// that ends 2 × redisTimeoutMs before the lease's deadline. Before the retries, 1600 ms starting 950 ms after a round lost
// the lease: the next try came a period later.
import { expect } from 'chai';
import type { LockRedisClient } from '../../src/clients/index.js';
import { type ClusterFaultProxy, type FaultProxy, proxyCluster, startFaultProxy } from '../../src/testing/index.js';
import { disconnect, forEachTopology } from '../setup/topologies.js';
import { type OutageTrial, outageTrial } from '../support/outage.js';
import { connectLockClient, targetThrough } from '../support/targets.js';

const LEASE_MS = 3_000;
const REDIS_TIMEOUT_MS = 200;
/** The documented bound: any outage shorter than this is ridden out. */
const BOUND_MS = (2 * LEASE_MS) / 3 - 2 * REDIS_TIMEOUT_MS;
/** What the documented bound leaves for the client to reconnect after a reset, for the cut outages. */
const RECONNECT_MS = 300;
/** Phases after a round's start: just after it, midway, just before the next. */
const PHASES_MS = [50, 500, 950];

forEachTopology('renewal through an outage', { clients: ['ioredis', 'node-redis6'] }, (ctx) => {
  let proxy: FaultProxy | ClusterFaultProxy | undefined;
  let redis: LockRedisClient | undefined;
  beforeEach(async () => {
    proxy = ctx.kind === 'standalone' ? await startFaultProxy({ target: { port: ctx.server.port } }) : await proxyCluster(ctx.cluster);
    redis = await connectLockClient(targetThrough(proxy, ctx.clientKind));
  });
  afterEach(async () => {
    if (redis) disconnect(redis);
    await proxy?.close();
    proxy = redis = undefined;
  });

  const trial = (phaseMs: number, outageMs: number, resource: string, cut = false): Promise<OutageTrial> =>
    outageTrial(redis!, proxy!, { leaseMs: LEASE_MS, redisTimeoutMs: REDIS_TIMEOUT_MS, phaseMs, outageMs, resource, cut });
  const show = (trials: readonly OutageTrial[]) =>
    console.log(
      `        ${trials.map((t) => `phase ${Math.round(t.phaseMs)} ms, outage ${Math.round(t.outageMs)} ms: ${t.survived ? 'held' : 'lost'}`).join('; ')}`,
    );

  it(`a lease survives a ${BOUND_MS} ms outage at every phase of the renewal period`, async function () {
    this.timeout(60_000);
    const trials: OutageTrial[] = [];
    for (const phase of PHASES_MS) trials.push(await trial(phase, BOUND_MS, `outage:${phase}`));
    show(trials);
    expect(trials.filter((t) => !t.survived)).to.deep.equal([]);
  });

  it(`a lease survives a ${BOUND_MS - RECONNECT_MS} ms outage that ends with every connection reset`, async function () {
    this.timeout(60_000);
    const trials: OutageTrial[] = [];
    for (const phase of [50, 950]) trials.push(await trial(phase, BOUND_MS - RECONNECT_MS, `cut:${phase}`, true));
    show(trials);
    expect(trials.filter((t) => !t.survived)).to.deep.equal([]);
  });

  it('a lease survives an outage that ends 2 × redisTimeoutMs before its deadline', async function () {
    this.timeout(60_000);
    const trials: OutageTrial[] = [];
    // The deadline is leaseMs after the round before the outage: the outage ends 400 ms before it.
    for (const phase of [50, 950]) trials.push(await trial(phase, LEASE_MS - phase - 2 * REDIS_TIMEOUT_MS, `deadline:${phase}`));
    show(trials);
    expect(trials.filter((t) => !t.survived)).to.deep.equal([]);
  });
});
