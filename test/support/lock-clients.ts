/**
 * LockClients for the tests of one suite: `open()` makes one on the current
 * test's Redis client of the suite's client library (or on another), and
 * every one is closed after its test.
 *
 * @module
 */
import type { LockRedisClient } from '../../src/clients/index.js';
import { LockClient, type LockClientOptions } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import type { TopologyContext } from '../setup/topologies.js';

export interface SuiteLockClients {
  /** The current test's ioredis client (a fresh one per test), for the test's own look at Redis. */
  readonly redis: RedisClient;
  /** The current test's client of the suite's library, for its LockClients: {@link redis} on ioredis. */
  readonly lockRedis: LockRedisClient;
  /** A LockClient with the suite's defaults and `options`, on `on` (default: {@link lockRedis}), closed after the test. */
  open(options?: LockClientOptions, on?: LockRedisClient): LockClient;
}

/** Registers the suite's hooks; call it in a suite body. */
export function suiteLockClients(ctx: TopologyContext, defaults: LockClientOptions = {}): SuiteLockClients {
  let redis: RedisClient | undefined;
  let lockRedis: LockRedisClient | undefined;
  const opened: LockClient[] = [];
  beforeEach(async () => {
    redis = ctx.client();
    lockRedis = ctx.clientKind === 'ioredis' ? redis : await ctx.lockRedis();
  });
  afterEach(async () => {
    for (const locks of opened.splice(0)) await locks.close();
  });
  const current = <T>(client: T | undefined): T => {
    if (!client) throw new Error('suiteLockClients: no Redis client before the first test');
    return client;
  };
  return {
    get redis(): RedisClient {
      return current(redis);
    },
    get lockRedis(): LockRedisClient {
      return current(lockRedis);
    },
    open(options, on) {
      const locks = new LockClient(on ?? this.lockRedis, { ...defaults, ...options });
      opened.push(locks);
      return locks;
    },
  };
}
