import { setTimeout as sleep } from 'node:timers/promises';
import type { LockInfo } from '../../backends/backend.js';
import { evictionChecked } from '../../backends/eviction.js';
import { hashLayout } from '../../backends/layouts.js';
import { ScriptedBackend } from '../../backends/scripted.js';
import { driverFor } from '../../clients/index.js';
import type { EvictionRisk } from '../../errors.js';
import { CLIENT_DEFAULTS } from '../../options.js';
import type { CliRedis } from '../cli-redis.js';
import { type CliCommand, EXIT, UsageError } from '../command.js';
import { duration, evictionNote, shortToken, table } from '../format.js';
import { type FoundLock, findLocks, limitOf, longestLease, prefixOf } from './list.js';

const DEFAULT_INTERVAL_MS = 1_000;
const DEFAULT_LIMIT = 1000;
/** Locks read at once in one refresh. */
const INSPECT_BATCH = 64;

/** One lock in a `top` refresh: its `LockInfo`, and what `top` ranks and shows. */
export interface TopLock extends LockInfo {
  /** `hash`: a hash-mode or bridge-mode lock; `legacy`: the state legacy-mode clients keep beside the legacy keys. */
  readonly layout: 'hash' | 'legacy';
  /** Writers waiting: the queue, and a reader waiting to upgrade. */
  readonly waitingWriters: number;
  /** Time since the lock's last grant, by the server's clock (its fence is the clock at the grant, in µs); null without a fence. */
  readonly ageMs: number | null;
  /** The longest lease left of its holders; null when nobody holds it. */
  readonly leaseLeftMs: number | null;
}

/** One refresh: every lock read, most contended first. */
export interface TopSnapshot {
  /** When it was taken (this machine's clock). */
  readonly time: string;
  readonly prefix: string;
  readonly locks: readonly TopLock[];
  /** Locks found but not read (over --limit). */
  readonly omitted: number;
  /** The masters that may evict lock keys (maxmemory set, maxmemory-policy not noeviction). */
  readonly evictionRisks: readonly EvictionRisk[];
}

export const top: CliCommand = {
  name: 'top',
  summary: 'live view of the locks under a prefix, most contended first',
  usage: 'redis-rwlock top [--prefix p] [--interval-ms n] [-n iterations] [--limit n] [--json]',
  help: `Shows the locks that have state under a prefix, on a server or on every
master of a Cluster, most contended first, and refreshes every --interval-ms,
like top: each lock's mode, holders, the writer new readers queue behind (an
upgrading reader, else the first queued writer), how many writers queue, the
age of its last grant (its fence is the server's clock at the grant), and the
longest lease left. Waiting readers do not show: they re-try and leave nothing
in Redis; waiting writers queue, and do. A master that may evict lock keys
(maxmemory set, maxmemory-policy not noeviction), as each refresh reads its
policy, is named under the summary.

On a terminal it redraws the screen, and quits on q or Ctrl-C. Otherwise (a
pipe, a file) it prints each refresh as a header line and a table, and quits
on SIGINT or SIGTERM. With --json it prints one JSON document per refresh,
one per line. -n stops it after that many refreshes.

Each refresh SCANs every master and reads each lock as inspect does (one
script call per lock, more for a lock of many holders): on a busy server with
many locks, keep the interval at a second or more.

Options:
  --prefix <p>          key prefix of the LockClients (default ${CLIENT_DEFAULTS.prefix})
  --interval-ms <n>     time between refreshes (default ${DEFAULT_INTERVAL_MS})
  -n, --iterations <n>  stop after n refreshes (default: run until quit)
  --limit <n>           read at most n locks per refresh (default ${DEFAULT_LIMIT}); the rest are counted

Exit codes: 0 quit or done, 1 failed, 2 bad command line.`,
  options: {
    prefix: { type: 'string' },
    'interval-ms': { type: 'string' },
    iterations: { type: 'string', short: 'n' },
    limit: { type: 'string' },
  },
  positionals: { min: 0, max: 0, names: '' },
  async run(ctx) {
    const prefix = prefixOf(ctx.values.prefix as string | undefined);
    const intervalMs = whole(ctx.values['interval-ms'] as string | undefined, 'interval-ms', DEFAULT_INTERVAL_MS, 10);
    const iterations = ctx.values.iterations === undefined ? Infinity : whole(ctx.values.iterations as string, 'iterations', 1, 1);
    const limit = limitOf(ctx.values.limit as string | undefined);
    const redis = await ctx.redis();
    const target = await ctx.target();
    const screen = ctx.json ? undefined : ctx.io.screen;
    const interrupts = ctx.io.interrupts?.();
    const signal = interrupts?.signal;
    if (screen) ctx.io.out(HIDE_CURSOR);
    try {
      for (let i = 0; i < iterations && !signal?.aborted; i++) {
        if (i > 0 && !(await pause(intervalMs, signal))) break;
        const looking = look(redis, prefix, limit);
        const snapshot = await untilAborted(looking, signal);
        if (snapshot === undefined) break;
        if (ctx.json) ctx.io.out(`${JSON.stringify(snapshot)}\n`);
        else if (screen) ctx.io.out(CLEAR + frame(snapshot, header(target, prefix, intervalMs, true), ctx.io.screen ?? screen));
        else ctx.io.out(`${frame(snapshot, header(target, prefix, intervalMs, false))}\n`);
      }
    } finally {
      if (screen) ctx.io.out(SHOW_CURSOR);
      interrupts?.dispose();
    }
    return EXIT.OK;
  },
};

const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';
/** Cursor home, then clear to the end of the screen. */
const CLEAR = '\x1b[H\x1b[J';

/** Every lock under `prefix`, read, most contended first. */
export async function look(redis: CliRedis, prefix: string, limit: number): Promise<TopSnapshot> {
  const driver = driverFor(redis.client)!;
  const backend = new ScriptedBackend(driver, hashLayout(prefix));
  const found = await findLocks(redis, prefix);
  const read: TopLock[] = [];
  const chosen = found.slice(0, limit);
  for (let i = 0; i < chosen.length; i += INSPECT_BATCH) {
    const batch = chosen.slice(i, i + INSPECT_BATCH);
    const infos = batch.map((f) => redis.bounded(backend.inspect(f.resource, f.keys), `inspect "${f.resource}"`));
    read.push(...(await Promise.all(infos)).map((info, j) => topLock(batch[j]!, info)));
  }
  const evictionRisks = await evictionChecked(driver, true); // as the masters say now: a policy changes without a reconnect
  return { time: new Date().toISOString(), prefix, locks: read.sort(byContention), omitted: found.length - chosen.length, evictionRisks };
}

function topLock(found: FoundLock, info: LockInfo): TopLock {
  const waiting = info.waitingWriter;
  const waitingWriters = info.queue.length + (waiting && !info.queue.some((q) => q.owner === waiting.owner) ? 1 : 0);
  const ageMs = info.fence === null ? null : Math.max(0, info.serverTimeMs - Math.floor(info.fence / 1000));
  return { layout: found.layout, ...info, resource: found.resource, waitingWriters, ageMs, leaseLeftMs: longestLease(info) };
}

/** Most waiting writers first; then the longest since its last grant; then by name. */
function byContention(a: TopLock, b: TopLock): number {
  return (
    b.waitingWriters - a.waitingWriters ||
    (b.ageMs ?? -1) - (a.ageMs ?? -1) ||
    (a.resource < b.resource ? -1 : a.resource > b.resource ? 1 : 0)
  );
}

function header(target: string, prefix: string, intervalMs: number, live: boolean): string {
  // The target last: a long Cluster node list is what a narrow terminal cuts.
  return `redis-rwlock top${live ? ' (q or Ctrl-C quits)' : ''}  every ${duration(intervalMs)}  prefix "${prefix}"  ${target}`;
}

/** A refresh as text: the header, a summary line, and the table (cut to the screen, when given). */
export function frame(snapshot: TopSnapshot, title: string, screen?: { columns: number; rows: number }): string {
  const { locks, omitted } = snapshot;
  const count = (mode: string) => locks.filter((l) => l.mode === mode).length;
  const contended = locks.filter((l) => l.waitingWriters > 0);
  const writers = contended.reduce((n, l) => n + l.waitingWriters, 0);
  const summary =
    `${snapshot.time}  ${locks.length} lock(s): ${count('write')} write, ${count('read')} read, ${count('free')} free; ` +
    `${contended.length} with writers waiting (${writers} writer(s))${omitted > 0 ? `; ${omitted} more not read (raise --limit)` : ''}`;
  const lines = [title, summary, ...snapshot.evictionRisks.map(evictionNote), ''];
  if (locks.length === 0) {
    lines.push(`no locks with state under prefix "${snapshot.prefix}"`);
  } else {
    const room = screen ? Math.max(1, screen.rows - lines.length - 2) : Infinity;
    const shown = locks.slice(0, room);
    const rows = shown.map((l) => [
      l.layout === 'legacy' ? `${l.resource} (legacy read key)` : l.resource,
      l.mode,
      holders(l),
      waitingWriter(l),
      String(l.waitingWriters),
      duration(l.ageMs),
      duration(l.leaseLeftMs),
    ]);
    lines.push(...table(['RESOURCE', 'MODE', 'HOLDERS', 'WAITING WRITER', 'WRITERS WAITING', 'AGE', 'LEASE LEFT'], rows).split('\n'));
    if (shown.length < locks.length) lines.push(`... and ${locks.length - shown.length} more`);
  }
  const text = screen ? lines.map((line) => line.slice(0, screen.columns)) : lines;
  return `${text.join('\n')}\n`;
}

function holders(l: TopLock): string {
  if (l.writer) return `writer${l.writer.holds > 1 ? ` x${l.writer.holds}` : ''}`;
  if (l.readers.length > 0) return `${l.readers.length} reader(s)`;
  return '-';
}

function waitingWriter(l: TopLock): string {
  const w = l.waitingWriter;
  if (!w) return '-';
  const owner = shortToken(w.owner);
  return l.readers.some((r) => r.owner === w.owner) ? `${owner} (upgrade)` : owner;
}

/** Waits `ms`; false when `signal` aborted first. */
async function pause(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  try {
    await sleep(ms, undefined, signal ? { signal } : undefined);
    return true;
  } catch {
    return false;
  }
}

/** `promise`'s value, or undefined as soon as `signal` aborts (the promise's later failure is ignored then). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T | undefined> {
  if (!signal) return promise;
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.resolve(undefined);
  }
  return new Promise<T | undefined>((resolve, reject) => {
    const onAbort = () => {
      promise.catch(() => undefined);
      resolve(undefined);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function whole(value: string | undefined, name: string, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`--${name}: must be a whole number from ${min}, got "${value}"`);
  return n;
}
