// A separate process for the multi-resource test: for a number of rounds it
// takes the write locks of a pair of resources with withWriteAll, in the order
// it was given (other processes get the same pairs in the opposite order), and
// under them moves one unit between the pair's counters with non-atomic
// read-modify-writes. It checks exclusion on the way: each resource's marker
// key must be free when it enters (SET NX) and still its own when it leaves.
// Its LockClient runs on the suite's client library, the counters on ioredis.
// Prints one JSON line: operations, violations, timeouts, longest wait.
import { AcquireTimeoutError, LockClient } from '../../src/index.js';
import { closeLockClientOf, connectTarget, lockClientOf, type WorkerTarget } from '../support/targets.js';

const target = JSON.parse(process.env.RWLOCK_TARGET!) as WorkerTarget;
const rounds = Number(process.env.RWLOCK_ROUNDS ?? 200);
const pairs = (process.env.RWLOCK_PAIRS ?? 'a:b').split(',').map((p) => p.split(':') as [string, string]);
const me = `${process.pid}`;

const redis = connectTarget(target);
const lockRedis = await lockClientOf(target, redis);
const locks = new LockClient(lockRedis, { waitMs: 20_000 });
const pause = () => new Promise<void>((resolve) => setImmediate(resolve));

let operations = 0;
let violations = 0;
let timeouts = 0;
let longestWaitMs = 0;
locks.on('acquired', (_, waitedMs) => (longestWaitMs = Math.max(longestWaitMs, waitedMs)));

async function loop(offset: number): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    const [from, to] = pairs[(i + offset) % pairs.length]!;
    try {
      await locks.withWriteAll([from, to], async () => {
        for (const r of [from, to]) if ((await redis.set(`marker:{${r}}`, me, 'NX')) !== 'OK') violations++;
        const a = Number((await redis.get(`data:{${from}}`)) ?? 0);
        const b = Number((await redis.get(`data:{${to}}`)) ?? 0);
        await pause();
        await redis.set(`data:{${from}}`, a - 1);
        await redis.set(`data:{${to}}`, b + 1);
        for (const r of [from, to]) if ((await redis.get(`marker:{${r}}`)) !== me) violations++;
        await redis.del(`marker:{${from}}`);
        await redis.del(`marker:{${to}}`);
      });
      operations++;
    } catch (error) {
      if (error instanceof AcquireTimeoutError) timeouts++;
      else throw error;
    }
  }
}

// Two loops per process, as a service handling two transfers at once.
await Promise.all([loop(0), loop(1)]);
const stats = locks.stats();
await locks.close();
await closeLockClientOf(lockRedis, redis);
await redis.quit();
process.stdout.write(`${JSON.stringify({ operations, violations, timeouts, longestWaitMs, waits: stats.waits })}\n`);
