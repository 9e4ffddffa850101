/**
 * The demo's command line.
 *
 * @module
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { type CliIO, UsageError } from '../cli/command.js';
import { CONNECTION_HELP, CONNECTION_OPTIONS, connectionFrom } from '../cli/connect.js';
import { processIO } from '../cli/process-io.js';
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
/** One line on what the demo does, for the CLI's list of commands. */
export const DEMO_SUMMARY = 'run the cache-rebuild demo (embedded local Redis Cluster, or --redis/--cluster)';

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

const CONNECTION_AND_OUTPUT = `${CONNECTION_HELP}
  --json                print the summary as JSON on stdout
  -h, --help            show this help`;

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

Connection (the default server does not apply: without --redis or --cluster
the demo starts its own Cluster) and output:
${CONNECTION_AND_OUTPUT}

${STOPPING}
`;

/** The demo's own options, as `node:util` parseArgs takes them (the CLI adds its connection options and --json). */
export const DEMO_OWN_OPTIONS = {
  duration: { type: 'string' },
  processes: { type: 'string' },
  readers: { type: 'string' },
  writers: { type: 'string' },
  values: { type: 'string' },
  parts: { type: 'string' },
  'without-locks': { type: 'boolean' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

/** Every option of the demo run on its own (`npm run demo`): the same connection options as the CLI's. */
const DEMO_OPTIONS = {
  ...DEMO_OWN_OPTIONS,
  ...CONNECTION_OPTIONS,
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

/** What parseArgs made of a command line: the demo's options and the CLI's common ones. */
export type DemoValues = { readonly [name: string]: string | boolean | (string | boolean)[] | undefined };

/**
 * Parses `argv` (without the `demo` command itself); the password comes from
 * `env` or a question on `io`'s terminal, as for the CLI. @throws {@link UsageError}
 */
export function parseDemoArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env, io: CliIO = processIO): Promise<DemoOptions> {
  let values: DemoValues;
  try {
    ({ values } = parseArgs({ args: [...argv], options: DEMO_OPTIONS, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new UsageError((error as Error).message); // parseArgs says what is wrong (ERR_PARSE_ARGS_*)
  }
  return demoOptions(values, env, io);
}

/** The demo's settings from parsed options (the demo's own, the connection options, `json`, `help`). @throws {@link UsageError} */
export async function demoOptions(values: DemoValues, env: NodeJS.ProcessEnv, io: CliIO): Promise<DemoOptions> {
  const text = (name: string): string | undefined => (typeof values[name] === 'string' ? (values[name] as string) : undefined);
  const flag = (name: string): boolean => values[name] === true;
  const number = (name: string, fallback: number, min: number, max: number): number => {
    const given = text(name);
    return given === undefined ? fallback : count(`--${name}`, given, min, max);
  };
  const duration = text('duration');
  const options: DemoOptions = {
    durationMs: duration === undefined ? DEFAULTS.durationMs : parseDuration(duration),
    target: await targetOf(values, env, io),
    processes: number('processes', DEFAULTS.processes, 1, 32),
    readers: number('readers', DEFAULTS.readers, 0, 100),
    writers: number('writers', DEFAULTS.writers, 0, 100),
    values: number('values', DEFAULTS.values, 1, 100),
    parts: number('parts', DEFAULTS.parts, 2, 100),
    withoutLocks: flag('without-locks'),
    json: flag('json'),
    help: flag('help'),
  };
  if (!options.help && options.readers + options.writers === 0) throw new UsageError('--readers and --writers cannot both be 0');
  return options;
}

const DEFAULTS = {
  durationMs: 10_000,
  processes: 4,
  readers: 6,
  writers: 1,
  values: 3,
  parts: 5,
} as const;

/** `10s`, `1500ms`, `2m`, or a bare number of seconds; from 100 ms to 24 h. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!match) throw new UsageError(`--duration: expected a time such as 10s, 1500ms or 2m, got ${JSON.stringify(text)}`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(match[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  const ms = Math.round(Number(match[1]) * unit);
  if (ms < 100 || ms > 86_400_000) throw new UsageError(`--duration: must be from 100ms to 24h, got ${text}`);
  return ms;
}

function count(name: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max)
    throw new UsageError(`${name}: must be a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`);
  return n;
}

/**
 * The user's servers, with the CLI's connection options and their rules;
 * undefined for the embedded Cluster, which takes none of them.
 */
async function targetOf(values: DemoValues, env: NodeJS.ProcessEnv, io: CliIO): Promise<Target | undefined> {
  if (values.redis === undefined && values.cluster === undefined) {
    const given = Object.keys(CONNECTION_OPTIONS).filter((name) => values[name] !== undefined);
    if (given.length > 0) throw new UsageError(`--${given[0]} is for --redis or --cluster; without them the demo starts its own Cluster`);
    return undefined;
  }
  const { url, cluster, username, password, tls } = await connectionFrom(values as Parameters<typeof connectionFrom>[0], env, io);
  const auth = {
    ...(username !== undefined && { username }),
    ...(password !== undefined && { password }),
    ...(tls !== undefined && { tls }),
  };
  return cluster !== undefined ? { kind: 'cluster', nodes: cluster, ...auth } : { kind: 'redis', url: url!, ...auth };
}
