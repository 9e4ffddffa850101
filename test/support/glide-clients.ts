/**
 * GLIDE (`@valkey/valkey-glide` 2.x) clients for the `glide` client kind:
 * a `GlideClient` on one server, a `GlideClusterClient` on a Cluster,
 * connected, and how the tests close either.
 *
 * @module
 */
import { GlideClient, GlideClusterClient, Logger } from '@valkey/valkey-glide';
import type { LockRedisClient } from '../../src/clients/index.js';

// GLIDE logs a warning for every error reply (NOSCRIPT on a script's first call to a server): errors only.
Logger.setLoggerConfig('error');

/**
 * How long a GLIDE command may wait for its reply: GLIDE's default (250 ms)
 * fails calls on a machine shared by several test processes.
 */
export const REQUEST_TIMEOUT_MS = 2_000;

/** What a GLIDE client of the tests is made with. */
export interface GlideOptions {
  readonly addresses: readonly { readonly host: string; readonly port: number }[];
  readonly user?: { readonly username: string; readonly password: string } | undefined;
  readonly name?: string | undefined;
  /** GLIDE's `requestTimeout`. */
  readonly requestTimeoutMs?: number | undefined;
  /** TLS with this CA (PEM). */
  readonly ca?: string | Buffer | undefined;
  /** Cluster nodes' addresses to reach through others (a fault proxy each), as ioredis' `natMap`. */
  readonly natMap?: Readonly<Record<string, { readonly host: string; readonly port: number }>> | undefined;
  /** Connects at the first command (GLIDE's `lazyConnect`): made while a server is down. */
  readonly lazyConnect?: boolean | undefined;
}

function configuration(options: GlideOptions) {
  return {
    addresses: options.addresses.map(({ host, port }) => ({ host, port })),
    requestTimeout: options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS,
    ...(options.user && { credentials: { username: options.user.username, password: options.user.password } }),
    ...(options.name && { clientName: options.name }),
    ...(options.ca !== undefined && {
      useTLS: true,
      advancedConfiguration: { tlsAdvancedConfiguration: { rootCertificates: options.ca } },
    }),
    ...(options.natMap && { addressResolver: resolver(options.natMap) }),
    ...(options.lazyConnect && { lazyConnect: true }),
  };
}

/** GLIDE's `addressResolver` for a `natMap`: each node's address to its proxy's, others as they are. */
function resolver(natMap: NonNullable<GlideOptions['natMap']>): (host: string, port: number) => [string, number] {
  return (host, port) => {
    const to = natMap[`${host}:${port}`];
    return to ? [to.host, to.port] : [host, port];
  };
}

/** A `GlideClient` on one server, connected. */
export function glideClient(options: GlideOptions): Promise<LockRedisClient & GlideLike> {
  return GlideClient.createClient(configuration(options)) as Promise<unknown> as Promise<LockRedisClient & GlideLike>;
}

/** A `GlideClusterClient`, connected (its slot map loaded). */
export function glideCluster(options: GlideOptions): Promise<LockRedisClient & GlideLike> {
  return GlideClusterClient.createClient(configuration(options)) as Promise<unknown> as Promise<LockRedisClient & GlideLike>;
}

/** What the tests use of a GLIDE client. */
export interface GlideLike {
  close(): void;
}

/** Whether `client` is a GLIDE client (it alone has `invokeScript`). */
export function isGlide(client: unknown): client is GlideLike {
  return typeof (client as { invokeScript?: unknown }).invokeScript === 'function';
}
