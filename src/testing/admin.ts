/**
 * Short-lived admin connections used by the harness itself (readiness pings,
 * FLUSHALL, CLUSTER NODES ...). Each call opens its own connection that never
 * reconnects, never queues offline and is closed afterwards, so a killed or
 * restarting server can never leave a reconnect loop behind.
 *
 * @internal
 * @module
 */
import { Redis } from 'ioredis';
import { LOOPBACK_HOST } from './ports.js';

/** Default timeout of an admin connection and of each of its commands. */
export const ADMIN_TIMEOUT_MS = 5_000;

/**
 * Opens an admin connection to 127.0.0.1:`port`, runs `fn` with it and closes it.
 * @internal
 */
export async function withAdminConnection<T>(port: number, fn: (conn: Redis) => Promise<T>, timeoutMs = ADMIN_TIMEOUT_MS): Promise<T> {
  const conn = new Redis({
    host: LOOPBACK_HOST,
    port,
    lazyConnect: true,
    enableOfflineQueue: false,
    enableReadyCheck: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    connectionName: 'redis-rwlock-testing-admin',
    // ioredis arms this timer on disconnect() even when the socket is already
    // gone (refused connection), keeping the event loop alive for its length.
    disconnectTimeout: 100,
  });
  conn.on('error', () => {
    // Errors surface through the rejected connect() or command promise.
  });
  try {
    await conn.connect();
    return await fn(conn);
  } finally {
    if (conn.status !== 'end') conn.disconnect();
  }
}

/**
 * Sends one command on a fresh admin connection and resolves with its reply.
 * @internal
 */
export function adminCommand(
  port: number,
  command: string,
  args: (string | number)[] = [],
  timeoutMs = ADMIN_TIMEOUT_MS,
): Promise<unknown> {
  return withAdminConnection(port, (conn) => conn.call(command, args), timeoutMs);
}

/** Parses `INFO` / `CLUSTER INFO` text into a field map. @internal */
export function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    if (line === '' || line.startsWith('#')) continue;
    const colon = line.indexOf(':');
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1));
  }
  return fields;
}

/** Resolves after `ms` milliseconds. @internal */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
