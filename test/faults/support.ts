import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RedisClient } from '../../src/redis.js';
import { type CheckOptions, type CheckResult, checkHistory, type History, report } from '../support/history.js';

/** The final counter of each resource. */
export async function counters(redis: RedisClient, resources: readonly string[]): Promise<Map<string, number>> {
  const values = new Map<string, number>();
  for (const r of resources) values.set(r, Number((await redis.get(`data:{${r}}:counter`)) ?? 0));
  return values;
}

/** Checks a history, prints its row of the fault table (under `ctx.kind`, its topology), and returns the result. */
export function checkAndReport(
  fault: string,
  ctx: { readonly kind: string },
  history: History,
  options: CheckOptions & { recoveryMs?: number; notes?: string; quiet?: boolean },
): CheckResult {
  const result = checkHistory(history, options);
  // A run with violations keeps its whole history for whoever investigates (HISTORY_DUMP_DIR).
  const dumpDir = process.env.HISTORY_DUMP_DIR;
  if (dumpDir && (result.violations.length > 0 || process.env.HISTORY_DUMP_ALL)) {
    const file = join(dumpDir, `history-${Date.now()}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        fault,
        history: {
          ...history,
          deaths: [...history.deaths],
          shutdowns: [...history.shutdowns],
          pauses: [...history.pauses],
          done: [...history.done],
        },
        violations: result.violations,
      }),
    );
    console.log(`        history written to ${file}`);
  }
  const failures = Object.entries(result.failuresByName)
    .map(([name, n]) => `${name} ${n}`)
    .join(', ');
  report({
    fault,
    topology: ctx.kind,
    operations: result.operations,
    violations: result.violations.length,
    failoverWindow: result.failoverWindow.length,
    recoveryMs: options.recoveryMs,
    leasesLost: result.leasesLost,
    notes: [
      options.notes,
      failures && `failed acquires: ${failures}`,
      result.dataLoss.length > 0 && `data-loss findings ${result.dataLoss.length}`,
      result.expiredHolder.length > 0 && `overlaps with a holder stalled past its lease ${result.expiredHolder.length}`,
    ]
      .filter(Boolean)
      .join('; '),
  });
  const messages = new Map<string, number>();
  for (const f of history.failures) {
    const key = `${f.name}: ${f.message
      .replace(/"[^"]*"/g, '"…"')
      .replace(/\d+/g, 'N')
      .slice(0, 160)}`;
    messages.set(key, (messages.get(key) ?? 0) + 1);
  }
  for (const h of history.holds) {
    if (h.release === undefined || h.release === 'ok') continue;
    const key = `release of a ${h.mode} lease: ${h.release} ${(h.releaseMessage ?? '')
      .replace(/"[^"]*"/g, '"…"')
      .replace(/\d+/g, 'N')
      .slice(0, 200)}`;
    messages.set(key, (messages.get(key) ?? 0) + 1);
  }
  for (const [message, n] of messages) console.log(`        ${n} x ${message}`);
  for (const v of [...result.violations, ...result.failoverWindow].slice(0, options.quiet ? 0 : 10)) {
    console.log(`        ${v.kind}: ${v.resource ?? ''} ${v.detail}`);
    if (result.violations.includes(v)) {
      for (const id of new Set(v.detail.match(/\bp\d+:\d+\b/g) ?? []))
        console.log(`          ${JSON.stringify(history.holds.find((h) => h.id === id))}`);
    }
  }
  return result;
}
