/**
 * What Bun's built-in `RedisClient` can carry of what the library needs from
 * a client (src/clients/driver.ts), measured on a throw-away server:
 * `node_modules/.bin/bun test/runtimes/bun-redisclient.ts`. Not part of CI:
 * it prints findings, to be run again when Bun changes (docs/production.md,
 * "Runtimes", says what they mean for a driver). Exits 0 whatever it finds.
 *
 * 1. scripts: `send('EVALSHA', ...)`, NOSCRIPT as an error reply, EVAL;
 * 2. wake-ups: the library publishes with SPUBLISH only (lua/), so a waiter
 *    must SSUBSCRIBE; Bun has `subscribe()` (SUBSCRIBE) but no sharded
 *    subscribe: does `send('SSUBSCRIBE')` deliver the messages anywhere?
 * 3. whether the client tells where it connects (so that the library could
 *    open its own subscriber, as it does for GLIDE: src/clients/resp-subscriber.ts);
 * 4. reconnection: queued commands, and whether a subscriber resubscribes.
 * 5. whether `new LockClient(redisClient)` refuses it.
 */
import type * as Library from '../../src/index.js';
import type * as Testing from '../../src/testing/index.js';

/** What this probe uses of Bun's `RedisClient` (`import { RedisClient } from 'bun'`; the repository has no Bun types). */
interface BunRedisClient {
  connect(): Promise<void>;
  close(): void;
  send(command: string, args: string[]): Promise<unknown>;
  duplicate(): Promise<BunRedisClient>;
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<number>;
  publish(channel: string, message: string): Promise<number>;
  spublish(channel: string, message: string): Promise<number>;
}
const bun = 'bun';
const { RedisClient } = (await import(bun)) as { RedisClient: new (url: string) => BunRedisClient };

const packageName = 'redis-rwlock';
const { LockClient } = (await import(packageName)) as typeof Library;
const { startRedisServer, stopAllServers } = (await import(`${packageName}/testing`)) as typeof Testing;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const say = (finding: string, value: unknown) => console.log(`${finding}: ${typeof value === 'string' ? value : JSON.stringify(value)}`);
const outcome = (p: Promise<unknown>) =>
  p.then(
    (v) => ({ ok: v }),
    (e: Error & { code?: string }) => ({ error: `${e.name} ${e.code ?? ''} ${e.message}` }),
  );

const server = await startRedisServer();
try {
  const url = `redis://127.0.0.1:${server.port}`;
  const client = new RedisClient(url);
  await client.connect();
  say('bun', process.versions.bun);
  say('protocol (HELLO)', ((await client.send('HELLO', [])) as { proto?: number }).proto);

  const sha = (await client.send('SCRIPT', ['LOAD', 'return {KEYS[1], ARGV[1], 7}'])) as string;
  say('1. send EVALSHA', await outcome(client.send('EVALSHA', [sha, '1', 'k', 'v'])));
  say('1. send EVALSHA unknown sha', await outcome(client.send('EVALSHA', ['0'.repeat(40), '0'])));
  say('1. send EVAL error_reply', await outcome(client.send('EVAL', ["return redis.error_reply('BOOM')", '0'])));

  const messages: string[] = [];
  say('2. ssubscribe method', typeof (client as unknown as Record<string, unknown>).ssubscribe);
  const sharded = await client.duplicate();
  say('2. send SSUBSCRIBE', await outcome(sharded.send('SSUBSCRIBE', ['{w}ch'])));
  // A listener on the same name, in case Bun routes sharded messages to subscribe() listeners.
  const plain = await client.duplicate();
  await plain.subscribe('{w}ch', (message, channel) => messages.push(`subscribe() listener: ${channel} ${message}`));
  await plain.send('SSUBSCRIBE', ['{w}ch']).catch(() => undefined);
  say('2. SPUBLISH receivers (server count)', await client.spublish('{w}ch', 'release'));
  await sleep(200);
  say('2. sharded messages delivered to the program', messages.length === 0 ? 'none' : messages);

  const own = Object.getOwnPropertyNames(client);
  const fields = ['url', 'options', 'host', 'port', 'password', 'tls'].filter(
    (k) => (client as unknown as Record<string, unknown>)[k] !== undefined,
  );
  say('3. own properties / endpoint fields', { own, fields });

  const subscriber = await client.duplicate();
  let heard = 0;
  await subscriber.subscribe('plain', () => heard++);
  await server.restart();
  const queued = outcome(client.send('PING', []));
  await sleep(1_500);
  say('4. a command sent across a restart', await queued);
  say('4. subscribers after a restart (PUBLISH receivers)', await client.publish('plain', 'x'));
  await sleep(100);
  say('4. messages heard after the restart', heard);

  try {
    new LockClient(client as never);
    say('5. new LockClient(RedisClient)', 'accepted');
  } catch (error) {
    say('5. new LockClient(RedisClient)', `${(error as Error).name}: ${(error as Error).message}`);
  }
  for (const c of [client, sharded, plain, subscriber]) c.close();
} finally {
  await stopAllServers();
}
