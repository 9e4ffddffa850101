/**
 * `redis-rwlock/testing` in your own integration tests: a real local Redis
 * Cluster (3 masters, 3 replicas, `redis-server` processes on free loopback
 * ports, no Docker), a lock taken through it, a master killed under the lock's
 * slot and the Cluster failing over, then everything stopped.
 *
 * In a mocha suite the same calls go in hooks:
 *
 * ```ts
 * import { startRedisCluster, stopAllServers, type RedisClusterHandle } from 'redis-rwlock/testing';
 * let cluster: RedisClusterHandle;
 * before(async () => { cluster = await startRedisCluster(); });   // once per run: ~2-5 s
 * beforeEach(() => cluster.flush());                              // FLUSHALL on every master
 * after(() => stopAllServers());                                  // also kills leftovers of failed tests
 * ```
 *
 * Needs `redis-server` and `redis-cli` 7 or newer on PATH (or REDIS_SERVER_BIN
 * and REDIS_CLI_BIN). Servers still running when the process exits, however
 * it exits, are killed.
 *
 * Run it:
 *   npx tsx examples/testing-helper.ts
 */
import { pathToFileURL } from 'node:url';
// In your own code: from 'redis-rwlock' and 'redis-rwlock/testing'.
import { LockClient } from 'redis-rwlock';
import { startRedisCluster } from 'redis-rwlock/testing';

/** What happened, for the runner of the examples. */
export interface TestingHelperOutcome {
  readonly masters: number;
  readonly replicas: number;
  /** The port of the master that held the lock's slot, and of the replica that took over. */
  readonly killedPort: number;
  readonly promotedPort: number;
  /** A lock was taken again after the failover. */
  readonly lockedAfterFailover: boolean;
}

export async function runTestingHelperExample(log: (line: string) => void = console.log): Promise<TestingHelperOutcome> {
  // `await using` stops every node when the block ends, even on an error.
  await using cluster = await startRedisCluster({ nodeTimeoutMs: 1_000 });
  const masters = cluster.nodes.filter((n) => n.role === 'master');
  const replicas = cluster.nodes.filter((n) => n.role === 'replica');
  log(`Cluster up: masters on ${masters.map((n) => n.port).join(', ')}, replicas on ${replicas.map((n) => n.port).join(', ')}`);

  const redis = cluster.client(); // an ioredis Cluster; disconnected by cluster.stop()
  const locks = new LockClient(redis);
  try {
    const lease = await locks.lock('orders:{42}').acquireWrite();
    const owner = await cluster.masterForKey(locks.lock('orders:{42}').keys.state);
    log(`write lock on orders:{42} (fence ${lease.fence}), kept by the master on port ${owner.port}`);
    await lease.release();

    // Fault injection: SIGKILL the master of the lock's slot; a replica takes over.
    const { promoted, replaced, elapsedMs } = await cluster.killMaster(owner.port);
    log(`killed ${replaced.port}; ${promoted.port} took over in ${elapsedMs} ms`);

    // The client follows the new slot map (a MOVED reply or the next refresh), and locking goes on.
    const again = await locks.lock('orders:{42}').acquireWrite({ waitMs: 10_000 });
    log(`write lock again after the failover (fence ${again.fence} > ${lease.fence})`);
    await again.release();
    return {
      masters: masters.length,
      replicas: replicas.length,
      killedPort: replaced.port,
      promotedPort: promoted.port,
      lockedAfterFailover: again.fence > lease.fence,
    };
  } finally {
    await locks.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runTestingHelperExample().then(
    (outcome) => {
      process.exitCode = outcome.masters === 3 && outcome.replicas === 3 && outcome.lockedAfterFailover ? 0 : 1;
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
