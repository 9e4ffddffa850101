import { once } from 'node:events';
import type { Redis } from 'ioredis';
import type { RedisClient } from '../../src/redis.js';
import { isCluster } from '../../src/redis.js';

/**
 * The masters behind a client: the server itself, or every Cluster master
 * once the client is ready (before its first slots refresh a Cluster client
 * may list only some of them).
 */
export async function masters(redis: RedisClient) {
  if (!isCluster(redis)) return [redis];
  if (redis.status !== 'ready') await once(redis, 'ready');
  return redis.nodes('master');
}

/** Keys on every master together. */
export async function totalKeys(redis: RedisClient): Promise<number> {
  const sizes = await Promise.all((await masters(redis)).map((node) => node.dbsize()));
  return sizes.reduce((a, b) => a + b, 0);
}

/** Calls of the given commands so far (from INFO commandstats), summed over every master. */
export async function commandCalls(redis: RedisClient, commands: readonly string[]): Promise<number> {
  let total = 0;
  for (const node of await masters(redis)) {
    const info = await node.info('commandstats');
    for (const command of commands) {
      const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info);
      if (match) total += Number(match[1]);
    }
  }
  return total;
}

/** Script calls (EVAL and EVALSHA) so far, summed over every master. */
export const scriptCalls = (redis: RedisClient) => commandCalls(redis, ['eval', 'evalsha']);

/**
 * Kills every subscriber connection of a node. (`CLIENT KILL TYPE pubsub` is
 * not enough: Redis 7 counts a RESP3 subscriber, as ioredis' sharded
 * subscribers are, as a normal client.)
 */
export async function killSubscribers(conn: Redis): Promise<number> {
  const list = String(await conn.call('CLIENT', 'LIST'));
  const ids = [...list.matchAll(/^id=(\d+) .*flags=\S*P/gm)].map((m) => m[1]!);
  let killed = 0;
  for (const id of ids) killed += Number(await conn.call('CLIENT', 'KILL', 'ID', id).catch(() => 0));
  return killed;
}
