/**
 * What is GLIDE's own (the suites declared with ALL_CLIENTS run the rest on
 * it): the `Script` objects the driver keeps while a LockClient uses it, and
 * releases on `close()`; wake-ups, not re-checks, hand a lock over; on one
 * server the library's own subscriber connection comes back after it is
 * killed, its channels subscribed again.
 */
import { Script } from '@valkey/valkey-glide';
import { expect } from 'chai';
import { CallGate } from '../../src/clients/glide.js';
import { driverFor, type LockRedisClient } from '../../src/clients/index.js';
import { LockClient } from '../../src/index.js';
import { forEachTopology, type TopologyContext } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { masters } from '../support/redis-stats.js';

/** Sharded subscribers of `channel` over the masters (only its slot's has any). */
async function subscribers(ctx: TopologyContext, channel: string): Promise<number> {
  let total = 0;
  for (const node of await masters(ctx.client()))
    total += Number(((await node.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number])[1]);
  return total;
}

forEachTopology('GLIDE', { clients: ['glide'] }, (ctx) => {
  it('keeps a Script per script a LockClient ran, until the last LockClient on the client closes', async () => {
    const redis = await ctx.lockRedis();
    const invoked = new Set<Script>();
    const released: Script[] = [];
    const target = redis as unknown as { invokeScript(script: Script, options: unknown): Promise<unknown> };
    const invoke = target.invokeScript.bind(redis);
    target.invokeScript = (script, options) => {
      invoked.add(script);
      return invoke(script, options);
    };
    const release = Script.prototype.release;
    Script.prototype.release = function (this: Script) {
      released.push(this);
      release.call(this);
    };
    try {
      const first = new LockClient(redis);
      const second = new LockClient(redis);
      for (let i = 0; i < 2; i++) {
        await (await first.lock('scripts').acquireWrite()).release(); // the second round by Script
        await (await second.lock('scripts').acquireRead()).release();
      }
      expect(invoked.size, 'Scripts invoked: acquireWrite, acquireRead, release').to.equal(3);
      await first.close();
      expect(released, 'released while a LockClient still uses them').to.deep.equal([]);
      await (await second.lock('scripts').acquireWrite()).release();
      await second.close();
      expect(new Set(released)).to.deep.equal(invoked);
      expect(released).to.have.length(invoked.size);
    } finally {
      Script.prototype.release = release;
    }
  });

  it('runs the calls still waiting in its call gate when the last LockClient closes, with the scripts not yet released', async () => {
    const redis = await ctx.lockRedis();
    const driver = driverFor(redis)!;
    // One call in flight at a time: the rest wait in the gate.
    (driver as unknown as { gate: CallGate }).gate = new CallGate(1);
    // A released Script still runs while the server has its SHA; after a flush GLIDE has no code to load.
    const released = new Set<Script>();
    let invokedReleased = 0;
    const target = redis as unknown as { invokeScript(script: Script, options: unknown): Promise<unknown> };
    const invoke = target.invokeScript.bind(redis);
    target.invokeScript = (script, options) => {
      if (released.has(script)) invokedReleased++;
      return invoke(script, options);
    };
    const release = Script.prototype.release;
    Script.prototype.release = function (this: Script) {
      released.add(this);
      release.call(this);
    };
    try {
      const end = driver.retain!();
      const fencedGet = () => driver.script('fencedGet', [2, '{gate}:value', '{gate}:fence', 1]);
      expect(await fencedGet()).to.equal(null); // the first call (EVAL); the next ones by Script
      expect(await fencedGet()).to.equal(null);
      const calls = Array.from({ length: 8 }, fencedGet);
      end(); // the last user is done while 7 calls wait in the gate
      const settled = await Promise.allSettled(calls);
      const failures = settled.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : []));
      expect(failures, 'calls that failed').to.deep.equal([]);
      expect(invokedReleased, 'calls run with a released Script').to.equal(0);
      expect(released.size, 'Scripts released once the calls ended').to.equal(1);
    } finally {
      Script.prototype.release = release;
    }
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
