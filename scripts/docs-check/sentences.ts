/**
 * The sentences of a Markdown page, as `npm run docs:check` counts them:
 * prose and table cells (a table cell is a sentence or several; a header
 * row is not), not code blocks, headings or link URLs. A code span counts
 * by its words (`new LockClient(redis, options?)` is three), since a
 * reader reads it. Run it as a script for the figures of each page:
 * `node --import tsx scripts/docs-check/sentences.ts [root]`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Sentence {
  /** The line of the paragraph, list item or table row it is in (1-based). */
  readonly line: number;
  readonly words: number;
  /** Semicolons between its clauses. */
  readonly semicolons: number;
  readonly text: string;
}

const wordsIn = (text: string): number => text.split(/\s+/).filter((w) => /[\p{L}\p{N}]/u.test(w)).length;

/**
 * The sentences of a span of prose, code spans counted by their own words.
 * A sentence that is a list of code (test names, file names: three words
 * in four inside code spans) is read as a list, each code span one word.
 */
function split(unit: string, line: number, out: Sentence[]): void {
  const spans: string[] = [];
  const text = unit
    .replace(/<!--.*?-->|<a\s[^>]*><\/a>/g, ' ')
    .replace(/\]\([^)]*\)/g, ']')
    .replace(/`([^`]*)`/g, (_, code: string) => `\u0001${spans.push(code.replace(/[^\s\p{L}\p{N}]+/gu, ' ')) - 1}\u0002`);
  // A sentence ends at . ! or ? before a space (not in e.g., i.e., vs.).
  for (const raw of text.split(/(?<!\b(?:e\.g|i\.e|vs|etc))[.!?](?=\s|$)/u)) {
    const prose = wordsIn(raw.replace(/\u0001\d+\u0002/g, ' '));
    const code = [...raw.matchAll(/\u0001(\d+)\u0002/g)].map((m) => spans[Number(m[1])]!);
    const list = wordsIn(code.join(' ')) > 3 * prose;
    const sentence = raw.replace(/\u0001(\d+)\u0002/g, (_, k: string) => (list ? 'code' : spans[Number(k)]!.trim() || 'code'));
    const words = wordsIn(sentence);
    if (words === 0) continue;
    out.push({ line, words, semicolons: (sentence.match(/;/g) ?? []).length, text: sentence.trim() });
  }
}

export function sentencesOf(markdown: string): Sentence[] {
  const out: Sentence[] = [];
  const lines = markdown.split('\n');
  let fenced = false;
  let unit: string[] = [];
  let start = 0;
  const flush = () => {
    if (unit.length > 0) split(unit.join(' '), start, out);
    unit = [];
  };
  for (const [k, raw] of lines.entries()) {
    if (/^\s*```/.test(raw)) {
      flush();
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    const line = raw.trim();
    if (line.startsWith('|')) {
      flush();
      const next = lines[k + 1]?.trim() ?? '';
      if (/^\|[\s:|-]+\|$/.test(line) || /^\|[\s:|-]+\|$/.test(next)) continue; // a separator, or the header row above one
      for (const cell of line.replace(/\\\|/g, '\u0000').split('|').slice(1, -1)) split(cell.replace(/\u0000/g, '|'), k + 1, out);
      continue;
    }
    // A blank line or a heading ends a paragraph; a list item starts one.
    if (line === '' || line.startsWith('#')) {
      flush();
      continue;
    }
    if (/^(?:[-*+]|\d+\.)\s/.test(line)) flush();
    if (unit.length === 0) start = k + 1;
    unit.push(line.replace(/^(?:[-*+]|\d+\.)\s+(?:\[[ x]\]\s+)?/, ''));
  }
  flush();
  return out;
}

/** Average and longest sentence of a page. */
export function figures(sentences: readonly Sentence[]): { count: number; average: number; longest: number } {
  const total = sentences.reduce((sum, s) => sum + s.words, 0);
  return {
    count: sentences.length,
    average: sentences.length === 0 ? 0 : total / sentences.length,
    longest: Math.max(0, ...sentences.map((s) => s.words)),
  };
}

if (process.argv[1]?.endsWith('sentences.ts')) {
  const root = process.argv[2] ?? join(import.meta.dirname, '..', '..');
  const pages = [
    'README.md',
    ...['docs', 'docs/guide'].flatMap((d) => {
      try {
        return readdirSync(join(root, d))
          .filter((f) => f.endsWith('.md'))
          .map((f) => `${d}/${f}`);
      } catch {
        return [];
      }
    }),
  ];
  for (const page of pages) {
    const sentences = sentencesOf(readFileSync(join(root, page), 'utf8'));
    const f = figures(sentences);
    const over40 = sentences.filter((s) => s.words > 40).length;
    const chains = sentences.filter((s) => s.semicolons >= 2).length;
    console.log(
      `${page.padEnd(34)} ${String(f.count).padStart(5)} sentences  average ${f.average.toFixed(1).padStart(5)}  longest ${String(f.longest).padStart(4)}  over 40: ${String(over40).padStart(3)}  semicolon chains: ${chains}`,
    );
  }
}
