// a process whose LockClient is closed (and its Redis
// clients closed) while the hub has echo checks pending and reconnects
// armed (the server stopped, SIGSTOP) must exit: no timer of the library
// keeps it alive. argv: client kind, server port, linkCheckMs.
import { LockClient } from '../../src/index.js';
import { eventually } from '../support/eventually.js';
import { connectLockClient } from '../support/targets.js';

const [kind, port, linkCheckMs] = [process.argv[2] as 'ioredis' | 'node-redis' | 'glide', Number(process.argv[3]), Number(process.argv[4])];
const target = { kind: 'standalone' as const, nodes: [{ host: '127.0.0.1', port }], client: kind };
const holderRedis = await connectLockClient(target);
const waiterRedis = await connectLockClient(target);
const holderLocks = new LockClient(holderRedis, { recheckMs: 60_000, redisTimeoutMs: 1_000, linkCheckMs });
const waiterLocks = new LockClient(waiterRedis, { recheckMs: 60_000, redisTimeoutMs: 1_000, linkCheckMs });
const errors: string[] = [];
waiterLocks.on('subscriberError', (error) => errors.push(error.message));

holderLocks.on('lost', () => undefined);
const held = await holderLocks.lock('exit').acquireWrite();
void held;
waiterLocks
  .lock('exit')
  .acquireWrite({ waitMs: 60_000 })
  .catch(() => undefined);
// The parent stops the server once the waiter's channel and its echo channel are subscribed, and an echo was sent.
process.send?.('stop-server');
await new Promise((resolve) => process.once('message', resolve)); // the server is stopped
// The echo unanswered, the link lost, subscribed again, and that subscription's bound (4 × linkCheckMs) run
// out: the hub has a resubscription armed, and the subscriber a command pending on a server that does not answer.
await eventually(
  'a resubscription that timed out',
  () => errors.some((e) => e.includes('did not confirm the wake-up subscription')),
  20 * linkCheckMs,
);
await Promise.race([Promise.all([waiterLocks.close(), holderLocks.close()]), new Promise((resolve) => setTimeout(resolve, 3_000))]);
for (const c of [holderRedis, waiterRedis] as unknown as Record<string, () => unknown>[]) {
  try {
    if (typeof c.disconnect === 'function') c.disconnect();
    else if (typeof c.destroy === 'function') c.destroy();
    else c.close!();
  } catch {}
}
process.send?.('closed');
