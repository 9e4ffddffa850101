/**
 * What ships speaks to its users, not to the project's own tracker: no
 * internal issue numbers and no "round N" of the work that got the code
 * here, in any file the package ships (package.json and its "files"),
 * README.md, or src/ (whose comments ship in the declarations and source maps).
 * `npm run docs:check` runs it; the rule, so that it stays one rule:
 *
 * - Refused: an issue or pull-request number standing alone ("issue 44",
 *   "issues 6, 14 and 27", "issue #44", "issue no. 44", "PR 12", "bug 3",
 *   "GH-44", "#44", "(#44)"), which cannot say whose tracker it is and so
 *   reads as ours; a link or path to this project's own tracker, and
 *   `redis-rwlock#44`; and "round 9", "rounds 9 and 10", "round thirteen",
 *   "the 13th round", "the ninth round", "round IX": the history of how the
 *   code got here, which lives in git. Also when a line break, with a code
 *   comment's `//`, `*`, `--` or `#`, falls inside the words.
 * - Allowed: a citation of another project's tracker that names the
 *   project, as its link (`https://github.com/redis/redis/issues/9105`, or
 *   `[Redis issue 9105](https://github.com/redis/redis/issues/9105)`), in
 *   GitHub's `owner/repo#N` form (`redis/redis#9105`), or as words next to
 *   either ("Redis issue 9105 (https://github.com/redis/redis/issues/9105)").
 * - Not a reference at all: "issue" as a verb before a count ("each tick
 *   issues 16 calls", "issues 2 EVALSHA"), "round" in its other senses ("a
 *   renewal round", "the first round", "round-robin", "round 12 ms up"), a
 *   numbered thing ("node #3"), and a relative link's anchor
 *   (`guide.md#1-install`).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

export interface HistoryProblem {
  /** 1-based line of the text where the match starts. */
  readonly line: number;
  /** The words refused, white space collapsed. */
  readonly found: string;
  /** What to write instead. */
  readonly instead: string;
}

const NUMBER_WORDS =
  'one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty';
/** Ordinals that name a round of past work (from the fourth, or 4th, on): "the first (second, third) round" of renewal is not one. */
const ORDINAL_WORDS =
  'fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth';
/** The nouns a count after the verb "issue(s)" names: "issues 16 calls" is no issue number. */
const COUNTED =
  /^(?:calls?|commands?|requests?|writes?|reads?|scripts?|quer(?:y|ies)|messages?|operations?|batch(?:es)?|retries|tries|times|pings?|bytes|acquires?|releases?|extends?)$/i;
/** A word that may stand between the count and what "issue(s)" counts: "issues 2 more calls". */
const COUNT_WORD = /^(?:more|fewer|extra|further|separate|script|Redis|server)$/i;
/** A Redis command, in capitals: "issues 2 EVALSHA", "issue 3 CLIENT|SETNAME calls". */
const COMMAND = /^[A-Z][A-Z|_]{2,}$/;
/** Things counted with a "#" that are no tracker's: "node #3", "step #2". */
const NUMBERED =
  /\b(?:nodes?|servers?|masters?|replicas?|shards?|slots?|steps?|items?|rows?|lines?|columns?|attempts?|tries|try|calls?|leases?|holders?|readers?|writers?|waiters?|workers?|processes|process|clients?|runs?|cases?|pages?|parts?|args?|argv|keys)\s*$/i;
/** White space, also a line break into a code comment's next line (`//`, ` * `, `--`, `#`). */
const GAP = String.raw`(?:[ \t\r]|\n[ \t]*(?:\/\/+|--|\*(?!\/)|#(?!\d))?)`;
/** This project's own tracker, which a link does not make an upstream citation. */
const OWN_TRACKER = /github\.com\/[\w.-]+\/redis-rwlock\/(?:issues|pull)\/\d+/i;

const TRACKER_INSTEAD =
  "say what it does and why, without the tracker's number; cite another project's issue as a link that names it, e.g. [redis/redis#9105](https://github.com/redis/redis/issues/9105)";
const ROUND_INSTEAD = 'say what is true now and why; which round of work changed it belongs in the commit message';

/** The count's next words, as the callback of a `(?=((?:GAP+\S+){0,2}))` lookahead receives them. */
const wordsAfter = (next: string | undefined): string[] =>
  (next ?? '')
    .replace(/\/\/+|--|\*/g, ' ')
    .trim()
    .split(/\s+/)
    .map((w) => w.replace(/[.,;:!?)]+$/, ''));
/** "issue(s) N" as the verb: N counts calls, commands or a Redis command. */
const countsSomething = (next: string | undefined): boolean => {
  const [first = '', second = ''] = wordsAfter(next);
  const counted = (w: string) => COUNTED.test(w) || COMMAND.test(w);
  return counted(first) || (COUNT_WORD.test(first) && counted(second));
};

interface Refused {
  readonly pattern: RegExp;
  readonly instead: string;
  /**
   * Whether a match is no reference after all, given the match and its groups,
   * the text just before it, and whether an upstream citation of a number
   * stands near it.
   */
  readonly allowed?: (match: readonly (string | undefined)[], before: string, cited: (n: string) => boolean) => boolean;
}

const REFUSED: readonly Refused[] = [
  {
    // "issue 44", "issues 6, 14", "issue no. 44", "issue number 44", "issue-44", "PR 12", "bug 3", "ticket 9".
    pattern: new RegExp(
      String.raw`\b(?:issues?|pull${GAP}+requests?|PRs?|bugs?|tickets?)${GAP}*(?:(?:no\.|nr\.|number|[-:])${GAP}*)?(?:#${GAP}*)?(\d+)(?!\d)(?=((?:${GAP}+\S+){0,2}))`,
      'gi',
    ),
    instead: TRACKER_INSTEAD,
    allowed: ([span = '', n = '', next], _before, cited) => (/^issues?\b/i.test(span) && countsSomething(next)) || cited(n),
  },
  { pattern: /\bGH-(\d+)\b/gi, instead: TRACKER_INSTEAD },
  { pattern: /\bredis-rwlock#\d+\b/gi, instead: TRACKER_INSTEAD },
  { pattern: /(?:\bgithub\.com\/)?\b[\w.-]+\/redis-rwlock\/(?:issues|pull)\/\d+/gi, instead: TRACKER_INSTEAD },
  {
    pattern: /(?<![\w&#/])#(\d+)\b/g,
    instead: TRACKER_INSTEAD,
    allowed: ([, n = ''], before, cited) => NUMBERED.test(before) || cited(n),
  },
  {
    // "round 9", "rounds 9 and 10", "round thirteen"; not the verb ("round 12 ms up").
    pattern: new RegExp(
      String.raw`\brounds?(?:${GAP}|-)+(?:\d+(?![.\d])(?!(?:${GAP}*(?:ms|µs|us|ns|s|%|bytes?|[KMG]i?B))?${GAP}+(?:up|down)\b)|(?:${NUMBER_WORDS})\b)`,
      'gi',
    ),
    instead: ROUND_INSTEAD,
  },
  { pattern: new RegExp(String.raw`\b(?:(?:\d{2,}|[4-9])(?:st|nd|rd|th)|${ORDINAL_WORDS})${GAP}+round\b`, 'gi'), instead: ROUND_INSTEAD },
  { pattern: /\b[Rr]ound(?:[ \t]|\n)+[IVXL]{2,}\b/g, instead: ROUND_INSTEAD },
];

/** How far from an upstream citation the words naming the same number may stand: about two lines. */
const CITATION_REACH = 240;

/** `text` with `span` blanked, line breaks and offsets kept. */
const blank = (span: string): string => span.replace(/[^\n]/g, ' ');

/** The internal issue numbers and "round N" history in `text`, by line. */
export function historyProblems(text: string): HistoryProblem[] {
  const problems: HistoryProblem[] = [];
  /** Where an upstream issue or pull request is cited, by its number. */
  const citations: { n: string; at: number }[] = [];
  const cite = (span: string, at: number) => {
    for (const m of span.matchAll(/(?:\/(?:issues|pull)\/|#)(\d+)/g)) citations.push({ n: m[1]!, at });
  };
  const own = (span: string, at: number) => {
    if (OWN_TRACKER.test(span)) problems.push({ line: lineAt(text, at), found: span.replace(/\s+/g, ' '), instead: TRACKER_INSTEAD });
    else cite(span, at);
  };
  const allowed = text
    // Links to an absolute address (their text included: "[Redis issue 9105](https://...)"), and bare addresses.
    .replace(/\[[^\]]*\]\(\s*https?:\/\/[^)\s]+\s*\)|https?:\/\/[^\s)>\]'"`]+/g, (span, at: number) => {
      own(span, at);
      return blank(span);
    })
    // GitHub's owner/repo#N (this project's own keeps its #N, refused below).
    .replace(/\b[\w.-]+\/([\w.-]+)(#\d+)\b/g, (span, repo: string, number: string, at: number) => {
      if (repo === 'redis-rwlock') return blank(span.slice(0, -number.length)) + number;
      cite(span, at);
      return blank(span);
    })
    // A relative link's target: its anchor is no issue.
    .replace(/\]\([^)\s]*\)/g, (span) => `]${blank(span.slice(1))}`);
  const cited = (n: string, at: number) => citations.some((c) => c.n === n && Math.abs(c.at - at) <= CITATION_REACH);
  // Each pattern sees the text the ones before it left: "issue #44" is one problem, not two.
  let rest = allowed;
  for (const { pattern, instead, allowed: isAllowed } of REFUSED) {
    const seen = rest;
    rest = rest.replace(pattern, (...args: (string | number | undefined)[]) => {
      // replace() passes the match, its groups, then the offset: the first number.
      const offset = args.findIndex((a) => typeof a === 'number');
      const at = args[offset] as number;
      const match = args.slice(0, offset) as (string | undefined)[];
      const span = match[0]!;
      if (isAllowed?.(match, seen.slice(Math.max(0, at - 40), at), (n) => cited(n, at))) return span;
      problems.push({ line: lineAt(text, at), found: span.replace(/\s+/g, ' ').trim(), instead });
      return blank(span);
    });
  }
  return problems.sort((a, b) => a.line - b.line);
}

const lineAt = (text: string, at: number): number => text.slice(0, at).split('\n').length;

/** Every file under `dir`, relative to `root`. */
function walk(root: string, dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? walk(root, join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

/**
 * The files whose text ships and speaks to users: package.json "files"
 * (but dist/, which is built from src/), package.json itself (npm always
 * packs it), README.md and src/.
 */
export function shippedFiles(root: string): string[] {
  const { files } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { files: string[] };
  const out = new Set<string>(['package.json', 'README.md', ...walk(root, 'src')]);
  for (const entry of files) {
    const path = entry.replace(/\/$/, '');
    if (path === 'dist') continue;
    if (path.includes('*')) {
      const slash = path.lastIndexOf('/');
      const dir = slash < 0 ? '.' : path.slice(0, slash);
      const name = new RegExp(
        `^${path
          .slice(slash + 1)
          .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
          .replace(/\*/g, '[^/]*')}$`,
      );
      for (const f of readdirSync(join(root, dir))) if (name.test(f) && statSync(join(root, dir, f)).isFile()) out.add(join(dir, f));
    } else if (statSync(join(root, path)).isDirectory()) {
      for (const f of walk(root, path)) out.add(f);
    } else {
      out.add(path);
    }
  }
  return [...out].sort();
}
