/**
 * The demo's command line.
 *
 * @module
 */
import type { Target } from './protocol.js';

/** The demo's settings, from the command line. */
export interface DemoOptions {
  /** Run time in ms. */
  readonly durationMs: number;
  /** The user's servers; undefined to start an embedded local Redis Cluster. */
  readonly target: Target | undefined;
  readonly processes: number;
  readonly readers: number;
  readonly writers: number;
  readonly values: number;
  readonly parts: number;
  readonly withoutLocks: boolean;
  /** Print the final summary as one JSON object on stdout (everything else goes to stderr). */
  readonly json: boolean;
  readonly help: boolean;
}

/** The demo's synopsis. */
export const DEMO_SYNOPSIS = 'redis-rwlock demo [--duration 10s] [--redis url | --cluster host:port,...] [options]';

const DESCRIPTION = `The cache-rebuild scenario: several processes serve cached values under read
locks while rebuild writers replace them, part by part, under write locks.
Every read checks that the value is whole; the summary says whether any reader
ever saw a half-built value (and the exit code is 1 if one did).

With neither --redis nor --cluster, an embedded local Redis Cluster (3 masters,
3 replicas, redis-server processes on free 127.0.0.1 ports) is started and
removed afterwards. It needs redis-server and redis-cli 7 or newer on PATH.`;

const OWN_OPTIONS = `  --duration <time>      how long to run: 10s (default), 1500ms, 2m
  --processes <n>        worker processes (default 4)
  --readers <n>          reader loops per process (default 6)
  --writers <n>          rebuild loops per process (default 1)
  --values <n>           cached values, each with its own lock (default 3)
  --parts <n>            steps (keys) per rebuild (default 5)
  --without-locks        run without locks, to see half-built reads caught`;

const CONNECTION_OPTIONS = `  --redis <url>          use this Redis server, e.g. redis://127.0.0.1:6379
  --cluster <host:port,...>
                         use this Redis Cluster (one or more of its nodes)
  --json                 print the summary as JSON on stdout
  -h, --help             show this help`;

const STOPPING = `Ctrl-C (or SIGTERM) stops the demo early: the workers finish what they hold,
release every lock, and the embedded servers are stopped (exit code 130, or
143 on SIGTERM). Exit codes: 0 every check passed, 1 a check failed (or the
demo could not run), 2 a bad command line.`;

/** The demo's help without its synopsis and the connection options, for the CLI (which adds those itself). */
export const DEMO_HELP = `${DESCRIPTION}
(The CLI's default server below does not apply to the demo.)

Options:
${OWN_OPTIONS}

${STOPPING}
`;

/** The demo's whole usage text, as \`--help\` prints it when it runs on its own. */
export const DEMO_USAGE = `Usage: ${DEMO_SYNOPSIS}

${DESCRIPTION}

Options:
${OWN_OPTIONS}
${CONNECTION_OPTIONS}

${STOPPING}
`;

/** A bad command line; the message says what is wrong. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

const DEFAULTS = {
  durationMs: 10_000,
  processes: 4,
  readers: 6,
  writers: 1,
  values: 3,
  parts: 5,
} as const;

/** Parses `argv` (without the `demo` command itself). @throws {@link UsageError} */
export function parseDemoArgs(argv: readonly string[]): DemoOptions {
  const o: {
    -readonly [K in keyof DemoOptions]: DemoOptions[K];
  } = { ...DEFAULTS, target: undefined, withoutLocks: false, json: false, help: false };
  const args = [...argv];
  while (args.length > 0) {
    const arg = args.shift()!;
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    const inline = eq > 0 ? arg.slice(eq + 1) : undefined;
    const value = (): string => {
      const v = inline ?? args.shift();
      if (v === undefined || (inline === undefined && v.startsWith('--'))) throw new UsageError(`${name} needs a value`);
      return v;
    };
    switch (name) {
      case '-h':
      case '--help':
        o.help = true;
        break;
      case '--duration':
        o.durationMs = parseDuration(value());
        break;
      case '--redis':
        if (o.target) throw new UsageError('give either --redis or --cluster, once');
        o.target = { kind: 'redis', url: parseRedisUrl(value()) };
        break;
      case '--cluster':
        if (o.target) throw new UsageError('give either --redis or --cluster, once');
        o.target = { kind: 'cluster', nodes: parseNodes(value()) };
        break;
      case '--processes':
        o.processes = count(name, value(), 1, 32);
        break;
      case '--readers':
        o.readers = count(name, value(), 0, 100);
        break;
      case '--writers':
        o.writers = count(name, value(), 0, 100);
        break;
      case '--values':
        o.values = count(name, value(), 1, 100);
        break;
      case '--parts':
        o.parts = count(name, value(), 2, 100);
        break;
      case '--without-locks':
        o.withoutLocks = true;
        break;
      case '--json':
        o.json = true;
        break;
      default:
        throw new UsageError(`unknown option ${JSON.stringify(arg)}`);
    }
    if (inline !== undefined && !['--duration', '--redis', '--cluster', '--processes', '--readers', '--writers', '--values', '--parts'].includes(name)) {
      throw new UsageError(`${name} takes no value`);
    }
  }
  if (!o.help && o.readers + o.writers === 0) throw new UsageError('--readers and --writers cannot both be 0');
  return o;
}

/** `10s`, `1500ms`, `2m`, or a bare number of seconds; from 100 ms to 24 h. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!match) throw new UsageError(`--duration: expected a time such as 10s, 1500ms or 2m, got ${JSON.stringify(text)}`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(match[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  const ms = Math.round(Number(match[1]) * unit);
  if (ms < 100 || ms > 86_400_000) throw new UsageError(`--duration: must be from 100ms to 24h, got ${text}`);
  return ms;
}

function parseRedisUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--redis: expected a URL such as redis://127.0.0.1:6379, got ${JSON.stringify(text)}`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new UsageError(`--redis: expected a redis:// or rediss:// URL, got ${JSON.stringify(text)}`);
  }
  return text;
}

/** `host:port,host:port`; IPv6 hosts in brackets (`[::1]:7000`). */
function parseNodes(text: string): { host: string; port: number }[] {
  const nodes = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((spec) => {
      const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(spec);
      const port = Number(match?.[3]);
      if (!match || !Number.isInteger(port) || port < 1 || port > 65_535) {
        throw new UsageError(`--cluster: expected host:port[,host:port...], got ${JSON.stringify(spec)}`);
      }
      return { host: match[1] ?? match[2]!, port };
    });
  if (nodes.length === 0) throw new UsageError('--cluster: give at least one host:port');
  return nodes;
}

function count(name: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max) throw new UsageError(`${name}: must be a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`);
  return n;
}
