import calculateSlot from 'cluster-key-slot';
import type { LockInfo } from '../../backends/backend.js';
import { evictionChecked } from '../../backends/eviction.js';
import { hashLayout } from '../../backends/layouts.js';
import { ScriptedBackend } from '../../backends/scripted.js';
import { driverFor } from '../../clients/index.js';
import { hashTagOf, type LockKeys, lockKeys, validatePrefix } from '../../keys/keys.js';
import { legacyTwinNames } from '../../keys/legacy.js';
import { CLIENT_DEFAULTS } from '../../options.js';
import type { CliRedis } from '../cli-redis.js';
import { type CliCommand, EXIT, UsageError } from '../command.js';
import { duration, evictionNote, json, shortToken, table } from '../format.js';
import { globEscape, scanKeys } from '../scan.js';

const DEFAULT_LIMIT = 1000;

/** One lock found by `list`. */
export interface ListedLock {
  /** `hash`: a hash-mode or bridge-mode lock; `legacy`: the state a legacy-mode LockClient keeps beside the legacy keys. */
  readonly layout: 'hash' | 'legacy';
  /** The resource (hash layout), or the legacy read key the state belongs to (legacy layout). */
  readonly resource: string;
  readonly info: LockInfo;
}

export const list: CliCommand = {
  name: 'list',
  summary: 'every lock with state, found by SCAN on every master',
  usage: 'redis-rwlock list [--prefix p] [--limit n] [--json]',
  help: `Finds every lock that has state in Redis (held, or with writers waiting) by
SCAN on every master, and shows each one's mode, holders and fence. Locks of
hash and bridge mode are listed by resource; the state that legacy-mode
clients keep beside the legacy keys is listed by the legacy read key. Locks
without any state (free, nobody waiting) have no keys and are not listed.
SCAN never blocks the server, but walks the whole keyspace of each master.
A master that may evict lock keys (maxmemory set, maxmemory-policy not
noeviction) is named after the table.

Options:
  --prefix <p>          key prefix of the LockClients (default ${CLIENT_DEFAULTS.prefix})
  --limit <n>           inspect at most n locks (default ${DEFAULT_LIMIT}); the rest are counted

Exit codes: 0 listed (also when there are none), 1 failed, 2 bad command line.`,
  options: { prefix: { type: 'string' }, limit: { type: 'string' } },
  positionals: { min: 0, max: 0, names: '' },
  async run(ctx) {
    const prefix = prefixOf(ctx.values.prefix as string | undefined);
    const limit = limitOf(ctx.values.limit as string | undefined);
    const redis = await ctx.redis();
    const driver = driverFor(redis.client)!;
    const backend = new ScriptedBackend(driver, hashLayout(prefix));
    const found = await findLocks(redis, prefix);
    const locks: ListedLock[] = [];
    for (const f of found.slice(0, limit)) {
      locks.push({
        layout: f.layout,
        resource: f.resource,
        info: await redis.bounded(backend.inspect(f.resource, f.keys), `inspect "${f.resource}"`),
      });
    }
    const omitted = Math.max(0, found.length - limit);
    const evictionRisks = await evictionChecked(driver);
    if (ctx.json) {
      const listed = locks.map((l) => ({ layout: l.layout, ...l.info, resource: l.resource }));
      ctx.io.out(json({ prefix, locks: listed, omitted, evictionRisks }));
      return EXIT.OK;
    }
    const notes = evictionRisks.map((risk) => `${evictionNote(risk)}\n`).join('');
    if (locks.length === 0) {
      ctx.io.out(`no locks with state under prefix "${prefix}"\n${notes}`);
      return EXIT.OK;
    }
    const rows = locks.map(({ layout, resource, info }) => [
      layout === 'legacy' ? `${resource} (legacy read key)` : resource,
      info.mode,
      info.writer ? `${shortToken(info.writer.owner)} x${info.writer.holds}` : '-',
      String(info.readers.length),
      duration(longestLease(info)),
      String(info.queue.length + (info.waitingWriter && !info.queue.some((q) => q.owner === info.waitingWriter!.owner) ? 1 : 0)),
      info.fence === null ? '-' : String(info.fence),
    ]);
    ctx.io.out(`${table(['RESOURCE', 'MODE', 'WRITER', 'READERS', 'LEASE LEFT', 'WAITING', 'FENCE'], rows)}\n`);
    if (omitted > 0) ctx.io.out(`... and ${omitted} more (raise --limit)\n`);
    ctx.io.out(notes);
    return EXIT.OK;
  },
};

/** A lock found by SCAN: its layout, its resource (or legacy read key), and its keys. */
export interface FoundLock {
  readonly layout: 'hash' | 'legacy';
  readonly resource: string;
  readonly keys: LockKeys;
}

/**
 * Every lock with state under `prefix`, by SCAN on every master: hash and
 * bridge locks by resource, the state legacy-mode clients keep by legacy
 * read key. Sorted by key.
 */
export async function findLocks(redis: CliRedis, prefix: string): Promise<FoundLock[]> {
  const hashKeys = await scanKeys(redis, `${globEscape(prefix)}:*`, 'hash');
  const legacyKeys = await scanKeys(redis, `${globEscape(`${prefix}#legacy:`)}*`, 'hash');
  const found: FoundLock[] = [];
  for (const state of hashKeys) {
    // The names are keys.ts's own; a hash it would not name so is not one of its locks.
    const resource = resourceOf(state.slice(prefix.length + 1));
    const keys = lockKeysOf(prefix, resource);
    if (keys?.state === state) found.push({ layout: 'hash', resource, keys });
  }
  for (const state of legacyKeys) {
    const read = state.slice(`${prefix}#legacy:`.length);
    const twin = legacyTwinNames(prefix, read);
    found.push({ layout: 'legacy', resource: read, keys: { ...twin, channel: twin.state, slot: calculateSlot(twin.state) } });
  }
  return found;
}

/** The longest lease left of a lock's holders, in ms; null when nobody holds it. */
export function longestLease(info: LockInfo): number | null {
  const leases = [...(info.writer ? [info.writer.ttlMs] : []), ...info.readers.map((r) => r.ttlMs)];
  return leases.length > 0 ? Math.max(...leases) : null;
}

export function prefixOf(value: string | undefined): string {
  try {
    return validatePrefix(value ?? CLIENT_DEFAULTS.prefix);
  } catch (error) {
    throw new UsageError(`--prefix: ${(error as Error).message}`);
  }
}

export function limitOf(value: string | undefined): number {
  if (value === undefined) return DEFAULT_LIMIT;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--limit: must be a whole number from 1, got "${value}"`);
  return n;
}

/**
 * The resource of a hash-mode key's part after the prefix: a tagless resource
 * was wrapped in braces (`{cache:user:42}`), a tagged one kept as it is. (`x`
 * and `{x}` name the same lock, so either is a correct answer.)
 */
export function resourceOf(part: string): string {
  if (part.startsWith('{') && part.endsWith('}')) {
    const inner = part.slice(1, -1);
    if (hashTagOf(inner) === undefined) return inner;
  }
  return part;
}

/** `lockKeys`, or undefined for a resource the library refuses (a key it did not make). */
function lockKeysOf(prefix: string, resource: string): LockKeys | undefined {
  try {
    return lockKeys(prefix, resource);
  } catch {
    return undefined;
  }
}
