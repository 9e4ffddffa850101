import { createInterface } from 'node:readline/promises';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { RWLockError } from '../errors.js';
import type { RedisClient } from '../redis.js';
import { EXIT, UsageError, type CliCommand, type CliIO, type CommandContext } from './command.js';
import { COMMANDS } from './commands/index.js';
import { connect, DEFAULT_REDIS_URL } from './connect.js';

/** Options every command takes. */
const COMMON_OPTIONS = {
  redis: { type: 'string' },
  cluster: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

const COMMON_HELP = `Connection and output (every command):
  --redis <url>         a Redis server, redis://[user:password@]host:port[/db] (default ${DEFAULT_REDIS_URL})
  --cluster <nodes>     a Redis Cluster: host:port[,host:port...] (any of its nodes)
  --json                print one JSON document instead of tables
  -h, --help            this help`;

const EXIT_HELP = `Exit codes:
  0  done
  1  failed: Redis unreachable or erring, or a lock that cannot be addressed (CROSSSLOT)
  2  bad command line
  3  release: the lock had no keys, nothing to release
  4  migrate-check: old processes still write (or hold) legacy keys
  5  release: not confirmed`;

export function mainHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return `redis-rwlock: inspect and operate redis-rwlock locks

Usage: redis-rwlock <command> [options]

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n')}

Run "redis-rwlock <command> --help" for a command's options.

${COMMON_HELP}

${EXIT_HELP}
`;
}

export function commandHelp(command: CliCommand): string {
  return `Usage: ${command.usage}

${command.help.trimEnd()}

${COMMON_HELP}
`;
}

/** The process's terminal. */
export const processIO: CliIO = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  get interactive() {
    return Boolean(process.stdin.isTTY && process.stdout.isTTY);
  },
  async ask(question) {
    const rl = createInterface({ input: process.stdin, output: process.stdout });
    try {
      return await rl.question(question);
    } finally {
      rl.close();
    }
  },
  get screen() {
    return process.stdout.isTTY ? { columns: process.stdout.columns || 80, rows: process.stdout.rows || 24 } : undefined;
  },
  interrupts() {
    const controller = new AbortController();
    const stop = () => controller.abort();
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    // On a terminal, keys come one by one (raw mode): q quits, and so does Ctrl-C (raw mode sends no SIGINT).
    const keys = process.stdin.isTTY && process.stdout.isTTY;
    const onKey = (data: Buffer) => {
      const key = data.toString();
      if (key === 'q' || key === 'Q' || key === '\u0003') stop();
    };
    if (keys) {
      process.stdin.setRawMode(true);
      process.stdin.on('data', onKey);
      process.stdin.resume();
    }
    return {
      signal: controller.signal,
      dispose() {
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
        if (keys) {
          process.stdin.off('data', onKey);
          process.stdin.setRawMode(false);
          process.stdin.pause();
        }
      },
    };
  },
};

/** Runs the CLI on `argv` (without node and the script) and resolves with the exit code. */
export async function main(argv: readonly string[], io: CliIO = processIO): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    const target = name === 'help' ? COMMANDS.find((c) => c.name === rest[0]) : undefined;
    if (name === undefined) {
      io.err(mainHelp());
      return EXIT.USAGE;
    }
    io.out(target ? commandHelp(target) : mainHelp());
    return EXIT.OK;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    io.err(`redis-rwlock: unknown command "${name}"; the commands are ${COMMANDS.map((c) => c.name).join(', ')}\n`);
    return EXIT.USAGE;
  }

  let parsed: { values: CommandContext['values']; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...rest], options: { ...COMMON_OPTIONS, ...command.options }, allowPositionals: true, strict: true });
    if (parsed.values['help']) {
      io.out(commandHelp(command));
      return EXIT.OK;
    }
    const { min, max, names } = command.positionals;
    if (parsed.positionals.length < min) throw new UsageError(`missing ${names}`);
    if (parsed.positionals.length > max) throw new UsageError(`unexpected argument "${parsed.positionals[max]}"`);
  } catch (error) {
    io.err(`redis-rwlock ${command.name}: ${(error as Error).message}\nUsage: ${command.usage}\nRun "redis-rwlock ${command.name} --help" for more.\n`);
    return EXIT.USAGE;
  }

  let client: RedisClient | undefined;
  const ctx: CommandContext = {
    values: parsed.values,
    positionals: parsed.positionals,
    io,
    json: parsed.values['json'] === true,
    redis: async () => (client ??= await connect(parsed.values['redis'] as string | undefined, parsed.values['cluster'] as string | undefined)),
  };
  try {
    return await command.run(ctx);
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(`redis-rwlock ${command.name}: ${error.message}\nRun "redis-rwlock ${command.name} --help" for more.\n`);
      return EXIT.USAGE;
    }
    const message = error instanceof RWLockError ? `${error.name}: ${error.message}` : (error as Error).message ?? String(error);
    if (ctx.json) io.out(JSON.stringify({ error: { name: (error as Error).name ?? 'Error', message } }, null, 2) + '\n');
    io.err(`redis-rwlock ${command.name}: ${message}\n`);
    return EXIT.FAILED;
  } finally {
    client?.disconnect();
  }
}
