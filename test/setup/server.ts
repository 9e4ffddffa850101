/**
 * The one switch that picks the server the tests, the faults and the bench
 * start: `TEST_SERVER=redis` (the default, `redis-server` on PATH) or
 * `TEST_SERVER=valkey` (`valkey-server` and `valkey-cli`). It sets the
 * testing helper's `REDIS_SERVER_BIN` and `REDIS_CLI_BIN` for this process
 * and the ones it starts (workers, the CLI, the demo), unless they are set
 * already. Imported first by the mocha hooks and by the bench.
 */
const SERVERS = {
  redis: { server: 'redis-server', cli: 'redis-cli' },
  valkey: { server: 'valkey-server', cli: 'valkey-cli' },
} as const;

/** The servers `TEST_SERVER` may name. */
export type TestServer = keyof typeof SERVERS;

/** The server chosen by `TEST_SERVER`; an unknown name is refused, saying which are known. */
export function testServer(): TestServer {
  const name = process.env.TEST_SERVER || 'redis';
  if (!Object.hasOwn(SERVERS, name)) {
    throw new Error(`TEST_SERVER=${name} is not a server the tests know; use ${Object.keys(SERVERS).join(' or ')}`);
  }
  return name as TestServer;
}

const chosen = SERVERS[testServer()];
process.env.REDIS_SERVER_BIN ??= chosen.server;
process.env.REDIS_CLI_BIN ??= chosen.cli;
