/**
 * `redlock` mode's operations of many calls per node: renewal of many leases
 * (each node renews them in calls of EXTEND_BUDGET_US of server time, as in
 * the other modes) and inspect of a lock of many readers (in pages of
 * INSPECT_BUDGET_US). `nodeTimeoutMs` bounds each call's answer, not the
 * node's whole operation. Here the nodes (the topology's server or Cluster,
 * and two independent servers) answer every call through a fault proxy's
 * delay: each call in well under `nodeTimeoutMs`, the whole in several times
 * it. An operation that the timeout cut off as a whole decided nothing.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { expect } from 'chai';
import { EXTEND_BUDGET_US } from '../../src/backends/extend-groups.js';
import type { LockRedisClient } from '../../src/clients/index.js';
import { LockClient, type RenewTraceContext, TRACING_CHANNELS } from '../../src/index.js';
import {
  type ClusterFaultProxy,
  type FaultProxy,
  proxyCluster,
  type RedisMastersHandle,
  startFaultProxy,
  startRedisMasters,
} from '../../src/testing/index.js';
import { disconnect, forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { connectLockClient, targetThrough } from '../support/targets.js';

const LEASES = 1_000;
const READERS = 1_000;
const NODE_TIMEOUT_MS = 300;
/** Each way: a call answers in some 2 × this, well under NODE_TIMEOUT_MS; a round takes many. */
const DELAY_MS = 20;

forEachTopology('redlock operations of many calls per node', (ctx) => {
  let masters: RedisMastersHandle;
  before(async function () {
    this.timeout(60_000);
    masters = await startRedisMasters(2);
  });
  after(async () => {
    await masters?.stop();
  });

  /** The three nodes, each through a fault proxy of its own. */
  async function throughProxies(): Promise<{ proxies: (FaultProxy | ClusterFaultProxy)[]; nodes: LockRedisClient[] }> {
    const proxies: (FaultProxy | ClusterFaultProxy)[] = [
      ctx.kind === 'cluster' ? await proxyCluster(ctx.cluster) : await startFaultProxy({ target: { port: ctx.server.port } }),
      ...(await Promise.all(masters.servers.map((s) => startFaultProxy({ target: { port: s.port } })))),
    ];
    const nodes: LockRedisClient[] = [];
    for (const proxy of proxies) nodes.push(await connectLockClient(targetThrough(proxy)));
    return { proxies, nodes };
  }

  it(`renews ${LEASES} leases on nodes each call of which answers within nodeTimeoutMs, the round taking longer`, async function () {
    this.timeout(30_000);
    const { proxies, nodes } = await throughProxies();
    // Renewed every 2 s; a round through the delay takes about one second.
    const locks = new LockClient(nodes, { mode: 'redlock', leaseMs: 6_000, redlock: { nodeTimeoutMs: NODE_TIMEOUT_MS } });
    let lost = 0;
    let failed = 0;
    locks.on('lost', (_error, leases) => (lost += leases.length));
    locks.on('renewalFailed', () => failed++);
    const ended: RenewTraceContext[] = [];
    const channel = `tracing:${TRACING_CHANNELS.renew}:asyncEnd`;
    const onEnd = (context: unknown) => void ended.push(context as RenewTraceContext);
    subscribe(channel, onEnd);
    try {
      for (let i = 0; i < LEASES; i += 100) {
        await Promise.all(Array.from({ length: 100 }, (_, k) => locks.lock(`{many}:${i + k}`).acquireWrite()));
      }
      // The first round also moves each lock's sole holder out of its hash: more calls. Then the delay,
      // which the next round runs through wholly.
      await eventually('a first renewal round', () => ended.length > 0, 10_000);
      for (const proxy of proxies) proxy.delay(DELAY_MS);
      const from = ended.length;
      await eventually('a renewal round through the delay', () => ended.length > from, 10_000);
      const round = ended[from]!;
      expect(round.holdings).to.equal(LEASES);
      expect(round.error, 'the round decided').to.equal(undefined);
      expect(round.renewed, 'every lease renewed by a majority').to.equal(LEASES);
      // One call per lease would take no more than 1,000 calls; each node's take many calls of EXTEND_BUDGET_US.
      expect(round.calls, `calls of ${EXTEND_BUDGET_US} µs, on three nodes`).to.be.above(3 * 8);
      expect(lost, 'leases lost').to.equal(0);
      expect(failed, 'renewal failures').to.equal(0);
    } finally {
      unsubscribe(channel, onEnd);
      for (const proxy of proxies) proxy.delay(0);
      await locks.close();
      for (const node of nodes) disconnect(node);
      for (const proxy of proxies) await proxy.close();
    }
  });

  it(`inspects a lock of ${READERS} readers on nodes each call of which answers within nodeTimeoutMs, the read taking longer`, async function () {
    this.timeout(30_000);
    const { proxies, nodes } = await throughProxies();
    const locks = new LockClient(nodes, { mode: 'redlock', redlock: { nodeTimeoutMs: NODE_TIMEOUT_MS } });
    try {
      for (let i = 0; i < READERS; i += 100) {
        await Promise.all(
          Array.from({ length: 100 }, (_, k) => locks.lock('crowd').acquireRead({ owner: `reader-${i + k}`, leaseMs: 60_000 })),
        );
      }
      for (const proxy of proxies) proxy.delay(DELAY_MS);
      const info = await locks.inspect('crowd');
      expect(info.readers, 'the readers a majority lists').to.have.length(READERS);
      expect(info.nodes?.every((node) => node?.readers.length === READERS)).to.equal(true);
    } finally {
      for (const proxy of proxies) proxy.delay(0);
      await locks.close();
      for (const node of nodes) disconnect(node);
      for (const proxy of proxies) await proxy.close();
    }
  });
});
