// A separate process for the multi-process test: mixed reads and writes over a
// few resources; each write does a non-atomic read-modify-write of a counter
// (GET, pause, SET) under the write lock, each read checks that it never sees
// a half-built value. Prints one JSON line of results.
import { LockClient } from '../../src/index.js';
import { closeLockClientOf, connectTarget, lockClientOf, type WorkerTarget } from '../support/targets.js';

const target = JSON.parse(process.env.RWLOCK_TARGET!) as WorkerTarget;
const ops = Number(process.env.RWLOCK_OPS ?? 1000);
const resources = (process.env.RWLOCK_RESOURCES ?? 'a,b,c').split(',');
const writeShare = Number(process.env.RWLOCK_WRITE_SHARE ?? 0.2);

const redis = connectTarget(target);
const lockRedis = await lockClientOf(target, redis);
const locks = new LockClient(lockRedis, { waitMs: 60_000 });
const pause = () => new Promise<void>((resolve) => setImmediate(resolve));

const writes: Record<string, number> = Object.fromEntries(resources.map((r) => [r, 0]));
let reads = 0;
let halfBuilt = 0;

async function worker(count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const resource = resources[Math.floor(Math.random() * resources.length)]!;
    const data = `data:{${resource}}`;
    if (Math.random() < writeShare) {
      await locks.withWrite(resource, async () => {
        await redis.set(`${data}:state`, 'building');
        const value = Number((await redis.get(`${data}:counter`)) ?? 0);
        await pause();
        await redis.set(`${data}:counter`, value + 1);
        await redis.set(`${data}:state`, 'ready');
      });
      writes[resource]!++;
    } else {
      await locks.withRead(resource, async () => {
        if ((await redis.get(`${data}:state`)) === 'building') halfBuilt++;
      });
      reads++;
    }
  }
}

// A few concurrent loops per process, as a service handling several requests at once.
const loops = 4;
await Promise.all(Array.from({ length: loops }, (_, i) => worker(Math.floor(ops / loops) + (i < ops % loops ? 1 : 0))));
await locks.close();
await closeLockClientOf(lockRedis, redis);
await redis.quit();
process.stdout.write(`${JSON.stringify({ writes, reads, halfBuilt })}\n`);
