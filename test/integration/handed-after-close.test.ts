/**
 * A writer a release handed the lock extends that short handed hold to its
 * lease length a third of the way in (Holdings.extendHanded). A LockClient
 * closed before then extends nothing: a lease whose release close() could
 * not confirm ends with its handed hold, not a whole lease later.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { LockClient } from '../../src/index.js';
import { type FaultProxy, type RedisServerHandle, startFaultProxy } from '../../src/testing/index.js';
import { sharedStandalone } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';

describe('a handed hold after close() [standalone]', function () {
  this.timeout(30_000);
  let server: RedisServerHandle;
  let proxy: FaultProxy;
  let direct: Redis;
  let through: Redis;

  beforeEach(async () => {
    server = await sharedStandalone();
    proxy = await startFaultProxy({ target: { port: server.port } });
    direct = server.client();
    // A command lost with its connection stays lost: close()'s release must not come back later.
    through = new Redis({ host: proxy.host, port: proxy.port, autoResendUnfulfilledCommands: false });
    through.on('error', () => undefined); // the reset is the test's doing
  });
  afterEach(async () => {
    proxy.resume();
    through.disconnect();
    direct.disconnect();
    await proxy.close();
    await server.flush();
  });

  it('is not extended to its lease length once its LockClient closed', async () => {
    const holder = new LockClient(direct);
    // Handed holds last 2 x recheckMs + 100 ms (6.1 s); extended 2 s in, they would last a minute.
    const locks = new LockClient(through, { leaseMs: 60_000, recheckMs: 3_000, redisTimeoutMs: 200 });
    const held = await holder.lock('handed').acquireWrite();
    const waiting = locks.lock('handed').acquireWrite({ owner: 'w', waitMs: 10_000 });
    // Its first try queues; the second comes once it hears its channel, so it reads the message
    // that hands it the lock (a later try that found the hold would make it a whole lease).
    const beat = () => direct.hget(holder.lock('handed').keys.state, 'q:w');
    await eventually('the writer to queue', async () => (await beat()) !== null);
    const first = await beat();
    await eventually('its try after subscribing', async () => (await beat()) !== first);
    await held.release(); // hands the lock to the waiting writer
    const lease = await waiting;
    proxy.stall();
    await locks.close(); // its release is held back: not confirmed within redisTimeoutMs
    expect(lease.held, 'a lease whose release was not confirmed').to.equal(true);
    proxy.reset(); // the release goes with its connection
    proxy.resume();
    await eventually('the client to reconnect', () => through.status === 'ready'); // a call the library sends now reaches Redis
    // The handed hold ends about 6 s after the writer's try: the lock is free then.
    await eventually('the lock to be free', async () => (await holder.inspect('handed')).mode === 'free', 15_000, 100);
    await holder.close();
  });
});
