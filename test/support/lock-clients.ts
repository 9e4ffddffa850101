/**
 * LockClients for the tests of one suite: `open()` makes one on the current
 * test's Redis client (or on another), and every one is closed after its test.
 *
 * @module
 */
import { LockClient, type LockClientOptions } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import type { TopologyContext } from '../setup/topologies.js';

export interface SuiteLockClients {
  /** The current test's Redis client (a fresh one per test). */
  readonly redis: RedisClient;
  /** A LockClient with the suite's defaults and `options`, on `on` (default: {@link redis}), closed after the test. */
  open(options?: LockClientOptions, on?: RedisClient): LockClient;
}

/** Registers the suite's hooks; call it in a suite body. */
export function suiteLockClients(ctx: TopologyContext, defaults: LockClientOptions = {}): SuiteLockClients {
  let redis: RedisClient | undefined;
  const opened: LockClient[] = [];
  beforeEach(() => {
    redis = ctx.client();
  });
  afterEach(async () => {
    for (const locks of opened.splice(0)) await locks.close();
  });
  return {
    get redis(): RedisClient {
      if (!redis) throw new Error('suiteLockClients: no Redis client before the first test');
      return redis;
    },
    open(options, on) {
      const locks = new LockClient(on ?? this.redis, { ...defaults, ...options });
      opened.push(locks);
      return locks;
    },
  };
}
