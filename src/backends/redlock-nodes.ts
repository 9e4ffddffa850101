/**
 * The nodes of a `redlock` client: checked to be independent servers, and
 * named for messages. (The quorum logic is in `redlock.ts`.)
 *
 * @module
 */
import { InvalidArgumentError } from '../errors.js';
import { describe } from '../keys/keys.js';
import { isCluster, isUsableClient, type RedisClient } from '../redis.js';

/** Fewest nodes a `redlock` client accepts: with fewer, one failure stops every lock. */
export const MIN_REDLOCK_NODES = 3;

/**
 * The nodes of a `redlock` client, checked: an array of at least
 * {@link MIN_REDLOCK_NODES} distinct ioredis clients on distinct servers.
 * An even count is accepted (it tolerates no more failures than one node
 * fewer would).
 */
export function redlockClients(value: unknown): RedisClient[] {
  if (!Array.isArray(value)) {
    throw new InvalidArgumentError(
      'redis',
      `mode "redlock" takes an array of at least ${MIN_REDLOCK_NODES} ioredis clients (one per independent server or Cluster), got ${describe(value)}`,
    );
  }
  if (value.length < MIN_REDLOCK_NODES) {
    throw new InvalidArgumentError(
      'redis',
      `mode "redlock" needs at least ${MIN_REDLOCK_NODES} independent servers (an odd number: 3 or 5), got ${value.length}; ` +
        'with fewer, one failed server stops every lock',
    );
  }
  const seen = new Map<string, number>();
  value.forEach((client: unknown, i) => {
    if (!isUsableClient(client)) {
      throw new InvalidArgumentError('redis', `element ${i} must be an ioredis Redis or Cluster instance, got ${describe(client)}`);
    }
    if (value.indexOf(client) !== i) {
      throw new InvalidArgumentError(
        'redis',
        `elements ${value.indexOf(client)} and ${i} are the same client; pass one client per independent server`,
      );
    }
    for (const address of addressesOf(client)) {
      const other = seen.get(address);
      if (other !== undefined && other !== i) {
        throw new InvalidArgumentError(
          'redis',
          `elements ${other} and ${i} both connect to ${address}; a majority only means something across independent servers`,
        );
      }
      seen.set(address, i);
    }
  });
  return [...value] as RedisClient[];
}

/** Where a client connects, normalised (loopback names alike); a Cluster: every startup node. */
function addressesOf(client: RedisClient): string[] {
  const loopback = (host: string | undefined) =>
    host === undefined || host === 'localhost' || host === '127.0.0.1' || host === '::1' ? '127.0.0.1' : host.toLowerCase();
  if (isCluster(client)) {
    const nodes = (client as unknown as { startupNodes?: unknown }).startupNodes;
    if (!Array.isArray(nodes)) return [];
    return nodes.flatMap((n: unknown) => {
      if (typeof n === 'string') return [n.replace(/^redis:\/\//, '')];
      if (typeof n === 'number') return [`127.0.0.1:${n}`];
      const node = n as { host?: string; port?: number };
      return [`${loopback(node.host)}:${node.port ?? 6379}`];
    });
  }
  const o = client.options;
  return o.path ? [`unix:${o.path}`] : [`${loopback(o.host)}:${o.port ?? 6379}`];
}

/** A node's address for messages. */
export function addressOf(client: RedisClient): string {
  return addressesOf(client)[0] ?? (isCluster(client) ? 'a Cluster' : 'a Redis server');
}
