import { Cluster, Redis } from 'ioredis';
import type { RedisClient } from '../redis.js';
import { UsageError } from './command.js';

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

/**
 * Connects to the server given by `--redis` (a redis:// or rediss:// URL) or
 * the Cluster given by `--cluster`, failing fast instead of retrying forever:
 * an operator tool should say "cannot connect" and exit.
 */
export async function connect(url: string | undefined, clusterList: string | undefined): Promise<RedisClient> {
  if (url !== undefined && clusterList !== undefined) throw new UsageError('give --redis or --cluster, not both');
  const common = {
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout: CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
  };
  if (clusterList !== undefined) {
    const cluster = new Cluster(parseClusterNodes(clusterList), {
      lazyConnect: true,
      clusterRetryStrategy: () => null,
      redisOptions: common,
      slotsRefreshTimeout: CONNECT_TIMEOUT_MS,
    });
    let cause: Error | undefined;
    cluster.on('error', (error: Error) => (cause ??= error)); // reported through the failing command
    try {
      await giveUpAfter(cluster.connect());
    } catch (error) {
      cluster.disconnect();
      throw new Error(`cannot connect to the Cluster at ${clusterList}: ${(error as Error).message}${detail(cause, error)}`);
    }
    return cluster;
  }
  const target = url ?? DEFAULT_REDIS_URL;
  if (!/^rediss?:\/\//.test(target)) throw new UsageError(`--redis: "${target}" is not a redis:// or rediss:// URL`);
  const redis = new Redis(target, common);
  let cause: Error | undefined;
  redis.on('error', (error: Error) => (cause ??= error)); // reported through the failing command
  try {
    await giveUpAfter(redis.connect());
  } catch (error) {
    redis.disconnect();
    throw new Error(`cannot connect to Redis at ${redact(target)}: ${(error as Error).message}${detail(cause, error)}`);
  }
  return redis;
}

/**
 * `connecting`, or a rejection after CONNECT_TIMEOUT_MS in all: ioredis' own
 * timeouts apply one after the other (the TCP connect, then the ready
 * check's INFO), and a server that accepts and never answers took ~10 s.
 */
async function giveUpAfter(connecting: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      connecting,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`)), CONNECT_TIMEOUT_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The URL without its password, for messages. */
export function redact(url: string): string {
  return url.replace(/^(rediss?:\/\/)([^@/]*)@/, (_, scheme: string, auth: string) => `${scheme}${auth.includes(':') ? auth.split(':')[0] + ':***' : '***'}@`);
}

function detail(cause: Error | undefined, error: unknown): string {
  return cause && cause !== error && cause.message !== (error as Error).message ? ` (${cause.message})` : '';
}
