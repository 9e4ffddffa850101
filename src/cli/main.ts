import { type ParseArgsConfig, parseArgs } from 'node:util';
import { InvalidArgumentError, RWLockError } from '../errors.js';
import { PACKAGE_VERSION } from '../lua/scripts.generated.js';
import type { CliRedis } from './cli-redis.js';
import { type CliCommand, type CliIO, type CommandContext, EXIT, UsageError } from './command.js';
import { COMMANDS } from './commands/index.js';
import { CONNECTION_HELP, CONNECTION_OPTIONS, type Connection, connect, connectionFrom } from './connect.js';
import { processIO } from './process-io.js';

/** Options every command takes. */
const COMMON_OPTIONS = {
  ...CONNECTION_OPTIONS,
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

const COMMON_HELP = `Connection and output (every command):
${CONNECTION_HELP}
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

Run "redis-rwlock <command> --help" for a command's options,
"redis-rwlock --version" (-v) for the package's version.

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

/** Runs the CLI on `argv` (without node and the script) and resolves with the exit code. */
export async function main(argv: readonly string[], io: CliIO = processIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-v') {
    io.out(`${PACKAGE_VERSION}\n`);
    return EXIT.OK;
  }
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
    if (parsed.values.help) {
      io.out(commandHelp(command));
      return EXIT.OK;
    }
    const { min, max, names } = command.positionals;
    if (parsed.positionals.length < min) throw new UsageError(`missing ${names}`);
    if (parsed.positionals.length > max) throw new UsageError(`unexpected argument "${parsed.positionals[max]}"`);
  } catch (error) {
    io.err(
      `redis-rwlock ${command.name}: ${(error as Error).message}\nUsage: ${command.usage}\nRun "redis-rwlock ${command.name} --help" for more.\n`,
    );
    return EXIT.USAGE;
  }

  let client: CliRedis | undefined;
  let connection: Promise<Connection> | undefined;
  const connectionOf = () => (connection ??= connectionFrom(parsed.values, env, io));
  const ctx: CommandContext = {
    values: parsed.values,
    positionals: parsed.positionals,
    io,
    json: parsed.values.json === true,
    target: async () => (await connectionOf()).display,
    redis: async () => (client ??= await connect(await connectionOf(), env)),
  };
  try {
    return await command.run(ctx);
  } catch (error) {
    // A bad value on the command line (an empty resource, a bad prefix) that the library refused.
    if (error instanceof UsageError || error instanceof InvalidArgumentError) {
      io.err(`redis-rwlock ${command.name}: ${error.message}\nRun "redis-rwlock ${command.name} --help" for more.\n`);
      return EXIT.USAGE;
    }
    const message = error instanceof RWLockError ? `${error.name}: ${error.message}` : ((error as Error).message ?? String(error));
    if (ctx.json) io.out(`${JSON.stringify({ error: { name: (error as Error).name ?? 'Error', message } }, null, 2)}\n`);
    io.err(`redis-rwlock ${command.name}: ${message}\n`);
    return EXIT.FAILED;
  } finally {
    client?.disconnect();
  }
}
