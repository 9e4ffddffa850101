import { setTimeout as sleep } from 'node:timers/promises';
import { OLD_READERS_MEMBER } from '../../backends/layouts.js';
import { validatePrefix } from '../../keys/keys.js';
import { readersKeyName } from '../../keys/legacy.js';
import { CLIENT_DEFAULTS } from '../../options.js';
import type { CliRedis } from '../cli-redis.js';
import { type CliCommand, EXIT, UsageError } from '../command.js';
import { duration, json, shortToken, table } from '../format.js';
import { DEFAULT_LEGACY_READ, DEFAULT_LEGACY_WRITE, template, templateGlob } from '../lock-options.js';
import { globEscape, scanKeys } from '../scan.js';

const DEFAULT_WATCH_MS = 10_000;
const MAX_ROUND_INTERVAL_MS = 1_000;

/** Who wrote a legacy key, going by its value: old scripts store `1`, the library an owner token. */
export type Writer = 'old' | 'library';

/** What happened to one legacy key during the watch. */
export interface KeyReport {
  readonly key: string;
  /** Created (appeared), refreshed (re-set or expiry moved), deleted (released, or gone before its TTL), by whom. */
  readonly events: Record<'created' | 'refreshed' | 'deleted', Record<Writer, number>>;
  /** Old readers that re-set the read key and were noticed by a library process (its readers registry). */
  readonly oldReadersNoticed: number;
  /** The value at the last look (`1`: an old process; a token: the library), or null if gone. */
  readonly value: string | null;
  /** Time to live at the last look, in ms; null if gone or without expiry. */
  readonly ttlMs: number | null;
  /** An old process wrote it, or holds it now. */
  readonly old: boolean;
}

export interface MigrateReport {
  readonly patterns: readonly string[];
  readonly watchedMs: number;
  readonly rounds: number;
  /** Distinct legacy keys seen at any look. */
  readonly keysSeen: number;
  /** Keys that were written during the watch, or that an old process holds now. */
  readonly keys: readonly KeyReport[];
  /** Writes by old processes seen (creations, refreshes, deletions, noticed old readers). */
  readonly oldWrites: number;
  /** Writes by library processes (legacy or bridge mode) seen. */
  readonly libraryWrites: number;
  /** Keys that hold `1` at the last look: old processes hold these locks now. */
  readonly oldHolding: number;
  /** `old-processes-active`: keep bridge mode. `no-old-processes-seen`: switching to hash is safe as far as this watch can tell. */
  readonly verdict: 'old-processes-active' | 'no-old-processes-seen';
}

/** How a watch is going, after each look. */
export interface WatchProgress {
  readonly elapsedMs: number;
  readonly rounds: number;
  readonly keysSeen: number;
  /** Writes seen between looks so far, by writer: created, refreshed and deleted keys, as the report counts them. */
  readonly oldWrites: number;
  readonly libraryWrites: number;
}

interface Look {
  value: string | null;
  /** Absolute expiry in ms (PEXPIRETIME): -1 without expiry, -2 gone. */
  expireAt: number;
}

export const migrateCheck: CliCommand = {
  name: 'migrate-check',
  summary: 'report legacy keys still being written, and by whom (old processes or the library)',
  usage: 'redis-rwlock migrate-check [--legacy-pattern glob ...] [--watch-ms n] [--interval-ms n] [--json]',
  help: `Watches the legacy keys of the two-key scheme for a while and reports which
are still being written, and by whom: old processes store "1", the library (in
legacy or bridge mode) an owner token. A key counts as written when it appears,
when its expiry moves (SET ... EX again, or a renewal), or when it is deleted
before its TTL ran out; an old reader that a library process noticed in its
readers registry counts too. Each look SCANs every master for the patterns and
reads each key's value and expiry (PEXPIRETIME), every --interval-ms.

Use it during the migration to know when the last old process is gone: run it
while every library process is in bridge mode; when it reports no old process
(exit 0) over a window longer than your slowest job's period, switching to hash
mode is safe. A short window can miss an old process that locks rarely.

Options:
  --legacy-pattern <g>  SCAN glob of legacy keys; repeat for several (default: the
                        --legacy-read and --legacy-write templates with * for %s)
  --legacy-read <t>     the read key template, %s standing for the resource (default ${DEFAULT_LEGACY_READ})
  --legacy-write <t>    the write key template (default ${DEFAULT_LEGACY_WRITE})
  --watch-ms <n>        how long to watch (default ${DEFAULT_WATCH_MS})
  --interval-ms <n>     time between looks (default watch/10, at most ${MAX_ROUND_INTERVAL_MS})
  --prefix <p>          key prefix of the LockClients, for their readers registries (default ${CLIENT_DEFAULTS.prefix})

Exit codes: 0 no old process seen, 4 old processes still write (or hold) legacy
keys, 1 failed, 2 bad command line.`,
  options: {
    'legacy-pattern': { type: 'string', multiple: true },
    'legacy-read': { type: 'string' },
    'legacy-write': { type: 'string' },
    'watch-ms': { type: 'string' },
    'interval-ms': { type: 'string' },
    prefix: { type: 'string' },
  },
  positionals: { min: 0, max: 0, names: '' },
  async run(ctx) {
    const watchMs = wholeMs(ctx.values['watch-ms'] as string | undefined, 'watch-ms', DEFAULT_WATCH_MS, 0);
    const intervalMs = wholeMs(
      ctx.values['interval-ms'] as string | undefined,
      'interval-ms',
      Math.min(MAX_ROUND_INTERVAL_MS, Math.max(10, Math.floor(watchMs / 10))),
      1,
    );
    let prefix: string;
    try {
      prefix = validatePrefix((ctx.values.prefix as string | undefined) ?? CLIENT_DEFAULTS.prefix);
    } catch (error) {
      throw new UsageError(`--prefix: ${(error as Error).message}`);
    }
    const given = ctx.values['legacy-pattern'] as string[] | undefined;
    const patterns =
      given && given.length > 0
        ? given
        : [templateGlob(template(ctx.values, 'legacy-read')), templateGlob(template(ctx.values, 'legacy-write'))];
    // Progress on stderr (stdout keeps the report alone), at most once a second: a long watch is not silent.
    let shownAt = Number.NEGATIVE_INFINITY;
    const progress = (p: WatchProgress) => {
      if (p.elapsedMs - shownAt < 1_000) return;
      shownAt = p.elapsedMs;
      ctx.io.err(
        `[${(p.elapsedMs / 1000).toFixed(1).padStart(5)} s of ${(watchMs / 1000).toFixed(1)} s] look ${p.rounds}: ${p.keysSeen} legacy key(s) seen; ` +
          `writes so far: ${p.oldWrites} by old processes, ${p.libraryWrites} by the library\n`,
      );
    };
    const report = await watch(await ctx.redis(), patterns, prefix, watchMs, intervalMs, progress);
    if (ctx.json) ctx.io.out(json(report));
    else ctx.io.out(describeReport(report));
    return report.verdict === 'old-processes-active' ? EXIT.LEGACY_ACTIVE : EXIT.OK;
  },
};

function wholeMs(value: string | undefined, name: string, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > 24 * 3_600_000)
    throw new UsageError(`--${name}: must be a whole number of ms from ${min}, got "${value}"`);
  return n;
}

const writerOf = (value: string | null): Writer => (value === '1' ? 'old' : 'library');

/**
 * What happened to a key between two looks, the second at server time
 * `at`, and by whom; undefined when nothing did (or it merely expired).
 */
function changeBetween(before: Look, after: Look, at: number): { event: keyof KeyReport['events']; writer: Writer } | undefined {
  if (before.value === null && after.value !== null) return { event: 'created', writer: writerOf(after.value) };
  if (before.value !== null && after.value === null) {
    // Gone before its TTL ran out: released (an expiry is no write).
    return before.expireAt < 0 || before.expireAt > at ? { event: 'deleted', writer: writerOf(before.value) } : undefined;
  }
  if (after.value !== null && (after.value !== before.value || after.expireAt !== before.expireAt)) {
    return { event: 'refreshed', writer: writerOf(after.value) };
  }
  return undefined;
}

/** Looks at the legacy keys every `intervalMs` for `watchMs` and reports what changed. */
export async function watch(
  redis: CliRedis,
  patterns: readonly string[],
  prefix: string,
  watchMs: number,
  intervalMs: number,
  onProgress?: (progress: WatchProgress) => void,
): Promise<MigrateReport> {
  const registryPrefix = readersKeyName(prefix, '');
  const started = performance.now();
  const history = new Map<string, Look[]>();
  const oldReaders = new Map<string, number[]>(); // read key -> old readers' deadline at each look (0: none)
  const times: number[] = []; // server time of each look
  let rounds = 0;
  const seenWrites: Record<Writer, number> = { old: 0, library: 0 };
  for (;;) {
    const now = await serverTimeMs(redis);
    times.push(now);
    const keys = [...new Set((await Promise.all(patterns.map((p) => scanKeys(redis, p, 'string')))).flat())];
    const known = new Set([...history.keys(), ...keys]);
    const looks = await inBatches([...known], async (key) => {
      const [value, expireAt] = (await Promise.all([redis.command(['GET', key]), redis.command(['PEXPIRETIME', key])])) as [
        string | null,
        number,
      ];
      return [key, { value, expireAt: value === null ? -2 : expireAt }] as const;
    });
    for (const [key, look] of looks) {
      const list = history.get(key) ?? Array.from({ length: rounds }, () => ({ value: null, expireAt: -2 }));
      const before = list[list.length - 1];
      const change = before && changeBetween(before, look, now);
      if (change) seenWrites[change.writer]++;
      list.push(look);
      history.set(key, list);
    }
    const registries = await scanKeys(redis, `${globEscape(registryPrefix)}*`, 'zset');
    const scores = await inBatches(
      registries,
      async (key) => [key.slice(registryPrefix.length), Number((await redis.command(['ZSCORE', key, OLD_READERS_MEMBER])) ?? 0)] as const,
    );
    for (const [readKey, score] of scores) {
      const list = oldReaders.get(readKey) ?? Array.from({ length: rounds }, () => 0);
      list.push(score > now ? score : 0);
      oldReaders.set(readKey, list);
    }
    for (const list of oldReaders.values()) if (list.length === rounds) list.push(0);
    rounds++;
    const elapsed = performance.now() - started;
    onProgress?.({ elapsedMs: elapsed, rounds, keysSeen: history.size, oldWrites: seenWrites.old, libraryWrites: seenWrites.library });
    if (rounds >= 2 && elapsed >= watchMs) break;
    await sleep(Math.max(0, Math.min(intervalMs, watchMs - elapsed)));
  }
  const now = await serverTimeMs(redis);

  const reports: KeyReport[] = [];
  let oldWrites = 0;
  let libraryWrites = 0;
  let oldHolding = 0;
  for (const [key, looks] of [...history].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const events = { created: { old: 0, library: 0 }, refreshed: { old: 0, library: 0 }, deleted: { old: 0, library: 0 } };
    for (let i = 1; i < looks.length; i++) {
      const change = changeBetween(looks[i - 1]!, looks[i]!, times[i]!);
      if (change) events[change.event][change.writer]++;
    }
    const noticed = (oldReaders.get(key) ?? []).reduce((n, score, i, all) => n + (i > 0 && score > all[i - 1]! ? 1 : 0), 0);
    const last = looks[looks.length - 1]!;
    const oldCount = events.created.old + events.refreshed.old + events.deleted.old + noticed;
    const libraryCount = events.created.library + events.refreshed.library + events.deleted.library;
    const holdsOld = last.value === '1';
    if (oldCount + libraryCount === 0 && !holdsOld) continue;
    oldWrites += oldCount;
    libraryWrites += libraryCount;
    if (holdsOld) oldHolding++;
    reports.push({
      key,
      events,
      oldReadersNoticed: noticed,
      value: last.value,
      ttlMs: last.expireAt >= 0 ? Math.max(0, last.expireAt - now) : null,
      old: oldCount > 0 || holdsOld,
    });
  }
  return {
    patterns,
    watchedMs: Math.round(performance.now() - started),
    rounds,
    keysSeen: history.size,
    keys: reports,
    oldWrites,
    libraryWrites,
    oldHolding,
    verdict: oldWrites > 0 || oldHolding > 0 ? 'old-processes-active' : 'no-old-processes-seen',
  };
}

async function serverTimeMs(redis: CliRedis): Promise<number> {
  const [s, us] = (await redis.command(['TIME'])) as [string, string];
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** Runs `fn` over `items`, at most 100 at a time. */
async function inBatches<T, R>(items: readonly T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += 100) out.push(...(await Promise.all(items.slice(i, i + 100).map(fn))));
  return out;
}

function describeReport(r: MigrateReport): string {
  const count = (e: Record<Writer, number>) =>
    e.old + e.library === 0 ? '' : [e.old ? `${e.old} old` : '', e.library ? `${e.library} lib` : ''].filter(Boolean).join('+');
  const rows = r.keys.map((k) => [
    k.key,
    k.old ? (k.events.created.library + k.events.refreshed.library + k.events.deleted.library > 0 ? 'old+library' : 'old') : 'library',
    count(k.events.created) || '-',
    count(k.events.refreshed) || '-',
    count(k.events.deleted) || '-',
    k.oldReadersNoticed ? String(k.oldReadersNoticed) : '-',
    k.value === null ? '-' : k.value === '1' ? '1 (old)' : shortToken(k.value),
    duration(k.ttlMs),
  ]);
  const byOld = r.keys.filter((k) => k.old).length;
  const head = `watched ${r.patterns.join(', ')} for ${duration(r.watchedMs)} (${r.rounds} looks): ${r.keysSeen} legacy key(s) seen, ${r.keys.length} written or held, ${byOld} of them by old processes\n`;
  const body = rows.length > 0 ? `${table(['KEY', 'WHO', 'CREATED', 'REFRESHED', 'DELETED', 'OLD READERS', 'VALUE', 'TTL'], rows)}\n` : '';
  const verdict =
    r.verdict === 'old-processes-active'
      ? `OLD PROCESSES ARE STILL ACTIVE: ${r.oldWrites} write(s) by old processes seen, ${r.oldHolding} key(s) held by them now. Keep every library process in bridge mode.\n`
      : `no old process seen (${r.libraryWrites} write(s) by library processes). If this window covers your slowest job's period, switching from bridge to hash mode is safe.\n`;
  return head + body + verdict;
}
