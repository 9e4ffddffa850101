/**
 * The demo's live progress: on a terminal, a small block redrawn in place a
 * few times a second; otherwise a plain line every second.
 *
 * @module
 */
import type { WorkerStats } from './protocol.js';

/** Where progress goes, and how. */
export interface ProgressStream {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

/** Counters plus the clock, as shown at one moment. */
export interface ProgressSnapshot {
  readonly elapsedMs: number;
  readonly durationMs: number;
  readonly stats: WorkerStats;
}

const BAR_WIDTH = 24;

/** Draws progress on a terminal (redrawn block) or as plain periodic lines. */
export class ProgressView {
  /** True when the block is redrawn in place. */
  readonly live: boolean;
  readonly #out: ProgressStream;
  readonly #color: boolean;
  #drawnLines = 0;
  #lastLineAt = -Infinity;

  constructor(out: ProgressStream, options: { live?: boolean; color?: boolean } = {}) {
    this.#out = out;
    this.live = options.live ?? out.isTTY === true;
    this.#color = options.color ?? (this.live && process.env.NO_COLOR === undefined);
  }

  /** How often {@link ProgressView.update} should be called, in ms. */
  get intervalMs(): number {
    return this.live ? 200 : 1_000;
  }

  /** Shows the snapshot: redraws the block, or prints a line at most once a second. */
  update(snapshot: ProgressSnapshot): void {
    if (this.live) {
      this.#redraw(this.#block(snapshot));
    } else if (snapshot.elapsedMs - this.#lastLineAt >= 950) {
      this.#lastLineAt = snapshot.elapsedMs;
      this.#out.write(`${this.#line(snapshot)}\n`);
    }
  }

  /** Removes the live block, so that other output can follow (no-op for plain lines). */
  clear(): void {
    if (!this.live || this.#drawnLines === 0) return;
    this.#out.write(`\x1b[${this.#drawnLines}A\x1b[0J`);
    this.#drawnLines = 0;
  }

  /** Prints `text` above the live block (or as a line). */
  message(text: string): void {
    this.clear();
    this.#out.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  /** Green (or red) text when colours are on. */
  paint(text: string, colour: 'green' | 'red' | 'dim' | 'bold'): string {
    if (!this.#color) return text;
    const code = { green: 32, red: 31, dim: 2, bold: 1 }[colour];
    return `\x1b[${code}m${text}\x1b[0m`;
  }

  #redraw(lines: string[]): void {
    const up = this.#drawnLines > 0 ? `\x1b[${this.#drawnLines}A` : '';
    this.#out.write(up + lines.map((l) => `\x1b[2K${l}\n`).join(''));
    this.#drawnLines = lines.length;
  }

  #block({ elapsedMs, durationMs, stats: s }: ProgressSnapshot): string[] {
    const done = Math.min(1, elapsedMs / durationMs);
    const filled = Math.round(done * BAR_WIDTH);
    const bar = '█'.repeat(filled) + '░'.repeat(BAR_WIDTH - filled);
    const seconds = Math.max(elapsedMs, 1) / 1_000;
    const half = s.halfBuilt === 0 ? this.paint('0', 'green') : this.paint(count(s.halfBuilt), 'red');
    return [
      `  ${bar} ${secs(elapsedMs)} of ${secs(durationMs)}`,
      `  reads served ${count(s.reads)} (${count(s.reads / seconds)}/s)   rebuilds ${count(s.rebuilds)}   half-built reads ${half}`,
      `  waits: readers ${count(s.readerWaits)}, writers ${count(s.writerWaits)}   ` +
        `longest wait: reader ${ms(s.maxReaderWaitMs)}, writer ${ms(s.maxWriterWaitMs)}` +
        (s.errors > 0 ? `   ${this.paint(`errors ${count(s.errors)}`, 'red')}` : ''),
    ];
  }

  #line({ elapsedMs, stats: s }: ProgressSnapshot): string {
    return (
      `[${secs(elapsedMs).padStart(6)}] reads ${count(s.reads)}, rebuilds ${count(s.rebuilds)}, ` +
      `waits ${count(s.readerWaits)} reader / ${count(s.writerWaits)} writer, ` +
      `longest wait ${ms(s.maxReaderWaitMs)} reader / ${ms(s.maxWriterWaitMs)} writer, ` +
      `half-built reads ${count(s.halfBuilt)}` +
      (s.errors > 0 ? `, errors ${count(s.errors)}` : '')
    );
  }
}

/** `12,345` */
export function count(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** `38 ms` */
export function ms(n: number): string {
  return `${Math.round(n).toLocaleString('en-US')} ms`;
}

/** `4.2 s` */
export function secs(n: number): string {
  return `${(n / 1_000).toFixed(1)} s`;
}
