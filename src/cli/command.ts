import type { ParseArgsConfig } from 'node:util';
import type { CliRedis } from './cli-redis.js';

/**
 * Exit codes of the `redis-rwlock` CLI. Scripts can rely on them; they are
 * listed in `redis-rwlock --help` and in docs/cli.md.
 */
export const EXIT = Object.freeze({
  /** The command did what was asked. */
  OK: 0,
  /** It failed: Redis unreachable, a Redis error, a lock that cannot be addressed (e.g. CROSSSLOT). */
  FAILED: 1,
  /** The command line was wrong (unknown command or option, missing argument). */
  USAGE: 2,
  /** `release --force`: the lock had no keys; nothing was deleted. */
  NOTHING: 3,
  /** `migrate-check`: old processes still write (or hold) legacy keys; keep `bridge` mode. */
  LEGACY_ACTIVE: 4,
  /** `release --force`: not confirmed (answered no, or no terminal to ask on and no `--yes`). */
  CANCELLED: 5,
});

/** How the CLI talks to its user; replaced in tests. */
export interface CliIO {
  out(text: string): void;
  err(text: string): void;
  /** True when a person can answer questions (stdin and stdout are terminals). */
  readonly interactive: boolean;
  /** Asks one question on the terminal and resolves with the answer line. */
  ask(question: string): Promise<string>;
  /** Asks for a secret on the terminal without echoing it (`--ask-pass`). */
  askSecret?(question: string): Promise<string>;
  /**
   * The size of the terminal `out` writes to; undefined when it is not a
   * terminal (a pipe, a file). Commands that redraw (`top`) redraw only then.
   */
  readonly screen?: { readonly columns: number; readonly rows: number } | undefined;
  /**
   * Listens for the user's request to stop (Ctrl-C, SIGINT, SIGTERM, and on a
   * terminal the `q` key) until `dispose()`; `signal` aborts on it. Without
   * it, a long-running command runs until its own end.
   */
  interrupts?(): { readonly signal: AbortSignal; dispose(): void };
}

export type ParsedValues = Record<string, string | boolean | string[] | undefined>;

/** What a command gets to run with. */
export interface CommandContext {
  readonly values: ParsedValues;
  readonly positionals: readonly string[];
  readonly io: CliIO;
  /** `--json` was given: print one JSON document on stdout and nothing else there. */
  readonly json: boolean;
  /** Where `redis()` connects, for messages (no password). */
  target(): Promise<string>;
  /**
   * The Redis server or Cluster given by `--redis`/`--cluster`, connected on
   * first use (a command that needs no Redis never connects) and closed by
   * the CLI after the command.
   */
  redis(): Promise<CliRedis>;
}

/** One CLI command. Register it in src/cli/commands/index.ts. */
export interface CliCommand {
  readonly name: string;
  /** One line for the command list. */
  readonly summary: string;
  /** `redis-rwlock <name> ...`: the synopsis. */
  readonly usage: string;
  /** The rest of `--help`: what it does, its options, its exit codes. */
  readonly help: string;
  /** Its own options (the connection options, --json and --help are added by the CLI). */
  readonly options: NonNullable<ParseArgsConfig['options']>;
  /** How many positional arguments it takes. */
  readonly positionals: { readonly min: number; readonly max: number; readonly names: string };
  run(ctx: CommandContext): Promise<number>;
}

/** A wrong command line: printed with a pointer to `--help`, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}
