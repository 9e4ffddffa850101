/**
 * GLIDE fails a call whose connection was lost, and the driver sends it
 * again (src/clients/glide.ts, `resending`). A resent call must not land
 * after a call the library made later on the same client: a redlock or hash
 * acquire resent after its own withdrawal would leave a hold nobody owns
 * for up to its lease. One server behind a fault proxy that drops the
 * connection after the server ran the acquire, five times.
 */
import { expect } from 'chai';
import { holderArg, runScript } from '../../src/backends/scripts.js';
import { driverFor } from '../../src/clients/index.js';
import { lockKeys } from '../../src/keys/keys.js';
import { startFaultProxy } from '../../src/testing/index.js';
import { disconnect, forEachTopology } from '../setup/topologies.js';
import { connectLockClient, targetThrough } from '../support/targets.js';

const LEASE_MS = 60_000;

forEachTopology('GLIDE resends', { clients: ['glide'] }, (ctx) => {
  if (ctx.kind !== 'standalone') return;
  it('a call resent after its connection was lost lands before a call made after it (an acquire before its withdrawal)', async () => {
    const proxy = await startFaultProxy({ target: { port: ctx.server.port } });
    const redis = await connectLockClient(targetThrough(proxy, 'glide'));
    const driver = driverFor(redis)!;
    try {
      const keys = lockKeys('gr', 'order');
      const names = [keys.state, keys.leases, keys.queue] as const;
      const acquire = () => runScript(driver, 'acquireWrite', names, [LEASE_MS, holderArg('write', 'h1', 'X'), 0, '1h']);
      const withdraw = () => runScript(driver, 'abandon', names, ['X', 'h1']);
      await withdraw(); // each script sent once (EVAL): the next calls go as EVALSHA
      await runScript(driver, 'acquireWrite', names, [LEASE_MS, holderArg('write', 'h0', 'Y'), 0, '1h']);
      await runScript(driver, 'release', names, [holderArg('write', 'h0', 'Y')]);
      // The acquire runs, and its reply is lost with the connection, 5 times: GLIDE fails it, the
      // driver sends it again, each time after a longer pause (0, 20, 40, 80 ms, then 160).
      const acquiring = acquire().then(
        () => 'granted',
        (error: unknown) => `failed: ${error}`,
      );
      for (let drop = 0; drop < 5; drop++) await proxy.dropAfterReply({ argument: 'w h1 X' });
      // Meanwhile the library withdraws that acquire (its bound ended): a later call.
      const withdrawing = withdraw().then(
        () => 'withdrawn',
        (error: unknown) => `failed: ${error}`,
      );
      const outcomes = [await acquiring, await withdrawing];
      const admin = ctx.client();
      const state = await admin.hgetall(keys.state);
      expect({ outcomes, holder: state.w ?? state.o ?? null }).to.deep.equal({ outcomes: ['granted', 'withdrawn'], holder: null });
    } finally {
      disconnect(redis);
      await proxy.close();
    }
  });
});
