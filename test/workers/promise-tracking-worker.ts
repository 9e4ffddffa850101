// A separate process for the owner-context test: whether the process tracks its promises
// (async_hooks, which an enabled AsyncLocalStorage turns on for every promise on Node 20
// and 22) before, during and after withWrite calls. Prints one JSON line.
import { executionAsyncId } from 'node:async_hooks';
import { LockClient } from '../../src/index.js';
import { closeLockClientOf, connectTarget, lockClientOf, type WorkerTarget } from '../support/targets.js';

/** True while promises get async ids of their own: a continuation runs under an id other than its caller's. */
async function tracked(): Promise<boolean> {
  const outer = executionAsyncId();
  return (await Promise.resolve().then(() => executionAsyncId())) !== outer;
}

const target = JSON.parse(process.env.RWLOCK_TARGET!) as WorkerTarget;
const redis = connectTarget(target);
const lockRedis = await lockClientOf(target, redis);
const locks = new LockClient(lockRedis);

const before = await tracked();
let reentrant = false;
await locks.withWrite('tracking', async (outer) => {
  // The storage works while a function runs: a nested call on the lock is the same owner.
  await locks.withRead('tracking', async (inner) => void (reentrant = inner.token === outer.token));
});
// Two calls that overlap, ending in either order.
await Promise.all([
  locks.withWrite('tracking:a', () => new Promise((resolve) => setTimeout(resolve, 20))),
  locks.withRead('tracking:b', () => undefined),
]);
const after = await tracked();

await locks.close();
await closeLockClientOf(lockRedis, redis);
await redis.quit();
process.stdout.write(`${JSON.stringify({ before, reentrant, after })}\n`);
