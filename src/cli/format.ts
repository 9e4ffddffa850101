/** Plain-text tables and durations for the CLI's human-readable output. */
import { type EvictionRisk, memoryOf } from '../errors.js';

/** Pads columns to their widest cell; `header` first, then a rule-free body. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** `1.2s`, `350ms`, `2m05s`, `3h10m`; `-` for null. */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '-';
  if (ms >= Number.MAX_SAFE_INTEGER / 2) return 'until deleted';
  if (ms < 1_000) return `${Math.max(0, Math.round(ms))}ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)}s`;
  const s = Math.round(ms / 1_000);
  if (s < 3_600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3_600)}h${String(Math.floor((s % 3_600) / 60)).padStart(2, '0')}m`;
}

/**
 * An owner token as human-readable output shows it: its first 11 characters
 * and `…` when longer than 12. A token is what releases a hold, so a
 * terminal, a log or a screen share shows only enough to tell holders apart;
 * `--json` gives it whole, for scripts.
 */
export function shortToken(token: string): string {
  return token.length > 12 ? `${token.slice(0, 11)}…` : token;
}

/** Key-value lines, keys padded to one width. */
export function fields(pairs: readonly (readonly [string, string])[]): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}

/** Stable JSON for `--json`: two-space indent, one document, newline-terminated. */
export function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/** A master that may evict lock keys, in one line (docs/production.md, "Eviction", says what that risks). */
export function evictionNote(risk: EvictionRisk): string {
  return (
    `${risk.node} may evict lock keys: maxmemory ${memoryOf(risk.maxmemoryBytes)}, maxmemory-policy ${risk.policy} ` +
    '(an evicted lock can be taken twice; set noeviction: docs/production.md, "Eviction")'
  );
}
