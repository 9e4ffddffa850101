/** Percentiles, medians and small timing helpers. */

/** The p-th percentile (0-100, nearest rank) of `values`, or null when there are none. */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function max(values: readonly number[]): number | null {
  let m: number | null = null;
  for (const v of values) if (m === null || v > m) m = v;
  return m;
}

/** Median of the non-null values, or null when there are none. */
export function median(values: readonly (number | null | undefined)[]): number | null {
  const v = values.filter((x): x is number => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 === 1 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

/** a / b, or null when either is missing or b is 0. */
export function ratio(a: number | null | undefined, b: number | null | undefined): number | null {
  if (typeof a !== 'number' || typeof b !== 'number' || b === 0 || !Number.isFinite(a) || !Number.isFinite(b)) return null;
  return a / b;
}

/**
 * Merges the per-run records of one measurement: every numeric field becomes
 * the median of the runs, and so does each count of a record of counts (a
 * name missing from a run counts 0); other fields are taken from the first run.
 */
export function medianRecord<T extends object>(runs: readonly T[]): T {
  if (runs.length === 0) throw new Error('medianRecord: no runs');
  const out: Record<string, unknown> = { ...(runs[0] as Record<string, unknown>) };
  for (const key of Object.keys(out)) {
    const values = runs.map((r) => (r as Record<string, unknown>)[key]);
    if (values.some((v) => typeof v === 'number')) out[key] = median(values as (number | null)[]);
    else if (values.every(isCounts)) {
      // A record of counts (e.g. commands by name): the median of each, a name missing from a run counting 0.
      const names = [...new Set(values.flatMap((v) => Object.keys(v)))].sort();
      out[key] = Object.fromEntries(names.map((name) => [name, median(values.map((v) => v[name] ?? 0))]));
    }
  }
  return out as T;
}

function isCounts(v: unknown): v is Record<string, number> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((n) => typeof n === 'number');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** How long before its end `holdFor` stops turning the event loop and spins, in ms. */
const HOLD_SPIN_MS = 0.05;

/**
 * Returns `ms` after it was called, turning the event loop meanwhile (replies and
 * messages are handled as they come), then spinning for its last 50 µs so that
 * a busy loop turn cannot carry it past its end. Unlike `sleep`, it takes the
 * same time in every process: a 1 ms timer fires after 0.9 ms in a process that
 * never waits for I/O (a busy poller) and after 1.2-1.3 ms in one that does, so
 * holds timed by it would compare the timers of two processes, not their handoffs.
 */
export async function holdFor(ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (performance.now() < end - HOLD_SPIN_MS) await new Promise<void>((resolve) => setImmediate(resolve));
  while (performance.now() < end) {
    // the last few µs: a loop turn could take longer
  }
}

/** Rounds for display and JSON: 3 significant decimals at most. */
export function round(n: number | null | undefined, digits = 3): number | null {
  if (typeof n !== 'number' || !Number.isFinite(n)) return null;
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}
