/**
 * Fencing in practice: a writer that is paused past its lease cannot
 * overwrite the data of the writer that took the lock after it.
 *
 * A lock alone cannot stop this. Process A takes the write lock, then stalls
 * (a GC pause, a blocked event loop, a slow network call) for longer than its
 * lease. The lease runs out, process B takes the lock and writes. A wakes up
 * and, still believing it holds the lock, writes too, over B's data. Checking
 * `lease.held` first does not help: A can stall between the check and the
 * write. What helps is the store refusing A's write: every write grant carries
 * a fence larger than any before it, and `fencedSet` writes only if the key
 * has not seen a larger fence yet, checked atomically in Redis.
 *
 * Run it:
 *   npx tsx examples/fencing.ts                          # on a throw-away redis-server
 *   npx tsx examples/fencing.ts redis://127.0.0.1:6379   # on your own server
 */
import { pathToFileURL } from 'node:url';
import { type Cluster, Redis } from 'ioredis';
// In your own code: from 'redis-rwlock' and 'redis-rwlock/testing'.
import { fencedSet, LockClient, StaleFenceError } from 'redis-rwlock';
import { startRedisServer } from 'redis-rwlock/testing';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What happened, for the test that runs this example. */
export interface FencingOutcome {
  /** The fences of A's and B's write leases. */
  readonly fenceA: number;
  readonly fenceB: number;
  /** A's late write was refused with StaleFenceError. */
  readonly staleWriteRefused: boolean;
  /** A's lease signal had aborted by the time it woke up. */
  readonly lossSignalled: boolean;
  /** The value left in the key: B's. */
  readonly finalValue: string | null;
}

/**
 * Plays the story on `redis` (a Redis or Cluster client): two LockClients
 * stand for two processes. The data key `report:{42}` and the lock on the
 * same name share a hash tag, so on a Cluster the lock, the data and its
 * fence key live in one slot.
 */
export async function runFencingExample(redis: Redis | Cluster, log: (line: string) => void = console.log): Promise<FencingOutcome> {
  const resource = 'report:{42}';
  const dataKey = 'report:{42}';
  const processA = new LockClient(redis);
  const processB = new LockClient(redis);
  try {
    // A takes the lock with a short lease of its own (not renewed), as a
    // process whose renewals stop during a stall would have.
    const leaseA = await processA.lock(resource).acquireWrite({ leaseMs: 300 });
    log(`A: write lock, fence ${leaseA.fence}; building the report...`);

    // B wants the lock too, and waits for it.
    const b = (async () => {
      const leaseB = await processB.lock(resource).acquireWrite({ waitMs: 5_000 });
      log(`B: write lock after A's lease ran out, fence ${leaseB.fence}`);
      await fencedSet(redis, dataKey, 'report by B', leaseB);
      log('B: wrote "report by B"');
      await leaseB.release();
      return leaseB.fence;
    })();

    // A stalls for longer than its lease.
    await sleep(700);
    const fenceB = await b;
    const lossSignalled = leaseA.signal.aborted;
    log(`A: awake again (lease signal aborted: ${lossSignalled}); writing its now stale report`);

    let staleWriteRefused = false;
    try {
      await fencedSet(redis, dataKey, 'report by A (stale)', leaseA);
      log("A: wrote its report over B's. This must not happen.");
    } catch (error) {
      if (!(error instanceof StaleFenceError)) throw error;
      staleWriteRefused = true;
      log(`A: refused: fence ${error.fence} < ${error.lastFence}, the last one "${error.key}" has seen`);
    }
    const finalValue = await redis.get(dataKey);
    log(`"${dataKey}" holds: ${JSON.stringify(finalValue)}`);
    return { fenceA: leaseA.fence, fenceB, staleWriteRefused, lossSignalled, finalValue };
  } finally {
    await Promise.all([processA.close(), processB.close()]);
  }
}

async function main(): Promise<void> {
  const url = process.argv[2];
  const server = url ? undefined : await startRedisServer();
  const redis = new Redis(url ?? server!.url);
  try {
    await redis.del('report:{42}', 'report:{42}#fence');
    const outcome = await runFencingExample(redis);
    process.exitCode = outcome.staleWriteRefused ? 0 : 1;
  } finally {
    redis.disconnect();
    await server?.stop();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
