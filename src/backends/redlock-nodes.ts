/**
 * The nodes of a `redlock` client: checked to be independent servers, and
 * named for messages. (The quorum logic is in `redlock.ts`.)
 *
 * @module
 */
import { type Driver, driverFor, notAClient } from '../clients/index.js';
import { InvalidArgumentError } from '../errors.js';
import { describe } from '../keys/keys.js';

/** Fewest nodes a `redlock` client accepts: with fewer, one failure stops every lock. */
export const MIN_REDLOCK_NODES = 3;

/**
 * The nodes of a `redlock` client, checked: an array of at least
 * {@link MIN_REDLOCK_NODES} distinct Redis clients on distinct servers,
 * each with its driver.
 * An even count is accepted (it tolerates no more failures than one node
 * fewer would).
 */
export function redlockClients(value: unknown): Driver[] {
  if (!Array.isArray(value)) {
    throw new InvalidArgumentError(
      'redis',
      `mode "redlock" takes an array of at least ${MIN_REDLOCK_NODES} Redis clients (one per independent server or Cluster), got ${describe(value)}`,
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
  return value.map((client: unknown, i) => {
    const driver = driverFor(client);
    if (!driver) throw new InvalidArgumentError('redis', `element ${i} ${notAClient(client)}, got ${describe(client)}`);
    if (value.indexOf(client) !== i) {
      throw new InvalidArgumentError(
        'redis',
        `elements ${value.indexOf(client)} and ${i} are the same client; pass one client per independent server`,
      );
    }
    for (const address of driver.addresses()) {
      const other = seen.get(address);
      if (other !== undefined && other !== i) {
        throw new InvalidArgumentError(
          'redis',
          `elements ${other} and ${i} both connect to ${address}; a majority only means something across independent servers`,
        );
      }
      seen.set(address, i);
    }
    return driver;
  });
}

/** A node's address for messages. */
export function addressOf(client: Driver): string {
  return client.addresses()[0] ?? (client.cluster ? 'a Cluster' : 'a Redis server');
}
