// a process whose LockClient is closed (and its Redis
// clients closed) while the hub has echo checks pending and reconnects
// armed (the server stopped, SIGSTOP) must exit: no timer of the library
// keeps it alive. argv: client kind, server port, holder port.
import { LockClient } from '../../src/index.js';
import { connectLockClient } from '../support/targets.js';

const [kind, port] = [process.argv[2] as 'ioredis' | 'node-redis' | 'glide', Number(process.argv[3])];
const target = { kind: 'standalone' as const, nodes: [{ host: '127.0.0.1', port }], client: kind };
const holderRedis = await connectLockClient(target);
const waiterRedis = await connectLockClient(target);
const holderLocks = new LockClient(holderRedis, { recheckMs: 60_000, redisTimeoutMs: 1_000 });
const waiterLocks = new LockClient(waiterRedis, { recheckMs: 60_000, redisTimeoutMs: 1_000 });

holderLocks.on('lost', () => undefined);
const held = await holderLocks.lock('exit').acquireWrite();
void held;
waiterLocks
  .lock('exit')
  .acquireWrite({ waitMs: 60_000 })
  .catch(() => undefined);
await new Promise((resolve) => setTimeout(resolve, 4_000)); // subscribed, echoes running
process.send?.('stop-server');
await new Promise((resolve) => process.once('message', resolve)); // the server is stopped
await new Promise((resolve) => setTimeout(resolve, 6_000)); // echoes unanswered, the subscriber lost, resubscribes armed
await Promise.race([Promise.all([waiterLocks.close(), holderLocks.close()]), new Promise((resolve) => setTimeout(resolve, 3_000))]);
for (const c of [holderRedis, waiterRedis] as unknown as Record<string, () => unknown>[]) {
  try {
    if (typeof c.disconnect === 'function') c.disconnect();
    else if (typeof c.destroy === 'function') c.destroy();
    else c.close!();
  } catch {}
}
process.send?.('closed');
