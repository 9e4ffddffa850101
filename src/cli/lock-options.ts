import type { ParseArgsConfig } from 'node:util';
import { LockClient } from '../client.js';
import type { LockRedisClient } from '../clients/index.js';
import { validatePrefix } from '../keys/keys.js';
import { CLIENT_DEFAULTS, type LockClientMode } from '../options.js';
import { type ParsedValues, UsageError } from './command.js';
import { globEscape } from './scan.js';

/** Options of the commands that address one lock the way a LockClient would. */
export const LOCK_OPTIONS = {
  prefix: { type: 'string' },
  mode: { type: 'string' },
  'legacy-read': { type: 'string' },
  'legacy-write': { type: 'string' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

export const LOCK_OPTIONS_HELP = `  --prefix <p>          key prefix of the LockClients (default ${CLIENT_DEFAULTS.prefix})
  --mode <m>            hash (default), legacy or bridge: the layout the services use
  --legacy-read <t>     legacy/bridge: the read key, %s standing for the resource (default %s:read)
  --legacy-write <t>    legacy/bridge: the write key (default %s:write)`;

export const DEFAULT_LEGACY_READ = '%s:read';
export const DEFAULT_LEGACY_WRITE = '%s:write';

const MODES: readonly LockClientMode[] = ['hash', 'legacy', 'bridge'];

export function modeOf(values: ParsedValues): LockClientMode {
  const mode = (values.mode as string | undefined) ?? 'hash';
  if (!MODES.includes(mode as LockClientMode)) throw new UsageError(`--mode: must be one of ${MODES.join(', ')}, got "${mode}"`);
  return mode as LockClientMode;
}

/** A key template: `%s` stands for the resource (exactly once). */
export function template(values: ParsedValues, name: 'legacy-read' | 'legacy-write'): string {
  const t = (values[name] as string | undefined) ?? (name === 'legacy-read' ? DEFAULT_LEGACY_READ : DEFAULT_LEGACY_WRITE);
  if (t.split('%s').length !== 2) throw new UsageError(`--${name}: must contain %s once, standing for the resource, got "${t}"`);
  return t;
}

/** The glob that matches every key a template makes (for SCAN MATCH). */
export function templateGlob(t: string): string {
  const [before, after] = t.split('%s') as [string, string];
  return `${globEscape(before)}*${globEscape(after)}`;
}

/** Checks the lock options before anything connects: a bad command line is exit 2, never a connection error. */
export function checkLockOptions(values: ParsedValues): void {
  const mode = modeOf(values);
  if (values.prefix !== undefined) {
    try {
      validatePrefix(values.prefix);
    } catch (error) {
      throw new UsageError(`--prefix: ${(error as Error).message}`);
    }
  }
  if (mode === 'hash') {
    if (values['legacy-read'] !== undefined || values['legacy-write'] !== undefined) {
      throw new UsageError('--legacy-read and --legacy-write apply to --mode legacy or bridge');
    }
  } else {
    template(values, 'legacy-read');
    template(values, 'legacy-write');
  }
}

/**
 * A LockClient on `redis` as the services configure theirs (never kept past
 * the command). A master that may evict lock keys is the command's to show
 * in its output, not a process warning's.
 */
export function lockClientFor(redis: LockRedisClient, values: ParsedValues): LockClient {
  checkLockOptions(values);
  const mode = modeOf(values);
  const prefix = values.prefix as string | undefined;
  const onEvictionRisk = 'ignore';
  if (mode === 'hash') return new LockClient(redis, { onEvictionRisk, ...(prefix === undefined ? {} : { prefix }) });
  const read = template(values, 'legacy-read');
  const write = template(values, 'legacy-write');
  return new LockClient(redis, {
    mode,
    onEvictionRisk,
    ...(prefix === undefined ? {} : { prefix }),
    legacyKeys: (resource) => ({ read: read.replace('%s', () => resource), write: write.replace('%s', () => resource) }),
  });
}
