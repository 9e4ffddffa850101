/**
 * N independent standalone Redis masters, e.g. for Redlock-style tests that
 * need a majority of unrelated servers.
 *
 * @module
 */
import type { Redis, RedisOptions } from 'ioredis';
import { type FlushOptions, type RedisServerHandle, type RedisServerOptions, startRedisServer } from './redis-server.js';

/** Options for {@link startRedisMasters}: those of {@link startRedisServer} except `port`, applied to every server. */
export type RedisMastersOptions = Omit<RedisServerOptions, 'port'>;

/** N independent `redis-server` processes started together. */
export interface RedisMastersHandle extends AsyncDisposable {
  /** The servers, each on its own free port, none replicating another. */
  readonly servers: readonly RedisServerHandle[];
  /**
   * One new ioredis `Redis` client per server, in the order of {@link RedisMastersHandle.servers}.
   * @param options - ioredis options for every client (`host` and `port` are the server's)
   */
  clients(options?: RedisOptions): Redis[];
  /** `FLUSHALL` (and `SCRIPT FLUSH` with `{ scripts: true }`) on every running server. */
  flush(options?: FlushOptions): Promise<void>;
  /** Stops every server (see {@link RedisServerHandle.stop}). Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts `n` independent standalone `redis-server` processes in parallel and
 * resolves once every one answers PING. If any fails to start, the others are
 * stopped and the error is rethrown.
 *
 * @example
 * ```ts
 * import { startRedisMasters } from 'redis-rwlock/testing';
 * await using masters = await startRedisMasters(3);
 * const [a, b, c] = masters.clients();
 * ```
 *
 * @param n - how many servers (at least 1)
 * @param options - see {@link RedisMastersOptions}
 */
export async function startRedisMasters(n: number, options: RedisMastersOptions = {}): Promise<RedisMastersHandle> {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`startRedisMasters: n must be a positive integer, got ${n}`);
  const { port: _ignored, ...serverOptions } = options as RedisServerOptions;
  const results = await Promise.allSettled(Array.from({ length: n }, () => startRedisServer(serverOptions)));
  const servers = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.all(servers.map((s) => s.stop()));
    throw failed.reason;
  }
  const stop = async (): Promise<void> => {
    await Promise.all(servers.map((s) => s.stop()));
  };
  return {
    servers,
    clients: (clientOptions) => servers.map((s) => s.client(clientOptions)),
    flush: async (flushOptions) => {
      await Promise.all(servers.filter((s) => s.running).map((s) => s.flush(flushOptions)));
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
