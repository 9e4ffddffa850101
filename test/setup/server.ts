/**
 * The one switch that picks the server the tests, the faults and the bench
 * start: `TEST_SERVER=redis` (the default, `redis-server` on PATH: Redis 7.0
 * from Debian bookworm in CI), `TEST_SERVER=valkey` (`valkey-server` and
 * `valkey-cli` on PATH: Valkey 8.0), or one of the newer servers that
 * `scripts/build-servers.sh` builds from Debian's source packages into its
 * cache: `TEST_SERVER=redis8` (Redis 8.0) and `TEST_SERVER=valkey9` (Valkey
 * 9.1). It sets the testing helper's `REDIS_SERVER_BIN` and `REDIS_CLI_BIN`
 * for this process and the ones it starts (workers, the CLI, the demo),
 * unless they are set already. Imported first by the mocha hooks and by the
 * bench.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Servers on PATH, and the ones `scripts/build-servers.sh` builds (by the name it builds them under). */
const SERVERS = {
  redis: { server: 'redis-server', cli: 'redis-cli' },
  valkey: { server: 'valkey-server', cli: 'valkey-cli' },
  redis8: { built: 'redis8', server: 'redis-server', cli: 'redis-cli' },
  valkey9: { built: 'valkey9', server: 'valkey-server', cli: 'valkey-cli' },
} as const;

/** The servers `TEST_SERVER` may name. */
export type TestServer = keyof typeof SERVERS;

/** The servers `TEST_SERVER` may name, in order. */
export const TEST_SERVERS = Object.keys(SERVERS) as TestServer[];

/** The server chosen by `TEST_SERVER`; an unknown name is refused, saying which are known. */
export function testServer(): TestServer {
  const name = process.env.TEST_SERVER || 'redis';
  if (!Object.hasOwn(SERVERS, name)) {
    throw new Error(`TEST_SERVER=${name} is not a server the tests know; use ${TEST_SERVERS.join(', ')}`);
  }
  return name as TestServer;
}

/** Where `scripts/build-servers.sh` keeps its builds: `$REDIS_RWLOCK_SERVERS`, else `${XDG_CACHE_HOME:-~/.cache}/redis-rwlock/servers`. */
export function builtServersDir(): string {
  return process.env.REDIS_RWLOCK_SERVERS || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'redis-rwlock', 'servers');
}

/** True when `TEST_SERVER` names a Valkey (8 or 9). */
export function isValkey(server: TestServer = testServer()): boolean {
  return server.startsWith('valkey');
}

/** False for the servers `scripts/build-servers.sh` builds: without TLS (`BUILD_TLS=no`), which none of the suites CI runs on them needs. */
export function serverHasTls(server: TestServer = testServer()): boolean {
  return !('built' in SERVERS[server]);
}

const chosen = SERVERS[testServer()];
if ('built' in chosen && !(process.env.REDIS_SERVER_BIN && process.env.REDIS_CLI_BIN)) {
  const bin = join(builtServersDir(), chosen.built, 'bin');
  if (!existsSync(join(bin, chosen.server))) {
    throw new Error(
      `TEST_SERVER=${testServer()}: ${join(bin, chosen.server)} is not built; run bash scripts/build-servers.sh ${chosen.built} ` +
        '(Debian/Ubuntu, a few minutes), or set REDIS_SERVER_BIN and REDIS_CLI_BIN to the binaries',
    );
  }
  process.env.REDIS_SERVER_BIN ??= join(bin, chosen.server);
  process.env.REDIS_CLI_BIN ??= join(bin, chosen.cli);
} else {
  process.env.REDIS_SERVER_BIN ??= chosen.server;
  process.env.REDIS_CLI_BIN ??= chosen.cli;
}
