import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { refusesSeveralSlots } from './backends/scripted.js';
import {
  ClientClosedError,
  CrossSlotError,
  NoPermissionError,
  PLAIN_CLUSTER_NODE,
  RedisUnavailableError,
  RWLockError,
  type RWLockErrorContext,
  serverRefusal,
  UnsupportedServerError,
} from './errors.js';
import { LUA_SOURCES } from './lua/scripts.generated.js';

/**
 * The ioredis clients as the library uses them inside: its ioredis adapter,
 * the CLI, the testing helper. Never in a public declaration, which would
 * then need ioredis installed (`IoredisCompatibleClient` is the public shape).
 */
export type RedisClient = Redis | Cluster;

/** Duck-typed, so that a Cluster from another copy of ioredis is recognised too. */
export function isCluster(client: RedisClient): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true;
}

export function isUsableClient(value: unknown): value is RedisClient {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { defineCommand?: unknown }).defineCommand === 'function' &&
    typeof (value as { duplicate?: unknown }).duplicate === 'function'
  );
}

/**
 * True once the user's client was closed with quit() or disconnect() for good
 * (a Cluster can stay 'disconnecting' after quit() resolved, and then queues
 * commands forever).
 */
export function isClosed(client: RedisClient): boolean {
  // After `await redis.quit()` a Redis client still says 'ready' until its socket closes; ioredis
  // marks it manuallyClosing from the moment quit() or disconnect() is called.
  return (
    client.status === 'end' ||
    client.status === 'disconnecting' ||
    (client as unknown as { manuallyClosing?: boolean }).manuallyClosing === true
  );
}

/**
 * Why an ioredis client has no connection now: for one server, the error its
 * socket failed with ("connect ECONNREFUSED 127.0.0.1:6379"); for a Cluster,
 * that none of its nodes is connected. Undefined when it is connected.
 * Read without a call, so it can name the cause of a call's timeout.
 */
export function connectionTrouble(client: RedisClient): string | undefined {
  const { status } = client;
  if (status === 'ready' || isClosed(client)) return undefined;
  if (isCluster(client))
    return `the Cluster client is not connected (ioredis status "${status}"): check that its nodes run and can be reached`;
  const { host, port, path } = client.options;
  const where = path ?? `${host ?? 'localhost'}:${port ?? 6379}`;
  const errored = (client as unknown as { stream?: { errored?: unknown } }).stream?.errored;
  const why = errored instanceof Error ? errored.message : `ioredis status "${status}"`;
  return `the client is not connected to Redis at ${where} (${why}): check that Redis runs there and can be reached`;
}

/**
 * A credentials refusal: WRONGPASS, NOAUTH (also a script sent without a
 * login: "Protocol error: unauthenticated bulk length"), or an older server's
 * "invalid password".
 */
const LOGIN_REFUSED =
  /^(?:WRONGPASS|NOAUTH)\b|Protocol error: unauthenticated|^ERR (?:invalid password|AUTH <password> called without any password configured)|^(?:ERR )?Client sent AUTH, but no password is set/i;

/** What to do about a refused login. @internal */
export const FIX_LOGIN =
  "set the username and password the server expects on the Redis client (ioredis: { username, password }; node-redis: createClient({ url: 'redis://user:password@host:6379' }); GLIDE: credentials); retrying will not help";

/** `message` without the trailing newline and full stop a server or client library ends it with, to go before "; ...". */
export function bare(message: string): string {
  return message.trim().replace(/\.+$/, '');
}

/**
 * Wraps a failure of the Redis client (either library) into a typed error
 * that says what to do.
 */
export function redisFailure(what: string, cause: unknown, context: RWLockErrorContext, client?: RedisClient): RWLockError {
  if (cause instanceof RWLockError) return cause;
  const message = bare(cause instanceof Error ? cause.message : String(cause));
  // ioredis' "Connection is closed." is also what a Cluster answers for commands in flight to a
  // master that just died: a transient failure, unless the client itself was closed. node-redis
  // says ClientClosedError only of a client closed (or never connected) by its user.
  if ((client !== undefined && isClosed(client)) || isNodeRedisClosedError(cause)) {
    return new ClientClosedError(`${what} failed: the Redis client was closed (${message}); use an open client`, {
      ...context,
      cause,
    });
  }
  const permission = missingPermission(message);
  if (permission !== undefined) {
    const grant = permission.startsWith('command ')
      ? `+${permission.slice('command '.length)}`
      : permission === 'unknown'
        ? 'the permissions the library needs'
        : `access to the lock's ${permission === 'keys' ? 'keys (~<prefix>:* ~<prefix>#*)' : 'channel (&<prefix>:*)'}`;
    return new NoPermissionError(
      `${what} was refused by the server's ACL (${message}); grant the Redis user ${grant} ` +
        '(docs/operations.md, "Redis ACL", gives the whole rule); retrying will not help',
      permission,
      { ...context, cause },
    );
  }
  if (LOGIN_REFUSED.test(message)) {
    return new NoPermissionError(`${what} failed: the server refused the client's login (${message}); ${FIX_LOGIN}`, 'login', {
      ...context,
      cause,
    });
  }
  // A script refused for its keys: of several slots (CROSSSLOT, from a proxy or service that routes by
  // key), or not declared (Dragonfly). Renewal falls back to one slot per call; anything else that
  // gets this (legacy keys of several slots, on one server behind such a proxy) fails again if retried.
  if (refusesSeveralSlots(message)) {
    return new CrossSlotError(
      `${what} was refused: the server, or a proxy in front of it, takes no script whose keys lie in several slots (${message}); ` +
        "give every key of the lock one hash tag (in legacy and bridge mode, a legacyKeys function that returns e.g. '{<resource>}:read' and '{<resource>}:write'), " +
        'or connect with a Cluster client; retrying will not help',
      { ...context, cause },
    );
  }
  // A Cluster client follows MOVED and ASK (ioredis wraps the last one when it gives up: "Too many Cluster
  // redirections"); a bare one reached the caller through a plain connection to a Cluster node.
  if (/^(?:MOVED|ASK) \d+ /.test(message)) {
    return new UnsupportedServerError(`${what} failed: ${message}; ${PLAIN_CLUSTER_NODE}`, { ...context, cause });
  }
  const refusal = serverRefusal(what, message, { ...context, cause });
  if (refusal !== undefined) return refusal;
  const trouble = client !== undefined ? connectionTrouble(client) : undefined;
  const connection = trouble !== undefined && !message.includes(trouble) ? ` (${trouble})` : '';
  return new RedisUnavailableError(`${what} failed: ${message}${connection}; the operation may be retried`, { ...context, cause });
}

/**
 * What an ACL refusal says is missing: `command <name>`, `keys`,
 * `channels`, or `unknown`; undefined when `message` is no ACL refusal.
 * Inside a script Redis 7.0 names no command ("The user executing the
 * script can't run this command ... script: <sha>, on @user_script:<line>"),
 * so the line of the library's script names it.
 */
export function missingPermission(message: string): string | undefined {
  const inScript = /user executing the script can't|ACL failure in script/.test(message);
  if (!inScript && !message.startsWith('NOPERM')) return undefined;
  const command = /permissions to run the '([^']+)' command/.exec(message)?.[1];
  if (command !== undefined) return `command ${command.toLowerCase()}`;
  if (/\bkeys?\b/.test(message)) return 'keys';
  if (/\bchannels?\b/.test(message)) return 'channels'; // "can't publish to the channel mentioned in the command"
  const at = /script: ([0-9a-f]{40}), on @user_script:(\d+)/.exec(message);
  const line = at && scriptsBySha().get(at[1]!)?.split('\n')[Number(at[2]) - 1];
  const called = line && /\b(?:rcall|redis\.p?call)\('([A-Za-z]+)'/.exec(line)?.[1];
  return called ? `command ${called.toLowerCase()}` : 'unknown';
}

let shas: Map<string, string> | undefined;
/** The library's scripts by their SHA-1, as Redis names them in errors. */
function scriptsBySha(): Map<string, string> {
  return (shas ??= new Map(Object.values(LUA_SOURCES).map((source) => [createHash('sha1').update(source).digest('hex'), source])));
}

/** node-redis' `ClientClosedError` ("The client is closed"), known by its class name: the library does not import node-redis. */
function isNodeRedisClosedError(error: unknown): boolean {
  return error instanceof Error && error.constructor.name === 'ClientClosedError';
}
