/**
 * What is GLIDE's own (the suites declared with ALL_CLIENTS run the rest on
 * it): scripts by `customCommand`, not GLIDE's `Script`; wake-ups, not re-checks, hand a lock over; on one
 * server the library's own subscriber connection comes back after it is
 * killed, its channels subscribed again.
 */
import { expect } from 'chai';
import type { LockRedisClient } from '../../src/clients/index.js';
import { LockClient, RedisUnavailableError } from '../../src/index.js';
import { startRedisServer } from '../../src/testing/index.js';
import { forEachTopology, type TopologyContext } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { glideClient } from '../support/glide-clients.js';
import { masters } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';

/** Sharded subscribers of `channel` over the masters (only its slot's has any). */
async function subscribers(ctx: TopologyContext, channel: string): Promise<number> {
  let total = 0;
  for (const node of await masters(ctx.client()))
    total += Number(((await node.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number])[1]);
  return total;
}

forEachTopology('GLIDE', { clients: ['glide'] }, (ctx) => {
  it('sends scripts as EVALSHA by customCommand, EVAL once per script, no GLIDE Script', async () => {
    const redis = await ctx.lockRedis();
    const sent: string[] = [];
    const target = redis as unknown as Record<'customCommand' | 'invokeScript', (...args: unknown[]) => Promise<unknown>>;
    const custom = target.customCommand.bind(redis);
    target.customCommand = (args, ...rest) => {
      sent.push(String((args as string[])[0]));
      return custom(args, ...rest);
    };
    target.invokeScript = () => Promise.reject(new Error('invokeScript: its SCRIPT LOAD on NOSCRIPT needs +script|load'));
    const first = new LockClient(redis);
    const second = new LockClient(redis);
    try {
      for (let i = 0; i < 2; i++) {
        await (await first.lock('scripts').acquireWrite()).release();
        await (await second.lock('scripts').acquireRead()).release();
      }
    } finally {
      await first.close();
      await second.close();
    }
    const scripts = sent.filter((c) => c === 'EVAL' || c === 'EVALSHA');
    expect(
      scripts.filter((c) => c === 'EVAL'),
      'EVAL: acquireWrite, release, acquireRead',
    ).to.have.length(3);
    expect(scripts).to.have.length(8);
  });

  it('hands a lock to a waiting writer by its wake-up, never by a re-check', async () => {
    const redis = await ctx.lockRedis();
    const holder = new LockClient(redis);
    const waiter = new LockClient(await ctx.lockRedis(), { recheckMs: 60_000 });
    try {
      for (let i = 0; i < 10; i++) {
        const lease = await holder.lock(`handover:{${i}}`).acquireWrite();
        const waiting = waiter.lock(`handover:{${i}}`).acquireWrite({ waitMs: 30_000 });
        waiting.catch(() => undefined); // a failed check below closes the client under it
        await eventually('the writer queued', async () => (await holder.inspect(`handover:{${i}}`)).queue.length > 0);
        await lease.release();
        await (await waiting).release(); // within 30 s: only a wake-up can have granted it
      }
      expect(waiter.stats()).to.include({ acquires: 10, pollingFallbacks: 0, subscriberErrors: 0 });
    } finally {
      await waiter.close();
      await holder.close();
    }
  });

  if (ctx.kind === 'standalone')
    it("subscribes again when the server closes the library's own subscriber connection", async () => {
      const holder = new LockClient(await ctx.lockRedis());
      const redis: LockRedisClient = await ctx.lockRedis();
      const waiter = new LockClient(redis, { recheckMs: 60_000 });
      const admin = ctx.client();
      try {
        const lease = await holder.lock('resubscribe').acquireWrite();
        const waiting = waiter.lock('resubscribe').acquireWrite({ waitMs: 30_000 });
        waiting.catch(() => undefined); // a failed check below closes the client under it
        const channel = waiter.lock('resubscribe').keys.channel;
        await eventually('the writer subscribed', async () => (await subscribers(ctx, channel)) === 1);
        expect(Number(await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub'))).to.equal(1);
        await eventually('the writer subscribed again', async () => (await subscribers(ctx, channel)) === 1);
        await lease.release();
        await (await waiting).release(); // woken on the new connection: recheckMs is 60 s
      } finally {
        await waiter.close();
        await holder.close();
      }
    });
});

describe("GLIDE: errors read as the library's, without GLIDE's trailing newline", function () {
  this.timeout(30_000);

  it('a request GLIDE timed out: "...timed out; the operation may be retried", one line', async () => {
    const server = await startRedisServer();
    const admin = server.client();
    const glide = await glideClient({ addresses: [{ host: '127.0.0.1', port: server.port }], requestTimeoutMs: 200 });
    const locks = new LockClient(glide, { redisTimeoutMs: 5_000 });
    try {
      await locks
        .lock('job:{1}')
        .acquireWrite()
        .then((lease) => lease.release()); // scripts loaded, server checked
      await admin.call('CLIENT', 'PAUSE', '1000', 'ALL'); // GLIDE's 200 ms requestTimeout passes first
      const error = await rejection(locks.lock('job:{1}').acquireWrite({ waitMs: 100 }));
      expect(error, String(error)).to.be.instanceOf(RedisUnavailableError);
      expect(error.message).to.not.include('\n');
      expect(error.message).to.match(/timed out; the operation may be retried$/i);
    } finally {
      await locks.close();
      glide.close();
      admin.disconnect();
      await server.stop();
    }
  });
});
