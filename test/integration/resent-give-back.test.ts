/**
 * A redlock writer that gives back a grant no majority joined sends release
 * with its queue place (lua/release.lua ARGV 2-4): it stays queued at that
 * place. Running that give-back twice (a resend after a lost reply) must
 * leave the lock as the first delivery left it: the writer still queued, the
 * holder's fence and lease untouched. Script-level: the release script is
 * called twice directly, then once more through a client that resends it
 * because the fault proxy dropped the first reply.
 */
import { expect } from 'chai';
import type { Cluster, Redis } from 'ioredis';
import type { Requeue } from '../../src/backends/backend.js';
import { hashLayout } from '../../src/backends/layouts.js';
import { ScriptedBackend } from '../../src/backends/scripted.js';
import { holderArg, runScript } from '../../src/backends/scripts.js';
import { driverFor } from '../../src/clients/index.js';
import { type LockKeys, lockKeys } from '../../src/keys/keys.js';
import type { RedisClient } from '../../src/redis.js';
import { startFaultProxy } from '../../src/testing/index.js';
import { disconnect, forEachTopology, selectedClients } from '../setup/topologies.js';
import { connectLockClient, targetThrough } from '../support/targets.js';

const LEASE_MS = 60_000;
const BEAT_MS = 60_000;
/** Queue places (server µs): far before any arrival by the server's clock. */
const EARLY = 1_000;
const LATER = 2_000;

const names = (keys: LockKeys) => [keys.state, keys.leases, keys.queue] as const;

/** Everything the lock keeps but the keys' expiry (a duplicate may move that only forward). */
async function snapshot(redis: Redis | Cluster, keys: LockKeys) {
  return {
    state: await redis.hgetall(keys.state),
    leases: await redis.zrange(keys.leases, '0', '-1', 'WITHSCORES'),
    queue: await redis.zrange(keys.queue, '0', '-1', 'WITHSCORES'),
  };
}

async function acquireWrite(redis: RedisClient, keys: LockKeys, holdId: string, owner: string, place?: number) {
  const args = [LEASE_MS, holderArg('write', holdId, owner), BEAT_MS, '1h'] as const;
  return runScript(driverFor(redis), 'acquireWrite', names(keys), place === undefined ? args : [...args, place]);
}

function giveBack(redis: RedisClient, keys: LockKeys, holdId: string, owner: string, placeUs: number) {
  return runScript(driverFor(redis), 'release', names(keys), [holderArg('write', holdId, owner), placeUs, BEAT_MS, LEASE_MS]);
}

forEachTopology('A give-back at a queue place, run twice', (ctx) => {
  it('leaves the writer queued at its place when an earlier place was handed the lock', async () => {
    const redis = ctx.client();
    const keys = lockKeys('rg', 'twice');
    expect(await acquireWrite(redis, keys, 'w1', 'W')).to.be.a('number'); // W holds
    await acquireWrite(redis, keys, 'e1', 'E', EARLY); // E queues at an earlier place
    expect(await giveBack(redis, keys, 'w1', 'W', LATER)).to.equal(0); // E is handed the lock; W queues
    const first = await snapshot(redis, keys);
    expect(first.state.w).to.equal('E');
    expect(first.queue).to.deep.equal(['W', String(LATER)]);
    await giveBack(redis, keys, 'w1', 'W', LATER); // the resend
    expect(await snapshot(redis, keys)).to.deep.equal(first);
    // So W, not a writer queued after it, gets the lock when E releases.
    await acquireWrite(redis, keys, 'x1', 'X', LATER + 1);
    await runScript(driverFor(redis), 'release', names(keys), [holderArg('write', 'e1', 'E')]);
    expect(await redis.hget(keys.state, 'w')).to.equal('W');
  });

  it('leaves the hold as it is when the writer is the earliest place (the lock would come straight back)', async () => {
    const redis = ctx.client();
    const keys = lockKeys('rg', 'own');
    await acquireWrite(redis, keys, 'w1', 'W');
    // Another acquire spills the fresh grant into the usual layout, as a redlock lock with waiters is.
    await acquireWrite(redis, keys, 'x1', 'X', LATER + 1);
    const before = await snapshot(redis, keys);
    expect(await giveBack(redis, keys, 'w1', 'W', LATER)).to.equal(0);
    const first = await snapshot(redis, keys);
    await giveBack(redis, keys, 'w1', 'W', LATER);
    expect(await snapshot(redis, keys), 'after the resend').to.deep.equal(first);
    expect(first, 'after the first delivery').to.deep.equal(before);
  });
  // The clients that send a lost call again: ioredis by itself, GLIDE through the library's driver.
  for (const kind of ctx.kind === 'standalone' ? selectedClients(['ioredis', 'glide']) : []) {
    it(`resent by the client after a lost reply, leaves the writer queued at its place (${kind})`, async () => {
      if (ctx.kind !== 'standalone') return;
      const admin = ctx.client() as Redis;
      const proxy = await startFaultProxy({ target: { port: ctx.server.port } });
      const through = await connectLockClient(targetThrough(proxy, kind));
      try {
        const keys = lockKeys('rg', 'resent');
        await acquireWrite(admin, keys, 'w1', 'W');
        await acquireWrite(admin, keys, 'e1', 'E', EARLY);
        const backend = new ScriptedBackend(driverFor(through)!, hashLayout('rg'));
        await backend.inspect('resent', keys); // the connection is up and past the server check
        const scripts = () => (proxy.stats.commands.eval ?? 0) + (proxy.stats.commands.evalsha ?? 0);
        const before = scripts();
        const requeue: Requeue = { placeUs: LATER, beatMs: BEAT_MS, leaseMs: LEASE_MS };
        // The release (its first call on this client is EVAL, not EVALSHA).
        const dropped = proxy.dropAfterReply({ argument: 'w w1 W' });
        const released = backend.release(keys, 'write', 'W', 'w1', requeue);
        await dropped;
        await released; // the resend's reply
        expect(proxy.stats.drops).to.equal(1);
        expect(scripts() - before, 'release calls the server ran').to.equal(2);
        expect(await admin.hget(keys.state, 'w')).to.equal('E');
        expect(await admin.zrange(keys.queue, '0', '-1', 'WITHSCORES')).to.deep.equal(['W', String(LATER)]);
        expect(await admin.hget(keys.state, 'g:W')).to.equal(`w1 ${LEASE_MS}`);
      } finally {
        disconnect(through);
        await proxy.close();
      }
    });
  }
});
