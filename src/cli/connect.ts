import { readFileSync } from 'node:fs';
import { bare } from '../redis.js';
import { type CliRedis, loadLibrary, openClient } from './cli-redis.js';
import { type CliIO, type ParsedValues, UsageError } from './command.js';

/** Where `--redis` points when neither it nor `--cluster` is given. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
/** How long the CLI waits to connect and for each reply before it gives up. */
export const CONNECT_TIMEOUT_MS = 5_000;

/** `host:port,host:port` -> nodes; a bare host means port 6379. */
export function parseClusterNodes(list: string): { host: string; port: number }[] {
  const nodes = list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(entry);
      const port = match?.[2] === undefined ? 6379 : Number(match[2]);
      if (!match || !Number.isInteger(port) || port < 1 || port > 65_535) {
        throw new UsageError(`--cluster: "${entry}" is not host:port`);
      }
      return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
    });
  if (nodes.length === 0) throw new UsageError('--cluster: give at least one host:port');
  return nodes;
}

/** The connection options every command takes. */
export const CONNECTION_OPTIONS = {
  redis: { type: 'string' },
  cluster: { type: 'string' },
  user: { type: 'string' },
  'ask-pass': { type: 'boolean' },
  tls: { type: 'boolean' },
  'tls-ca': { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  insecure: { type: 'boolean' },
} as const;

/** Their `--help` text. */
export const CONNECTION_HELP = `  --redis <url>         a Redis server, redis[s]://[user@]host:port[/db]
                        (default: $REDIS_URL, else ${DEFAULT_REDIS_URL})
  --cluster <nodes>     a Redis Cluster: host:port[,host:port...] (any of its nodes)
  --user <name>         the ACL user (default: the URL's, else "default")
  --ask-pass            ask for the password on the terminal; otherwise it is
                        read from $REDIS_PASSWORD (or $REDISCLI_AUTH, as redis-cli)
  --tls                 connect over TLS (implied by rediss:// and the --tls-* options)
  --tls-ca <file>       trust the server certificates this CA (PEM) signed
  --tls-cert <file>     a client certificate (PEM), with --tls-key
  --tls-key <file>      its private key (PEM)
  --insecure            do not check the server's certificate (warns; tests only)`;

/** TLS settings as text (PEM), so that the demo can hand them to its workers as JSON. */
export interface PemTls {
  ca?: string;
  cert?: string;
  key?: string;
  rejectUnauthorized?: boolean;
}

/** Who connects, and how: what both the CLI and the demo's workers pass to ioredis. */
export interface ConnectionAuth {
  readonly username?: string | undefined;
  readonly password?: string | undefined;
  readonly tls?: PemTls | undefined;
}

/** Where and how to connect, from the command line and the environment. */
export interface Connection extends ConnectionAuth {
  /** The server's URL, without user or password (those are in the other fields). */
  readonly url?: string | undefined;
  readonly cluster?: { host: string; port: number }[] | undefined;
  /** The target for messages: no password. */
  readonly display: string;
}

/** ioredis options for `auth`; with TLS, the Cluster options that go with it. */
export function authOptions(auth: ConnectionAuth): {
  redis: { username?: string; password?: string; tls?: PemTls };
  cluster: { dnsLookup?: (address: string, callback: (error: null, address: string) => void) => void };
} {
  return {
    redis: {
      ...(auth.username !== undefined ? { username: auth.username } : {}),
      ...(auth.password !== undefined ? { password: auth.password } : {}),
      ...(auth.tls !== undefined ? { tls: auth.tls } : {}),
    },
    // Over TLS, connect to the addresses the Cluster announces as they are (the certificate names them).
    cluster: auth.tls !== undefined ? { dnsLookup: (address, callback) => callback(null, address) } : {},
  };
}

/**
 * Resolves the connection options: `--redis` (else `$REDIS_URL`) or
 * `--cluster`; the user from `--user` or the URL; the password from the
 * terminal (`--ask-pass`), `$REDIS_PASSWORD` or `$REDISCLI_AUTH`, or the URL
 * (with a warning: argv is visible to every user of the machine); TLS from
 * `rediss://`, `--tls` and the certificate files. Throws {@link UsageError}
 * for a bad combination or an unreadable file.
 */
export async function connectionFrom(values: ParsedValues, env: NodeJS.ProcessEnv, io: CliIO): Promise<Connection> {
  const text = (name: string) => values[name] as string | undefined;
  const clusterList = text('cluster');
  if (text('redis') !== undefined && clusterList !== undefined) throw new UsageError('give --redis or --cluster, not both');
  const url = clusterList === undefined ? (text('redis') ?? (env.REDIS_URL || DEFAULT_REDIS_URL)) : undefined;
  let parsedUrl: URL | undefined;
  if (url !== undefined) {
    if (!/^rediss?:\/\//.test(url)) throw new UsageError(`--redis: "${redact(url)}" is not a redis:// or rediss:// URL`);
    try {
      parsedUrl = new URL(url);
    } catch {
      throw new UsageError(`--redis: "${redact(url)}" is not a URL`);
    }
  }
  let password: string | undefined;
  if (values['ask-pass'] === true) {
    if (!io.interactive || !io.askSecret) throw new UsageError('--ask-pass needs a terminal; set REDIS_PASSWORD instead');
    password = await io.askSecret('Redis password: ');
  } else {
    password = env.REDIS_PASSWORD || env.REDISCLI_AUTH || undefined;
  }
  if (parsedUrl?.password) {
    io.err('redis-rwlock: warning: a password in --redis is visible to every user of this machine (ps); set REDIS_PASSWORD instead\n');
    password ??= decodeURIComponent(parsedUrl.password);
  }
  const username = text('user') ?? (parsedUrl?.username ? decodeURIComponent(parsedUrl.username) : undefined);
  const files = { ca: text('tls-ca'), cert: text('tls-cert'), key: text('tls-key') };
  if ((files.cert === undefined) !== (files.key === undefined)) throw new UsageError('--tls-cert and --tls-key go together');
  const wantsTls =
    parsedUrl?.protocol === 'rediss:' ||
    values.tls === true ||
    Object.values(files).some((f) => f !== undefined) ||
    values.insecure === true;
  let tls: PemTls | undefined;
  if (wantsTls) {
    tls = {};
    for (const [field, file] of Object.entries(files)) {
      if (file === undefined) continue;
      try {
        tls[field as keyof typeof files] = readFileSync(file, 'utf8');
      } catch (error) {
        throw new UsageError(`--tls-${field}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
      }
    }
    if (values.insecure === true) {
      io.err(
        "redis-rwlock: warning: --insecure: the server's certificate is not checked, so anyone on the path can read and change what is sent\n",
      );
      tls.rejectUnauthorized = false;
    }
  }
  const cluster = clusterList === undefined ? undefined : parseClusterNodes(clusterList);
  const display =
    (clusterList !== undefined ? `cluster ${clusterList}` : redact(url!)) + (tls && parsedUrl?.protocol !== 'rediss:' ? ' (TLS)' : '');
  return { url: parsedUrl ? withoutAuth(parsedUrl) : undefined, cluster, username, password, tls, display };
}

/** The URL with no user or password in it: those are passed as options. */
function withoutAuth(url: URL): string {
  const copy = new URL(url.href);
  copy.username = '';
  copy.password = '';
  return copy.href;
}

/**
 * Connects to the server or Cluster of `connection`, on ioredis or
 * node-redis (`loadLibrary`), failing fast instead of retrying forever: an
 * operator tool should say "cannot connect" and exit. A server given with
 * `--redis` that is a Cluster node is refused: the CLI would see (and
 * change) that node's slots only.
 */
export async function connect(connection: Connection, env: NodeJS.ProcessEnv = process.env): Promise<CliRedis> {
  const loaded = await loadLibrary(env);
  let redis: CliRedis;
  try {
    redis = await openClient(loaded, { ...connection, timeoutMs: CONNECT_TIMEOUT_MS });
  } catch (error) {
    const what = connection.cluster ? `the Cluster at ${connection.display.replace(/^cluster /, '')}` : `Redis at ${connection.display}`;
    const message = bare((error as Error).message);
    // The server wants a password, or refused the one given: no retry helps, the command line does.
    const login = /\b(?:NOAUTH|WRONGPASS)\b|unauthenticated/.test(message)
      ? '; give the password in $REDIS_PASSWORD (or --ask-pass) and the user with --user'
      : '';
    throw new Error(`cannot connect to ${what}: ${message}${login}`);
  }
  if (!connection.cluster) {
    const info = await redis.command(['INFO', 'cluster']).catch(() => ''); // an ACL without INFO: cannot tell
    if (typeof info === 'string' && /^cluster_enabled:1\s*$/m.test(info)) {
      redis.disconnect();
      const node = new URL(connection.url!);
      throw new UsageError(
        `--redis: ${connection.display} is a Redis Cluster node, and a plain connection sees its own slots only; ` +
          `give --cluster ${node.hostname}:${node.port || 6379} (any node of the Cluster) instead`,
      );
    }
  }
  return redis;
}

/** The URL without its password, for messages (any scheme: a wrong one is shown too). */
export function redact(url: string): string {
  return url.replace(
    /^([a-z][a-z0-9+.-]*:\/\/)([^@/]*)@/i,
    (_, scheme: string, auth: string) => `${scheme}${auth.includes(':') ? `${auth.split(':')[0]}:***` : '***'}@`,
  );
}
