/**
 * What ships speaks to its users, not to the project's own tracker: no
 * internal issue numbers and no "round N" of the work that got the code
 * here, in any file the package ships (package.json "files"), README.md,
 * or src/ (whose comments ship in the declarations and source maps).
 * `npm run docs:check` runs it; the rule, so that it stays one rule:
 *
 * - Refused: an issue or pull-request number standing alone ("issue 44",
 *   "issues 6, 14 and 27", "issue #44", "PR 12", "#44", "(#44)"), which
 *   cannot say whose tracker it is and so reads as ours; a link to this
 *   project's own tracker; and "round 9", "round thirteen": the history of
 *   how the code got here, which lives in git.
 * - Allowed: a citation of another project's tracker that names the
 *   project, as its link (`https://github.com/redis/redis/issues/9105`, or
 *   `[Redis issue 9105](https://github.com/redis/redis/issues/9105)`) or in
 *   GitHub's `owner/repo#N` form (`redis/redis#9105`).
 * - Not a reference at all: "issue" as a verb before a count ("each tick
 *   issues 16 calls"), "round" in its other senses ("a renewal round",
 *   "the next round", "round-robin"), and a relative link's anchor
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
/** The nouns a count after the verb "issue(s)" names: "issues 16 calls" is no issue number. */
const COUNTED =
  'calls?|commands?|requests?|writes?|reads?|scripts?|quer(?:y|ies)|messages?|operations?|batch(?:es)?|retries|tries|times|pings?|bytes|acquires?|releases?|extends?';
/** This project's own tracker, which a link does not make an upstream citation. */
const OWN_TRACKER = /github\.com\/[\w.-]+\/redis-rwlock\/(?:issues|pull)\/\d+/i;

const TRACKER_INSTEAD =
  "say what it does and why, without the tracker's number; cite another project's issue as a link that names it, e.g. [redis/redis#9105](https://github.com/redis/redis/issues/9105)";
const ROUND_INSTEAD = 'say what is true now and why; which round of work changed it belongs in the commit message';

const REFUSED: readonly { pattern: RegExp; instead: string }[] = [
  {
    pattern: new RegExp(`\\b(?:issues?|pull\\s+requests?|PRs?)\\s*#?\\s*\\d+(?!\\d|\\s+(?:${COUNTED})\\b)`, 'gi'),
    instead: TRACKER_INSTEAD,
  },
  { pattern: /(?<![\w&#/])#\d+\b/g, instead: TRACKER_INSTEAD },
  { pattern: new RegExp(`\\bround[\\s-]+(?:\\d+(?![.\\d])|(?:${NUMBER_WORDS})\\b)`, 'gi'), instead: ROUND_INSTEAD },
];

/** `text` with `span` blanked, line breaks and offsets kept. */
const blank = (span: string): string => span.replace(/[^\n]/g, ' ');

/** The internal issue numbers and "round N" history in `text`, by line. */
export function historyProblems(text: string): HistoryProblem[] {
  const problems: HistoryProblem[] = [];
  const own = (span: string, at: number) => {
    if (OWN_TRACKER.test(span)) problems.push({ line: lineAt(text, at), found: span.replace(/\s+/g, ' '), instead: TRACKER_INSTEAD });
  };
  const allowed = text
    // Links to an absolute address (their text included: "[Redis issue 9105](https://...)"), and bare addresses.
    .replace(/\[[^\]]*\]\(\s*https?:\/\/[^)\s]+\s*\)|https?:\/\/[^\s)>\]'"`]+/g, (span, at: number) => {
      own(span, at);
      return blank(span);
    })
    // GitHub's owner/repo#N (this project's own keeps its #N, refused below).
    .replace(/\b[\w.-]+\/([\w.-]+)(#\d+)\b/g, (span, repo: string, number: string) =>
      repo === 'redis-rwlock' ? blank(span.slice(0, -number.length)) + number : blank(span),
    )
    // A relative link's target: its anchor is no issue.
    .replace(/\]\([^)\s]*\)/g, (span) => `]${blank(span.slice(1))}`);
  // Each pattern sees the text the ones before it left: "issue #44" is one problem, not two.
  let rest = allowed;
  for (const { pattern, instead } of REFUSED) {
    rest = rest.replace(pattern, (span: string, at: number) => {
      problems.push({ line: lineAt(text, at), found: span.replace(/\s+/g, ' '), instead });
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
 * (but dist/, which is built from src/), README.md and src/.
 */
export function shippedFiles(root: string): string[] {
  const { files } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { files: string[] };
  const out = new Set<string>(['README.md', ...walk(root, 'src')]);
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
