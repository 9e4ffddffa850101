// the connection reset while the one load after
// NOSCRIPT (its EVAL) is on the wire. The calls waiting for that load must
// settle within their bound (a resend of the load, or a retryable failure),
// never hang, and the server must not then see every call's whole script.
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { LockRedisClient } from '../../src/clients/index.js';
import { type Lease, LockClient } from '../../src/index.js';
import { type FaultProxy, startFaultProxy } from '../../src/testing/index.js';
import { ALL_CLIENTS, disconnect, forEachTopology } from '../setup/topologies.js';
import { connectLockClient, targetThrough } from '../support/targets.js';

const CALLS = 2_000;
const BOUND_MS = 3_000;

async function fullSends(node: Redis): Promise<number> {
  const info = await node.info('commandstats');
  let sends = 0;
  for (const m of info.matchAll(/^cmdstat_(eval|script\|load):calls=(\d+)/gm)) sends += Number(m[2]);
  return sends;
}

forEachTopology('the connection lost with the load after NOSCRIPT on it', { clients: ALL_CLIENTS }, (ctx) => {
  if (ctx.kind !== 'standalone') return;
  let proxy: FaultProxy | undefined;
  let through: LockRedisClient | undefined;
  afterEach(async () => {
    if (through) disconnect(through);
    through = undefined;
    await proxy?.close();
    proxy = undefined;
  });

  for (const how of ['drop', 'stall'] as const) {
    it(`${CALLS} releases after SCRIPT FLUSH, the load's reply ${how === 'drop' ? 'dropped with its connection' : 'held back past the bound'}: every call settles in its bound`, async function () {
      this.timeout(60_000);
      proxy = await startFaultProxy({ target: { port: ctx.server.port } });
      through = await connectLockClient(targetThrough(proxy, ctx.clientKind));
      const admin = ctx.client();
      const locks = new LockClient(through, { leaseMs: 60_000, redisTimeoutMs: BOUND_MS });
      try {
        const leases: Lease[] = [];
        for (let i = 0; i < CALLS + 100; i += 500) {
          leases.push(...(await Promise.all(Array.from({ length: 500 }, (_, j) => locks.lock(`lr:${i + j}`).acquireWrite()))));
        }
        await Promise.all(leases.splice(0, 100).map((l) => l.release()));
        await admin.script('FLUSH');
        await admin.config('RESETSTAT');
        const fault = how === 'drop' ? proxy.dropAfterReply({ command: 'eval' }) : proxy.stallAtReply({ command: 'eval' });
        const started = performance.now();
        const settled: number[] = [];
        const outcomes = Promise.allSettled(
          leases.map((l) =>
            l.release().finally(() => {
              settled.push(performance.now() - started);
            }),
          ),
        );
        await fault;
        if (how === 'stall') setTimeout(() => proxy?.resume(), BOUND_MS + 2_000);
        const results = await outcomes;
        const failed: Record<string, number> = {};
        for (const r of results) {
          if (r.status === 'rejected') {
            const m = String((r.reason as Error).message).replace(/"[^"]*"/g, '"…"');
            failed[m] = (failed[m] ?? 0) + 1;
          }
        }
        const slowest = Math.max(...settled);
        const sends = await fullSends(admin);
        console.log(
          `      [${ctx.kind}, ${ctx.clientKind}] load ${how}: slowest ${Math.round(slowest)} ms; full sends ${sends}; failed ${JSON.stringify(failed)}`,
        );
        expect(slowest, 'the slowest call').to.be.below(BOUND_MS + 1_500);
        expect(sends, 'full-script sends').to.be.at.most(4);
      } finally {
        proxy.resume();
        await locks.close().catch(() => undefined);
      }
    });
  }
});
