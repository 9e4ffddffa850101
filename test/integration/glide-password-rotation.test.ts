// the GLIDE subscriber authenticates with the
// password GLIDE uses now. The library learns it by wrapping the client's
// updateConnectionPassword, but only once a subscriber is made (the first
// wait): a rotation after `new LockClient(...)` and before any waiter is not
// seen, and the subscriber then authenticates with the stale password from
// GLIDE's options for ever (WRONGPASS), waiters re-checking every recheckMs.
import { expect } from 'chai';
import { LockClient } from '../../src/index.js';
import { startRedisServer } from '../../src/testing/index.js';
import { ALL_CLIENTS, selectedClients, selectedTopologies } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';

const RECHECK_MS = 60_000;
const BOUND_MS = 13_000;

if (selectedClients(ALL_CLIENTS).includes('glide') && selectedTopologies().includes('standalone')) {
  describe('GLIDE password rotated before the first wait [standalone, glide]', () => {
    it('the first waiter after the rotation is woken within the bound', async function () {
      this.timeout(90_000);
      const redis = await startRedisServer();
      const admin = redis.client();
      const closing: { close(): void }[] = [];
      const opened: LockClient[] = [];
      try {
        await admin.config('SET', 'requirepass', 'old-secret');
        await admin.auth('old-secret');
        const { GlideClient } = await import('@valkey/valkey-glide');
        const options = {
          addresses: [{ host: '127.0.0.1', port: redis.port }],
          requestTimeout: 2_000,
          credentials: { password: 'old-secret' },
        };
        const holder = await GlideClient.createClient(options);
        const waiter = await GlideClient.createClient(options);
        closing.push(holder, waiter);
        const holderLocks = new LockClient(holder as never, { recheckMs: RECHECK_MS });
        const waiterLocks = new LockClient(waiter as never, { recheckMs: RECHECK_MS });
        opened.push(holderLocks, waiterLocks);
        // Used, uncontended: no subscriber made yet. Then the password turns.
        await (await waiterLocks.lock('r').acquireWrite()).release();
        await admin.config('SET', 'requirepass', 'new-secret');
        await admin.auth('new-secret');
        await holder.updateConnectionPassword('new-secret', true);
        await waiter.updateConnectionPassword('new-secret', true);
        const held = await holderLocks.lock('r').acquireWrite();
        const waiting = waiterLocks.lock('r').acquireWrite({ waitMs: 80_000 });
        await eventually('the writer queued', async () => (await holderLocks.inspect('r')).queue.length === 1, 10_000);
        await new Promise((resolve) => setTimeout(resolve, 3_000)); // its subscription tried
        await held.release();
        const released = performance.now();
        await (await waiting).release();
        const tookMs = performance.now() - released;
        console.log(
          `      [standalone, glide] rotated before the first wait: granted ${Math.round(tookMs)} ms after the release; subscriberErrors ${waiterLocks.stats().subscriberErrors}`,
        );
        expect(tookMs).to.be.below(BOUND_MS);
      } finally {
        for (const l of opened) await l.close();
        for (const c of closing) c.close();
        admin.disconnect();
        await redis.stop();
      }
    });
  });
}
