/**
 * Keeps the docs and the code together (`npm run docs:check`, run by CI):
 *
 * 1. Every ```ts block of README.md and docs/*.md type-checks against the
 *    source, as a module of its own; a doc that says
 *    `<!-- docs-check: one program -->` is checked as one module made of all
 *    its blocks, in order (a guide whose blocks build on each other). Names
 *    a block uses without making them (`redis`, `locks`, a `lease`, the
 *    guide's own helpers) are declared in scripts/docs-check/globals.d.ts
 *    (outside the project's own type-check, whose files must not see them),
 *    so a block shows only what the reader needs.
 * 2. Every usage block of the CLI in the docs (a ```text or unlabelled
 *    block that starts with `Usage: redis-rwlock <command>`) says what
 *    `--help` prints, line by line, for the lines it shows.
 * 3. Every relative link of README.md, docs/*.md, CHANGELOG.md and
 *    bench/README.md names a file or directory of the repository, and its
 *    #anchor, in a Markdown file, a heading there (GitHub's rule for
 *    heading ids).
 * 4. Every number the docs quote of a constant of the code (defaults,
 *    batch sizes, bounds: `NUMBERS` below) is the code's: each phrase must
 *    be found at least once, and every time with the code's value.
 * 5. No sentence of README.md and docs/ runs over 60 words, as
 *    scripts/docs-check/sentences.ts counts them: prose and table cells, a
 *    code span by its words. README.md and the task pages (docs/guide/)
 *    average at most 25 words a sentence, none over 40, and chain no
 *    semicolons. The README has at most 300 lines.
 * 6. Every figure the docs quote of the bench's measurements (`BENCH`
 *    below) is the one in bench/results/latest.md, rounded as the doc
 *    rounds it, so a new full run that moves a figure fails the check
 *    until the docs say the new one. A "longest ... call" the docs quote
 *    is a row of the bench too.
 * 7. The table of which integration suites run on which client library
 *    (after `<!-- docs-check: suites -->`) is the one the test files
 *    declare (`forEachTopology`'s `clients`, `selectedClients(...)`), and
 *    no doc counts those suites in words ("all but seven"). A count of
 *    suites or client libraries in prose ("the 24 ioredis-only suites")
 *    must be one the test files give.
 * 8. The constants the source's comments quote (`COMMENTS` below: those the
 *    API reference is built from) are the code's.
 * 9. docs/reference.md names every export of `redis-rwlock` (read with the
 *    TypeScript compiler API from src/index.ts). Its tables marked
 *    `<!-- docs-check: fields T -->` list exactly the public members of T,
 *    `<!-- docs-check: options T -->` exactly the options of T with the
 *    defaults and limits of src/options.ts and src/lock.ts, and
 *    `<!-- docs-check: errors -->` every error class with its `code`.
 * 10. No shipped file (package.json and its "files", README.md, src/ with its
 *    comments) names an internal issue number or a "round N" of past work;
 *    an upstream project's issue may be cited by a link that names the
 *    project (the rule: scripts/docs-check/history.ts).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { EXTEND_BUDGET_US, EXTEND_MAX_LEASES } from '../src/backends/extend-groups.js';
import { MIN_REDLOCK_NODES } from '../src/backends/redlock-nodes.js';
import { INSPECT_BUDGET_US } from '../src/backends/scripted.js';
import { MIGRATION_RETRY_MS } from '../src/backends/scripts.js';
import { MAX_PREFIX_BYTES, MAX_RESOURCE_BYTES } from '../src/keys/keys.js';
import { ACQUIRE_SLACK_MS } from '../src/lock.js';
import {
  CLIENT_DEFAULTS,
  CLIENT_MODES,
  EVICTION_RISK_ACTIONS,
  MAX_DURATION_MS,
  MAX_OWNER_LENGTH,
  MIN_LEASE_MS,
  MIN_LINK_CHECK_MS,
} from '../src/options.js';
import { RELEASE_CALLS_IN_FLIGHT } from '../src/paced.js';
import { ALL_CLIENTS, NODE_REDIS_IN_CI, NODE_REDIS_IN_CI_AND_GLIDE, ONE_NODE_REDIS } from '../test/setup/topologies.js';
import { historyProblems, shippedFiles } from './docs-check/history.js';
import { figures, sentencesOf } from './docs-check/sentences.js';

const root = join(fileURLToPath(import.meta.url), '..', '..');
const docs = [
  'README.md',
  ...['docs', join('docs', 'guide')].flatMap((folder) =>
    readdirSync(join(root, folder))
      .filter((f) => f.endsWith('.md'))
      .map((f) => join(folder, f)),
  ),
];

interface Block {
  readonly file: string;
  readonly line: number;
  readonly lang: string;
  readonly text: string;
}

function blocks(file: string): Block[] {
  const out: Block[] = [];
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    while (++i < lines.length && !/^```\s*$/.test(lines[i]!)) body.push(lines[i]!);
    out.push({ file, line: start + 1, lang: open[1]!, text: body.join('\n') });
  }
  return out;
}

const all = docs.flatMap(blocks);
const problems: string[] = [];

// 1. TypeScript blocks.
const dir = mkdtempSync(join(tmpdir(), 'rwlock-docs-check-'));
try {
  const ts = all.filter((b) => b.lang === 'ts');
  // Each module: its blocks, and for each line of the module the block and line it came from.
  const modules: { text: string[]; origin: { block: Block; line: number }[] }[] = [];
  const programs = new Map<string, (typeof modules)[number]>();
  for (const b of ts) {
    const whole = readFileSync(join(root, b.file), 'utf8').includes('<!-- docs-check: one program -->');
    let module = whole ? programs.get(b.file) : undefined;
    if (!module) {
      module = { text: [], origin: [] };
      modules.push(module);
      if (whole) programs.set(b.file, module);
    }
    for (const [k, line] of b.text.split('\n').entries()) {
      module.text.push(line);
      module.origin.push({ block: b, line: b.line + 1 + k });
    }
  }
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir'); // the blocks import ioredis
  const names = modules.map((m, i) => {
    const name = join(dir, `block-${i}.ts`);
    writeFileSync(name, `${m.text.join('\n')}\nexport {};\n`);
    return name;
  });
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'es2022',
        lib: ['es2023', 'es2024.string', 'esnext.disposable'],
        module: 'nodenext',
        moduleResolution: 'nodenext',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(root, 'node_modules', '@types')],
        baseUrl: root,
        paths: {
          'redis-rwlock': ['src/index.ts'],
          'redis-rwlock/testing': ['src/testing/index.ts'],
          'redis-rwlock/opentelemetry': ['src/opentelemetry/index.ts'],
        },
      },
      files: [join(root, 'scripts', 'docs-check', 'globals.d.ts'), ...names],
    }),
  );
  try {
    execFileSync(join(root, 'node_modules', '.bin', 'tsc'), ['-p', join(dir, 'tsconfig.json')], {
      cwd: root,
      encoding: 'utf8',
      stdio: 'pipe',
    });
  } catch (error) {
    const output = String((error as { stdout?: string }).stdout ?? error);
    for (const line of output.split('\n').filter((l) => /error TS/.test(l))) {
      const match = /block-(\d+)\.ts\((\d+),(\d+)\): (.*)$/.exec(line);
      if (!match) {
        problems.push(line.replace(`${root}/`, ''));
        continue;
      }
      const at = modules[Number(match[1])]!.origin[Number(match[2]) - 1];
      problems.push(at ? `${at.block.file}:${at.line}: ${match[4]}` : line);
    }
  }
  console.log(`docs-check: ${ts.length} TypeScript blocks type-checked, in ${modules.length} modules`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// 2. CLI usage blocks against --help.
const usages = all.filter((b) => (b.lang === 'text' || b.lang === '') && /^Usage: redis-rwlock \w/.test(b.text));
for (const b of usages) {
  const command = /^Usage: redis-rwlock ([\w-]+)/.exec(b.text)![1]!;
  const cli = command === 'demo' ? ['src/demo/main.ts', '--help'] : ['src/cli/index.ts', command, '--help'];
  const help = execFileSync(process.execPath, ['--import', 'tsx', ...cli], { cwd: root, encoding: 'utf8' })
    .split('\n')
    .map((l) => l.trimEnd());
  for (const [k, line] of b.text.split('\n').entries()) {
    if (line.trim() !== '' && !help.includes(line.trimEnd())) {
      problems.push(`${b.file}:${b.line + 1 + k}: not in \`redis-rwlock ${command} --help\`: ${line.trim()}`);
    }
  }
}
console.log(`docs-check: ${usages.length} CLI usage blocks compared with --help`);

// 3. Relative links and their anchors.
/** The text of a Markdown file with its fenced blocks blanked (line numbers kept). */
function prose(file: string): string {
  let fenced = false;
  return readFileSync(join(root, file), 'utf8')
    .split('\n')
    .map((line) => {
      if (/^```/.test(line)) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line;
    })
    .join('\n');
}

/** The ids GitHub gives the headings of a Markdown file (and explicit `<a id>`/`<a name>` anchors). */
function anchorsOf(file: string): Set<string> {
  const ids = new Set<string>();
  const seen = new Map<string, number>();
  const text = prose(file);
  for (const [, heading] of text.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = heading!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    ids.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const [, id] of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) ids.add(id!);
  return ids;
}

let links = 0;
// The shipped pages outside docs/ link into it too: their links are checked, not their prose.
for (const file of [...docs, 'CHANGELOG.md', join('bench', 'README.md')]) {
  for (const [k, line] of prose(file).split('\n').entries()) {
    for (const [, target] of line.replace(/`[^`]*`/g, (code) => (code.includes('](') ? code : '')).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z][a-z+.-]*:/i.test(target!)) continue; // https:, mailto:
      links++;
      const [path, anchor] = target!.split('#', 2) as [string, string | undefined];
      const resolved = path === '' ? file : normalize(join(dirname(file), decodeURIComponent(path)));
      const where = `${file}:${k + 1}`;
      if (resolved.startsWith('..') || !existsSync(join(root, resolved))) {
        problems.push(`${where}: the link ${target} names no file of the repository`);
      } else if (anchor !== undefined && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor)) {
        problems.push(`${where}: the link ${target}: ${resolved} has no heading with the id #${anchor}`);
      }
    }
  }
}
console.log(`docs-check: ${links} relative links resolved, anchors included`);

// 4. Numbers the docs quote of the code's constants.
/** A number the code spells in its source rather than exports (found by `pattern`'s first group). */
function inSource(file: string, pattern: RegExp): number {
  const match = pattern.exec(readFileSync(join(root, file), 'utf8'));
  if (!match) throw new Error(`docs-check: ${file} no longer matches ${pattern}; update NUMBERS in scripts/docs-check.ts`);
  return Number(match[1]!.replace(/_/g, ''));
}

const nodeVersion = /^>=\s*(\d+(?:\.\d+)?)/.exec(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).engines.node);
const DEFAULT_MS: Record<string, number> = {
  leaseMs: CLIENT_DEFAULTS.leaseMs,
  waitMs: CLIENT_DEFAULTS.waitMs,
  redisTimeoutMs: CLIENT_DEFAULTS.redisTimeoutMs,
  recheckMs: CLIENT_DEFAULTS.recheckMs,
  linkCheckMs: CLIENT_DEFAULTS.linkCheckMs,
};
const heartbeat = {
  times: inSource('src/lock.ts', /waitBeatMs: waitMs > 0 \? (\d+) \* recheckMs \+ \d+/),
  plus: inSource('src/lock.ts', /waitBeatMs: waitMs > 0 \? \d+ \* recheckMs \+ (\d+)/),
};

/**
 * Phrases that quote a constant: each numeric group of `pattern` (matched
 * on the docs' prose with line breaks joined) must equal `code` in order.
 */
const NUMBERS: { what: string; pattern: RegExp; code: (match: RegExpExecArray) => number[] }[] = [
  {
    what: 'server time per renewal call (EXTEND_BUDGET_US)',
    pattern: /calls? that (?:each )?stops? after ([\d,]+) µs of server time/g,
    code: () => [EXTEND_BUDGET_US],
  },
  {
    what: 'server time per inspect call (INSPECT_BUDGET_US)',
    pattern: /stop reading once ([\d,]+) µs of server time/g,
    code: () => [INSPECT_BUDGET_US],
  },
  {
    what: 'entries one inspect step reads before the clock is checked (INSPECT_STEP)',
    pattern: /each step of (\d+) entries/g,
    code: () => [inSource('lua/includes/inspect-page.lua', /local INSPECT_STEP = (\d+)/)],
  },
  {
    what: 'release calls in flight at once (RELEASE_CALLS_IN_FLIGHT)',
    pattern: /(\d+) (?:release )?calls in flight/g,
    code: () => [RELEASE_CALLS_IN_FLIGHT],
  },
  { what: 'most leases per renewal call (EXTEND_MAX_LEASES)', pattern: /at most ([\d,]+) leases/g, code: () => [EXTEND_MAX_LEASES] },
  {
    what: 'script calls per socket write (COALESCE_BATCH)',
    pattern: /up to (\d+) per socket write/g,
    code: () => [inSource('src/clients/coalesce.ts', /const COALESCE_BATCH = (\d+)/)],
  },
  { what: "an acquire's slack past waitMs (ACQUIRE_SLACK_MS)", pattern: /`?waitMs`? \+ (\d+) ms/g, code: () => [ACQUIRE_SLACK_MS] },
  {
    what: 'the renewal period, a fraction of the lease',
    pattern: /every `?leaseMs \/ (\d+)`?/g,
    code: () => [inSource('src/holdings.ts', /this\.autoLeaseMs \/ (\d+)/)],
  },
  {
    what: "a waiting writer's heartbeat",
    pattern: /(\d+) × recheckMs \+ (\d+)`? ms/g,
    code: () => [heartbeat.times, heartbeat.plus],
  },
  {
    what: "a waiting writer's heartbeat at the default recheckMs, in s",
    pattern: /recheckMs \+ \d+`? ms[,(] ([\d.]+) s by default/g,
    code: () => [(heartbeat.times * CLIENT_DEFAULTS.recheckMs + heartbeat.plus) / 1000],
  },
  {
    what: 'how long an unused subscription lingers (LINGER_MS), in s',
    pattern: /(\d+) s after (?:the|their|that master's) last/g,
    code: () => [inSource('src/wakeups.ts', /const LINGER_MS = ([\d_]+);/) / 1000],
  },
  { what: 'the longest resource name (MAX_RESOURCE_BYTES)', pattern: /at most ([\d,]+) UTF-8 bytes/g, code: () => [MAX_RESOURCE_BYTES] },
  {
    what: 'a default duration, in ms',
    pattern: /`(leaseMs|waitMs|redisTimeoutMs|recheckMs|linkCheckMs)`,? \(?(\d+)(?: ms)?[,)]/g,
    code: (m) => [DEFAULT_MS[m[1]!]!],
  },
  {
    what: 'the default lease, in s',
    pattern: /(?:default (\d+) s lease|lease runs out \((\d+) s by default)/g,
    code: () => [CLIENT_DEFAULTS.leaseMs / 1000],
  },
  {
    what: 'how long a resharded call is retried (MIGRATION_RETRY_MS), in s',
    pattern: /\((\d+) s of the library's tries/g,
    code: () => [MIGRATION_RETRY_MS / 1000],
  },
  {
    what: 'how long a writer handed the lock by a minority waits (HANDED_GRACE_MS)',
    pattern: /tries on every node (\d+) ms later/g,
    code: () => [inSource('src/lock.ts', /const HANDED_GRACE_MS = (\d+);/)],
  },
  {
    what: "redlock mode's fewest nodes (MIN_REDLOCK_NODES)",
    pattern: /at least (\d+) independent servers/g,
    code: () => [MIN_REDLOCK_NODES],
  },
  { what: 'the oldest Node.js (package.json engines)', pattern: /Node\.js ([\d.]+) or newer/g, code: () => [Number(nodeVersion?.[1])] },
];

const joined = docs.map((file) => ({ file, text: prose(file).replace(/\s*\n\s*/g, ' ') }));

/**
 * Each quote of `figures` in the docs: the numeric groups of its pattern
 * must be the figure's values (`values`), rounded as the doc rounds them.
 * Returns how many quotes were compared.
 */
function checkQuotes<F extends { what: string; pattern: RegExp }>(
  figures: readonly F[],
  table: string,
  source: string,
  values: (figure: F, match: RegExpExecArray) => number[],
): number {
  let quotes = 0;
  for (const figure of figures) {
    let found = 0;
    for (const { file, text } of joined) {
      for (const match of text.matchAll(figure.pattern)) {
        found++;
        const said = match
          .slice(1)
          .filter((group): group is string => group !== undefined && /^[\d,.]+$/.test(group))
          .map((group) => group.replace(/,/g, ''));
        const expected = values(figure, match).map((value, k) => value.toFixed(said[k]?.split('.')[1]?.length ?? 0));
        if (said.join() !== expected.join()) {
          problems.push(`${file}: "${match[0]}" says ${said.join(', ')}, ${source} ${expected.join(', ')} (${figure.what})`);
        }
      }
    }
    if (found === 0) problems.push(`no doc quotes ${figure.what} as ${figure.pattern} any more: update ${table} in scripts/docs-check.ts`);
    quotes += found;
  }
  return quotes;
}

const quoted = checkQuotes(NUMBERS, 'NUMBERS', 'the code', (figure, match) => figure.code(match));
console.log(`docs-check: ${quoted} quotes of ${NUMBERS.length} constants compared with the code`);

// 5. Sentences (scripts/docs-check/sentences.ts: prose and table cells, a code span by its words).
const MAX_SENTENCE_WORDS = 60;
/** README.md and the task pages, read in one sitting: shorter sentences, and no chains of semicolons. */
const PLAIN = { average: 25, longest: 40, semicolons: 1 };
const plain = (file: string) => file === 'README.md' || file.startsWith(`${join('docs', 'guide')}/`);
let sentences = 0;
for (const file of docs) {
  const found = sentencesOf(readFileSync(join(root, file), 'utf8'));
  sentences += found.length;
  const limit = plain(file) ? PLAIN.longest : MAX_SENTENCE_WORDS;
  for (const s of found) {
    if (s.words > limit) problems.push(`${file}:${s.line}: a sentence of ${s.words} words (at most ${limit}): "${s.text.slice(0, 60)}..."`);
    if (plain(file) && s.semicolons > PLAIN.semicolons) {
      problems.push(
        `${file}:${s.line}: a chain of ${s.semicolons} semicolons in one sentence: make it several: "${s.text.slice(0, 60)}..."`,
      );
    }
  }
  const { average } = figures(found);
  if (plain(file) && average > PLAIN.average) {
    problems.push(`${file}: sentences average ${average.toFixed(1)} words (at most ${PLAIN.average}): split the long ones`);
  }
}
console.log(
  `docs-check: ${sentences} sentences held to ${MAX_SENTENCE_WORDS} words; README.md and docs/guide/ to ${PLAIN.longest}, averaging at most ${PLAIN.average}`,
);
// The README is read in one sitting: the rest belongs in docs/.
const README_MAX_LINES = 300;
const readmeLines = readFileSync(join(root, 'README.md'), 'utf8').trimEnd().split('\n').length;
if (readmeLines > README_MAX_LINES) {
  problems.push(`README.md: ${readmeLines} lines, at most ${README_MAX_LINES}: move detail to docs/ and link to it`);
}

// 6. Figures the docs quote of the bench's latest run (bench/results/latest.md, the standalone server).
const latest = readFileSync(join(root, 'bench', 'results', 'latest.md'), 'utf8');
/** A row's figure in the first table under `section` (a heading's start) whose first cell starts with `row`. */
function benchFigure(section: string, row: string, column = 1): number {
  const from = latest.indexOf(`### ${section}`);
  const line =
    from < 0
      ? undefined
      : latest
          .slice(from)
          .split('\n')
          .find((l) => l.startsWith(`| ${row}`));
  const cell = line?.split('|')[column + 1]?.trim();
  const value = cell === undefined ? Number.NaN : Number.parseFloat(cell.replace(/,/g, ''));
  if (Number.isNaN(value)) throw new Error(`docs-check: no "${row}" under "${section}" in bench/results/latest.md; update BENCH`);
  return value;
}
const anatomy = (row: string) => benchFigure('(anatomy)', row);
const rwlockCalls = ['acquire write, free lock', 'release write, only holder', 'acquire read, free lock', 'release read, only holder'].map(
  (row) => anatomy(`redis-rwlock ${row}`),
);

/** Phrases that quote the bench: each numeric group of `pattern` must be `bench`'s figure, rounded as the doc rounds it. */
const BENCH: { what: string; pattern: RegExp; bench: () => number[] }[] = [
  {
    what: 'server µs of a write grant on a free lock',
    pattern: /(?:([\d.]+) µs of server time for a write grant|write, free lock \| 1 per try \| ([\d.]+) \|)/g,
    bench: () => [anatomy('redis-rwlock acquire write, free lock')],
  },
  {
    what: 'server µs of a read grant on a free lock',
    pattern: /(?:([\d.]+) µs for a read grant|read, free lock \| 1 per try \| ([\d.]+) \|)/g,
    bench: () => [anatomy('redis-rwlock acquire read, free lock')],
  },
  {
    what: "server µs of a sole writer's release",
    pattern: /(?:([\d.]+) µs of server time for a sole writer|write, sole holder \| 1 \| ([\d.]+) \|)/g,
    bench: () => [anatomy('redis-rwlock release write, only holder')],
  },
  {
    what: "server µs of a sole reader's release",
    pattern: /(?:([\d.]+) µs for a sole reader|read, sole holder \| 1 \| ([\d.]+) \|)/g,
    bench: () => [anatomy('redis-rwlock release read, only holder')],
  },
  {
    what: "server µs of the bare floor's SET NX PX and compare-and-delete",
    pattern: /compare-and-delete \| 1, 1 \| ([\d.]+), ([\d.]+) \|/g,
    bench: () => [anatomy('floor acquire'), anatomy('floor release')],
  },
  {
    what: "the range of the library's server µs per call, and a bare SET NX PX's",
    pattern: /([\d.]+) to ([\d.]+) µs per call on an idle server, against ([\d.]+) µs for a bare/g,
    bench: () => [Math.min(...rwlockCalls), Math.max(...rwlockCalls), anatomy('floor acquire')],
  },
  {
    what: 'bytes of a write-held lock and of a lock read by 1 and by 100 readers',
    pattern:
      /write-held by one holder \| ([\d,]+) \| \| read by 1 reader \| ([\d,]+) \|.*?\| read by 100 readers \| ([\d,]+) \(about (\d+) per further reader\)/g,
    bench: () => [
      benchFigure('(f)', 'write-held', 2),
      benchFigure('(f)', '1 reader', 2),
      benchFigure('(f)', '100 readers', 2),
      Number(/Per extra reader: (\d+) bytes/.exec(latest)?.[1]),
    ],
  },
  {
    what: 'leases per renewal call',
    pattern: /renewed (\d+) leases per call/g,
    bench: () => [benchFigure('(e)', 'redis-rwlock (batched)', 1) / benchFigure('(e)', 'redis-rwlock (batched)', 3)],
  },
];
/** A row of the bench's summary table (its first table): the value cell of `row` on `topology`. */
function summaryFigure(row: string, topology: 'standalone' | 'cluster'): number {
  const line = latest.split('\n').find((l) => l.startsWith(`| ${row} | ${topology} |`));
  const value = Number.parseFloat(line?.split('|')[3]?.trim() ?? '');
  if (Number.isNaN(value)) throw new Error(`docs-check: no "${row}" on ${topology} in bench/results/latest.md; update BENCH`);
  return value;
}
BENCH.push({
  what: 'the longest renewal call on one server and on a Cluster, in ms',
  pattern: /longest renewal call of the bench's latest run took ([\d.]+) ms on one server and ([\d.]+) ms on a Cluster/g,
  bench: () =>
    ['standalone', 'cluster'].map((t) =>
      summaryFigure('renewal of 100000 leases: longest command on any master (SLOWLOG at 1 ms; 0: none listed)', t as 'standalone'),
    ),
});
const measured = checkQuotes(BENCH, 'BENCH', "the bench's latest run", (figure) => figure.bench());
console.log(`docs-check: ${measured} quotes of ${BENCH.length} bench figures compared with bench/results/latest.md`);

// A "longest" call or command quoted anywhere else than through BENCH is a claim nothing checks.
for (const { file, text } of joined) {
  for (const match of text.matchAll(/longest [\w ]{0,40}?(?:call|command)[^.]*?\b(\d+(?:\.\d+)?) ?(?:ms|µs)/g)) {
    if (
      !BENCH.some(
        (b) =>
          new RegExp(b.pattern.source).test(match[0]) ||
          new RegExp(b.pattern.source).test(text.slice(match.index! - 40, match.index! + match[0].length + 80)),
      )
    ) {
      problems.push(`${file}: "${match[0]}" quotes a longest call that no BENCH pattern checks: quote the bench's row (add it to BENCH)`);
    }
  }
}

// 7. Which suites run on which client, from the test files.
const SUITE_CLIENTS: Record<string, readonly string[]> = {
  ALL_CLIENTS,
  ONE_NODE_REDIS,
  NODE_REDIS_IN_CI,
  NODE_REDIS_IN_CI_AND_GLIDE,
};
function clientsOf(arg: string): string[] {
  const named = SUITE_CLIENTS[arg.trim()];
  if (named) return [...named];
  const listed = [...arg.matchAll(/'([\w-]+)'/g)].map((m) => m[1]!);
  if (listed.length === 0) problems.push(`scripts/docs-check.ts: cannot read the clients "${arg}" of a suite: teach SUITE_CLIENTS`);
  return listed;
}
const suites = new Map<string, Set<string>>();
for (const file of readdirSync(join(root, 'test', 'integration')).filter((f) => f.endsWith('.test.ts'))) {
  const text = readFileSync(join(root, 'test', 'integration', file), 'utf8');
  const kinds = new Set<string>();
  for (const m of text.matchAll(/forEachTopology\(\s*(?:'[^']*'|`[^`]*`)\s*,\s*(?:\{\s*clients:\s*([^}]*)\})?/g)) {
    for (const kind of m[1] === undefined ? ['ioredis'] : clientsOf(m[1])) kinds.add(kind);
  }
  for (const m of text.matchAll(/selectedClients\(([^)]*)\)/g)) for (const kind of clientsOf(m[1]!)) kinds.add(kind);
  if (kinds.size === 0) kinds.add('ioredis'); // a plain describe(): the test's own ioredis client
  suites.set(file.replace(/\.test\.ts$/, ''), kinds);
}
const SUITE_ROWS: Record<string, (kinds: Set<string>) => boolean> = {
  'node-redis 5': (k) => k.has('node-redis'),
  'node-redis 6': (k) => k.has('node-redis6'),
  'GLIDE 2': (k) => k.has('glide'),
  'ioredis only': (k) => k.size === 1 && k.has('ioredis'),
};
let suiteRows = 0;
for (const file of docs) {
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  for (const [k, line] of lines.entries()) {
    if (/\ball but (?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d+)\b/i.test(line)) {
      problems.push(`${file}:${k + 1}: "all but ..." counts suites or clients in words: list them in the suites table instead`);
    }
    if (!line.includes('<!-- docs-check: suites -->')) continue;
    for (let r = k + 1; r < lines.length && /^\|/.test(lines[r]!); r++) {
      const [, label, cell] = lines[r]!.split('|').map((c) => c.trim());
      const wanted = label ? SUITE_ROWS[label] : undefined;
      if (!wanted) continue;
      suiteRows++;
      const said = [...cell!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!).sort();
      const derived = [...suites]
        .filter(([, kinds]) => wanted(kinds))
        .map(([name]) => name)
        .sort();
      if (said.join() !== derived.join()) {
        const missing = derived.filter((n) => !said.includes(n));
        const extra = said.filter((n) => !derived.includes(n));
        problems.push(
          `${file}:${r + 1}: the ${label} row of the suites table differs from test/integration: missing ${missing.join(', ') || 'none'}; not run there: ${extra.join(', ') || 'none'}`,
        );
      }
    }
  }
}
if (suiteRows === 0) problems.push('no doc has the suites table (<!-- docs-check: suites -->) any more');

// A count of suites or client libraries in prose ("the 24 ioredis-only suites", "four client
// libraries") must be one the test files give: the whole of test/integration, a row of the suites
// table (the one its words name, if they name one), or the client libraries the suites run on.
const NUMBER_WORDS = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'];
NUMBER_WORDS.push('eleven', 'twelve', 'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen', 'eighteen', 'nineteen', 'twenty');
const rowCount = (label: string) => [...suites.values()].filter((kinds) => SUITE_ROWS[label]!(kinds)).length;
const clientKinds = new Set([...suites.values()].flatMap((kinds) => [...kinds])).size;
const COUNT_PHRASE = new RegExp(
  // Not a version: "node-redis 6 suites", "Redis 7.0 runs the suites".
  `(?<!(?:node-redis|ioredis|GLIDE|Node|Node\\.js|Redis|Valkey|Bun|Deno|TypeScript)\\s+)(?<![\\d.,])\\b(\\d+|${NUMBER_WORDS.join('|')})\\s+((?:[\\w-]+\\s+){0,2}?)(suites|client libraries)\\b`,
  'gi',
);
let counts = 0;
for (const file of docs) {
  const text = prose(file);
  for (const m of text.matchAll(COUNT_PHRASE)) {
    counts++;
    const said = /^\d+$/.test(m[1]!) ? Number(m[1]) : NUMBER_WORDS.indexOf(m[1]!.toLowerCase());
    const between = m[2]!.toLowerCase();
    const row = /ioredis[- ]only/.test(between) ? 'ioredis only' : /glide/.test(between) ? 'GLIDE 2' : undefined;
    const derived =
      m[3]!.toLowerCase() === 'client libraries'
        ? [clientKinds]
        : row
          ? [rowCount(row)]
          : [suites.size, ...Object.keys(SUITE_ROWS).map(rowCount)];
    if (!derived.includes(said)) {
      const line = text.slice(0, m.index).split('\n').length;
      problems.push(
        `${file}:${line}: "${m[0].replace(/\s+/g, ' ')}" counts ${m[3]} that test/integration does not give (${derived.join(' or ')}): list them in the suites table, or say it without a number`,
      );
    }
  }
}
console.log(`docs-check: ${counts} counts of suites or client libraries in prose compared with the test files`);
console.log(`docs-check: ${suiteRows} rows of the suites table derived from ${suites.size} test files`);

// 8. Constants quoted in the comments of the source the API reference is built from.
const COMMENTS: { file: string; what: string; pattern: RegExp; code: () => number }[] = [
  {
    file: 'src/observability/channels.ts',
    what: 'EXTEND_BUDGET_US',
    pattern: /about (\d+) µs of server time/g,
    code: () => EXTEND_BUDGET_US,
  },
  {
    file: 'src/observability/channels.ts',
    what: 'RETRY_FIRST_MS (src/holdings.ts)',
    pattern: /tried again (\d+) ms later/g,
    code: () => inSource('src/holdings.ts', /const RETRY_FIRST_MS = (\d+);/),
  },
  { file: 'src/holdings.ts', what: 'EXTEND_BUDGET_US', pattern: /at most (\d+) µs of server time/g, code: () => EXTEND_BUDGET_US },
  { file: 'src/client.ts', what: 'MIN_REDLOCK_NODES', pattern: /\(at least (\d+)\)/g, code: () => MIN_REDLOCK_NODES },
];
let commentQuotes = 0;
for (const c of COMMENTS) {
  const comments = readFileSync(join(root, c.file), 'utf8')
    .split('\n')
    .filter((l) => /^\s*(?:\/\*\*?|\*|\/\/)/.test(l) || /\/\*\*.*\*\//.test(l))
    .join(' ');
  let found = 0;
  for (const m of comments.matchAll(c.pattern)) {
    found++;
    if (Number(m[1]) !== c.code()) problems.push(`${c.file}: a comment says "${m[0]}", the code ${c.code()} (${c.what})`);
  }
  if (found === 0)
    problems.push(`${c.file}: no comment quotes ${c.what} as ${c.pattern} any more: update COMMENTS in scripts/docs-check.ts`);
  commentQuotes += found;
}
console.log(`docs-check: ${commentQuotes} quotes of constants in source comments compared with the code`);

// 9. The API surface in docs/reference.md.
const REFERENCE = join('docs', 'reference.md');
const reference = readFileSync(join(root, REFERENCE), 'utf8');
const program = ts.createProgram([join(root, 'src', 'index.ts')], {
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  target: ts.ScriptTarget.ES2022,
  strict: true,
  skipLibCheck: true,
  types: ['node'],
});
const checker = program.getTypeChecker();
const exported = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(join(root, 'src', 'index.ts'))!)!);
for (const symbol of exported) {
  if (!new RegExp(`\`[^\`\\n]*\\b${symbol.name}\\b[^\`\\n]*\``).test(reference)) {
    problems.push(`${REFERENCE}: the export ${symbol.name} is not named (in a code span) anywhere on the page`);
  }
}
/** The public, documented members of an exported type, as the generated reference shows them (no @internal, no inherited EventEmitter). */
function membersOf(name: string): string[] {
  const symbol = exported.find((e) => e.name === name);
  if (!symbol) throw new Error(`docs-check: ${name} is not exported by src/index.ts; update the reference's docs-check tables`);
  const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  return checker
    .getPropertiesOfType(checker.getDeclaredTypeOfSymbol(target))
    .filter((p) => {
      const declaration = p.valueDeclaration ?? p.declarations?.[0];
      if (!declaration?.getSourceFile().fileName.startsWith(join(root, 'src'))) return false;
      if (ts.getCombinedModifierFlags(declaration as ts.Declaration) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected))
        return false;
      if (ts.getJSDocTags(declaration).some((tag) => tag.tagName.text === 'internal')) return false;
      return !p.name.startsWith('__') || p.name.startsWith('__@');
    })
    .map((p) => (p.name.startsWith('__@') ? `[Symbol.${p.name.slice(3).replace(/@\d+$/, '')}]` : p.name));
}
/** The rows of the table after `<!-- docs-check: <kind> <name> -->`: its cells, and the code spans of its first cell (member names). */
function referenceTable(marker: string): { line: number; cells: string[]; names: string[] }[] | undefined {
  const lines = reference.split('\n');
  const at = lines.findIndex((l) => l.trim() === `<!-- docs-check: ${marker} -->`);
  if (at < 0) return undefined;
  const rows: { line: number; cells: string[]; names: string[] }[] = [];
  for (let r = at + 3; r < lines.length && /^\|/.test(lines[r]!); r++) {
    const cells = lines[r]!.replace(/\\\|/g, '\u0000')
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim().replace(/\u0000/g, '|'));
    const names = [...cells[0]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/\(.*$/, '').replace(/^\.\.\.$/, ''));
    rows.push({ line: r + 1, cells, names: names.filter((n) => n !== '') });
  }
  return rows;
}
const FIELD_TABLES = [
  'Lease',
  'LeaseGroup',
  'LockClient',
  'RWLock',
  'LockClientEvents',
  'LockStats',
  'AcquireTraceContext',
  'LeaseTraceContext',
  'RenewTraceContext',
];
/** Members a table may leave to prose: the EventEmitter methods `on(...)`, `once`, `off`, ... stand for. */
const EMITTER = new Set(['on', 'once', 'off', 'addListener', 'removeListener', 'removeAllListeners', 'emit']);
let apiRows = 0;
for (const name of FIELD_TABLES) {
  const rows = referenceTable(`fields ${name}`);
  if (!rows) {
    problems.push(`${REFERENCE}: no table of ${name}'s members (<!-- docs-check: fields ${name} -->)`);
    continue;
  }
  apiRows += rows.length;
  const listed = new Set(rows.flatMap((r) => r.names));
  const members = membersOf(name);
  for (const m of members)
    if (!listed.has(m) && !(name === 'LockClient' && EMITTER.has(m))) problems.push(`${REFERENCE}: ${name}.${m} is missing from its table`);
  for (const row of rows) {
    for (const n of row.names)
      if (!members.includes(n) && !EMITTER.has(n)) problems.push(`${REFERENCE}:${row.line}: ${name} has no member ${n}`);
  }
}
/** `duration('<name>', o.<x>, <min>` in a source file: the option's minimum. */
function minimumOf(file: string, name: string): number {
  const min = inSource(file, new RegExp(`duration\\('${name.replace('.', '\\.')}', o\\.\\w+, (\\w+)`));
  return Number.isNaN(min) ? MIN_LEASE_MS : min;
}
const span = (text: string): string => `\`${text}\``;
const durationLimit = (min: number): string => `${min} to ${MAX_DURATION_MS}`;
const optionsSource = 'src/options.ts';
const OPTION_TABLES: Record<string, Record<string, { default?: string; limits?: string[]; noTry?: true }>> = {
  LockClientOptions: {
    prefix: { default: span(`'${CLIENT_DEFAULTS.prefix}'`), limits: [`at most ${MAX_PREFIX_BYTES} bytes`] },
    leaseMs: { default: span(String(CLIENT_DEFAULTS.leaseMs)), limits: [durationLimit(MIN_LEASE_MS)] },
    waitMs: { default: span(String(CLIENT_DEFAULTS.waitMs)), limits: [durationLimit(minimumOf(optionsSource, 'waitMs'))] },
    redisTimeoutMs: {
      default: span(String(CLIENT_DEFAULTS.redisTimeoutMs)),
      limits: [durationLimit(minimumOf(optionsSource, 'redisTimeoutMs'))],
    },
    writerPreference: { default: span(String(CLIENT_DEFAULTS.writerPreference)) },
    fair: { default: span(String(CLIENT_DEFAULTS.fair)) },
    recheckMs: { default: span(String(CLIENT_DEFAULTS.recheckMs)), limits: [durationLimit(minimumOf(optionsSource, 'recheckMs'))] },
    linkCheckMs: { default: span(String(CLIENT_DEFAULTS.linkCheckMs)), limits: [durationLimit(MIN_LINK_CHECK_MS)] },
    mode: { default: span(`'${CLIENT_DEFAULTS.mode}'`), limits: CLIENT_MODES.map((m) => span(`'${m}'`)) },
    legacyKeys: {},
    redlock: {},
    replicaAck: { default: 'off' },
    onEvictionRisk: {
      default: span(`'${CLIENT_DEFAULTS.onEvictionRisk}'`),
      limits: EVICTION_RISK_ACTIONS.map((a) => span(`'${a}'`)),
    },
  },
  RedlockOptions: {
    driftFactor: {
      default: span(String(CLIENT_DEFAULTS.redlock.driftFactor)),
      limits: [
        `from ${inSource(optionsSource, /factor >= ([\d.]+) && factor < [\d.]+/)} to below ${inSource(optionsSource, /factor >= [\d.]+ && factor < ([\d.]+)/)}`,
      ],
    },
    driftMs: {
      default: span(String(CLIENT_DEFAULTS.redlock.driftMs)),
      limits: [durationLimit(minimumOf(optionsSource, 'redlock.driftMs'))],
    },
    nodeTimeoutMs: {
      default: span(String(CLIENT_DEFAULTS.redlock.nodeTimeoutMs)),
      limits: [durationLimit(minimumOf(optionsSource, 'redlock.nodeTimeoutMs'))],
    },
  },
  ReplicaAckOptions: {
    replicas: {
      default: 'required',
      limits: [
        `${inSource(optionsSource, /replicas < (\d+) \|\| replicas > \d+/)} to ${inSource(optionsSource, /replicas < \d+ \|\| replicas > (\d+)/)}`,
      ],
    },
    timeoutMs: { default: 'required', limits: [durationLimit(minimumOf(optionsSource, 'replicaAck.timeoutMs'))] },
    onShortfall: { default: span(`'${/o\.onShortfall \?\? '(\w+)'/.exec(readFileSync(join(root, optionsSource), 'utf8'))?.[1]}'`) },
  },
  AcquireOptions: {
    waitMs: { default: "the client's `waitMs`", limits: [durationLimit(minimumOf('src/lock.ts', 'waitMs'))], noTry: true },
    signal: { noTry: true },
    leaseMs: { default: "the client's `leaseMs`", limits: [durationLimit(MIN_LEASE_MS)] },
    owner: { limits: [`1 to ${MAX_OWNER_LENGTH} characters`] },
    replicaAck: { default: "the client's `replicaAck`" },
  },
};
// The try functions refuse what they cannot use: the options a wait takes and a try does not.
const lockSource = readFileSync(join(root, 'src', 'lock.ts'), 'utf8');
const optionList = (name: string) =>
  [...(new RegExp(`const ${name} = \\[([^\\]]*)\\]`).exec(lockSource)?.[1] ?? '').matchAll(/'(\w+)'/g)].map((m) => m[1]!);
const tryRefuses = optionList('WAIT_OPTIONS').filter((o) => !optionList('TRY_OPTIONS').includes(o));
for (const [name, expected] of Object.entries(OPTION_TABLES)) {
  const rows = referenceTable(`options ${name}`);
  if (!rows) {
    problems.push(`${REFERENCE}: no table of ${name} (<!-- docs-check: options ${name} -->)`);
    continue;
  }
  apiRows += rows.length;
  const members = membersOf(name);
  for (const m of members) {
    const row = rows.find((r) => r.names[0] === m);
    if (!row) {
      problems.push(`${REFERENCE}: the option ${name}.${m} is missing from its table`);
      continue;
    }
    const want = expected[m];
    if (!want) {
      problems.push(`scripts/docs-check.ts: ${name}.${m} is a new option: add its default and limits to OPTION_TABLES`);
      continue;
    }
    const [, defaultCell, , limitsCell, meaning] = row.cells;
    if (want.default !== undefined && defaultCell !== want.default) {
      problems.push(`${REFERENCE}:${row.line}: the default of ${name}.${m} is ${defaultCell}, the code's ${want.default}`);
    }
    for (const limit of want.limits ?? []) {
      const bounded = new RegExp(`(?:^|[^\\d.])${limit.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?:$|[^\\d])`);
      if (!bounded.test(limitsCell ?? ''))
        problems.push(`${REFERENCE}:${row.line}: the limits of ${name}.${m} say "${limitsCell}", the code's: ${limit}`);
    }
    if (name === 'AcquireOptions' && tryRefuses.includes(m) !== /Not for the try functions/.test(meaning ?? '')) {
      problems.push(
        `${REFERENCE}:${row.line}: ${m}: the try functions ${tryRefuses.includes(m) ? 'refuse' : 'take'} it (src/lock.ts TRY_OPTIONS)`,
      );
    }
  }
  for (const row of rows)
    if (!members.includes(row.names[0] ?? '')) problems.push(`${REFERENCE}:${row.line}: ${name} has no option ${row.names[0]}`);
}
// Every error class, with its code.
const errorsSource = readFileSync(join(root, 'src', 'errors.ts'), 'utf8');
const errorCodes = new Map(
  [
    ...errorsSource.matchAll(
      /export class (\w+Error) extends \w+ \{\s*(?:\/\*\*[\s\S]*?\*\/\s*)?override readonly code: RWLockErrorCode = '(\w+)'/g,
    ),
  ].map((m) => [m[1]!, m[2]!]),
);
const errorRows = referenceTable('errors');
if (!errorRows) problems.push(`${REFERENCE}: no table of the errors (<!-- docs-check: errors -->)`);
else {
  apiRows += errorRows.length;
  for (const [error, code] of errorCodes) {
    const row = errorRows.find((r) => r.names[0] === error);
    if (!row) problems.push(`${REFERENCE}: the error ${error} is missing from the errors table`);
    else if (row.cells[1] !== span(code))
      problems.push(`${REFERENCE}:${row.line}: ${error}'s code is ${row.cells[1]}, the code's ${span(code)}`);
    else if ((row.cells[3] ?? '').length === 0) problems.push(`${REFERENCE}:${row.line}: ${error}: say what to do`);
  }
  if (errorCodes.size < 10)
    problems.push(`scripts/docs-check.ts: read only ${errorCodes.size} error classes from src/errors.ts: update the pattern`);
}
console.log(`docs-check: ${exported.length} exports and ${apiRows} rows of reference tables compared with the code`);

// 10. No tracker numbers or history in what ships.
const shipped = shippedFiles(root);
for (const file of shipped) {
  for (const p of historyProblems(readFileSync(join(root, file), 'utf8'))) problems.push(`${file}:${p.line}: "${p.found}": ${p.instead}`);
}
console.log(`docs-check: ${shipped.length} shipped files read for internal issue numbers and "round N" history`);

if (problems.length > 0) {
  console.error(`docs-check: ${problems.length} problem(s):\n${problems.map((p) => `  ${p}`).join('\n')}`);
  process.exitCode = 1;
}
