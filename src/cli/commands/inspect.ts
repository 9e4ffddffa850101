import type { LockInfo } from '../../backends/backend.js';
import { type CliCommand, EXIT } from '../command.js';
import { duration, evictionNote, fields, json, shortToken, table } from '../format.js';
import { checkLockOptions, LOCK_OPTIONS, LOCK_OPTIONS_HELP, lockClientFor, modeOf } from '../lock-options.js';

export const inspect: CliCommand = {
  name: 'inspect',
  summary: "one lock's state: mode, holders, leases, waiting writers, fence",
  usage: 'redis-rwlock inspect <resource> [--mode hash|legacy|bridge] [--prefix p] [--json]',
  help: `Reads one lock's whole state as LockClient.inspect() does (atomically, unless
it has more than about a hundred holders and waiters; then in several calls
of bounded server time): its
mode (free, read or write), the writer and the readers with their hold counts
and lease left, the writer new readers queue behind, the writers' queue, and
the last fence handed out. In legacy and bridge mode it also shows the two
legacy keys, and the old processes seen holding them. When the lock's master
may evict its keys (maxmemory set, maxmemory-policy not noeviction), it says
so.

Options:
${LOCK_OPTIONS_HELP}

Exit codes: 0 shown (also when the lock is free), 1 failed, 2 bad command line.`,
  options: LOCK_OPTIONS,
  positionals: { min: 1, max: 1, names: '<resource>' },
  async run(ctx) {
    const resource = ctx.positionals[0]!;
    checkLockOptions(ctx.values);
    const locks = lockClientFor((await ctx.redis()).client, ctx.values);
    try {
      const lock = locks.lock(resource);
      const info = await lock.inspect();
      const layout = modeOf(ctx.values);
      if (ctx.json) ctx.io.out(json({ layout, slot: lock.keys.slot, ...info }));
      else ctx.io.out(`${describeLock(info, layout, lock.keys.slot)}\n`);
      return EXIT.OK;
    } finally {
      await locks.close();
    }
  },
};

/** The human-readable view of one lock. */
export function describeLock(info: LockInfo, layout: string, slot: number): string {
  const parts = [
    fields([
      ['lock', info.resource],
      ['layout', `${layout} (key ${info.key}, slot ${slot})`],
      ['mode', info.mode],
      ['fence', info.fence === null ? '-' : String(info.fence)],
      [
        'waiting writer',
        info.waitingWriter ? `${shortToken(info.waitingWriter.owner)} (keeps waiting ${duration(info.waitingWriter.ttlMs)})` : '-',
      ],
      ...(info.evictionRisk ? [['eviction', evictionNote(info.evictionRisk)] as const] : []),
    ]),
  ];
  const holders = [
    ...(info.writer ? [['writer', shortToken(info.writer.owner), String(info.writer.holds), duration(info.writer.ttlMs)]] : []),
    ...info.readers.map((r) => ['reader', shortToken(r.owner), String(r.holds), duration(r.ttlMs)]),
  ];
  parts.push(holders.length > 0 ? table(['ROLE', 'OWNER', 'HOLDS', 'LEASE LEFT'], holders) : 'no holders');
  if (info.queue.length > 0) {
    parts.push(
      table(
        ['QUEUED WRITER', 'KEEPS WAITING'],
        info.queue.map((w) => [shortToken(w.owner), duration(w.ttlMs)]),
      ),
    );
  }
  if (info.legacy) {
    const l = info.legacy;
    parts.push(
      table(
        ['LEGACY KEY', 'VALUE', 'TTL', 'HELD BY'],
        [
          [
            l.read.key,
            l.read.value === null ? '-' : shortToken(l.read.value),
            duration(l.read.ttlMs),
            l.read.value === null
              ? '-'
              : l.oldReadersTtlMs > 0
                ? l.readers.length > 0
                  ? 'old processes and the library'
                  : 'old processes'
                : 'the library',
          ],
          [
            l.write.key,
            l.write.value === null ? '-' : shortToken(l.write.value),
            duration(l.write.ttlMs),
            l.write.value === null ? '-' : l.oldWriter ? 'an old process' : 'the library',
          ],
        ],
      ),
    );
    if (l.oldReadersTtlMs > 0) parts.push(`old readers are known to hold the read key for ${duration(l.oldReadersTtlMs)} more`);
  }
  return parts.join('\n\n');
}
