/**
 * The mutation tests (`npm run test:mutants`): each mutant of
 * test/model/mutants.ts is applied to a scratch copy of lua/ (the real files
 * are never touched), and checked by the model checker (every
 * configuration, the larger ones too, until one breaks an invariant: a
 * shortest counterexample; not the mutants it cannot reach, marked
 * `outsideModel`) and by the script suites (the specs of
 * .mocharc.declared-keys.json, the bridge suite and the exact-replies
 * test, with TEST_LUA_DIR naming the copy, stopping at their first
 * failure; first on an unmutated copy, which must pass). A kill by the
 * suites counts once the test that failed passes when run again alone on
 * the unmutated copy; else the machine failed it, and the mutant is
 * unjudged (counted as a survivor). Prints each mutant's verdict (with the
 * test that killed it) and the score, over the mutants not marked
 * equivalent, of the checker, of the suites, and of both.
 *   node --import tsx test/model/mutate.ts [--only <id>,<id>] [--no-suites] [--no-checker] [--suites-on-survivors]
 * With --suites-on-survivors the suites run only for the mutants the checker
 * did not kill: the score of both in a fraction of the time (the suites'
 * own score is then not known).
 * CPU-heavy: run it under `nice`.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
// @ts-expect-error: a plain .mjs build script, without declarations
import { checkLuaContracts } from '../../scripts/lua-contracts.mjs';
import { buildLuaSources } from '../support/lua-build.js';
import { check, type Violation } from './checker.js';
import { CI, LARGER } from './configs.js';
import { MUTANTS, type Mutant } from './mutants.js';
import { startModelServer } from './server.js';
import { virtualClockScripts } from './virtual-clock.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const { values } = parseArgs({
  options: {
    only: { type: 'string' },
    'no-suites': { type: 'boolean' },
    'no-checker': { type: 'boolean' },
    'suites-on-survivors': { type: 'boolean' },
  },
});
const only = values.only?.split(',');
const mutants = MUTANTS.filter((m) => only === undefined || only.includes(m.id));
/**
 * Beside the script suites: bridge mode next to old processes (the two-key
 * mirror only they see), and a clock that stands on a deadline.
 */
const MORE_SUITES = ['test/integration/bridge.test.ts', 'test/model/exact-replies.test.ts'];
/** A mutant's states per configuration at most: its counterexamples are short, and a survivor must not take the whole graph's time. */
const MAX_STATES = Number(process.env.MODEL_MUTANT_MAX_STATES ?? 6000);

/** A scratch directory holding a copy of lua/ (as `<dir>/lua`). */
function copyOfLua(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cpSync(join(root, 'lua'), join(dir, 'lua'), { recursive: true });
  return dir;
}

/** The copy of lua/ with the mutant applied; throws when its line is not in the file exactly once (a stale list). */
function mutated(m: Mutant): string {
  const dir = copyOfLua('rwlock-mutant-');
  const file = join(dir, 'lua', m.file);
  const lines = readFileSync(file, 'utf8').split('\n');
  const at = lines.flatMap((line, i) => (line.trim() === m.original ? [i] : []));
  if (at.length !== 1) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`mutant ${m.id}: lua/${m.file} has the line ${JSON.stringify(m.original)} ${at.length} times, not once`);
  }
  const line = lines[at[0]!]!;
  lines[at[0]!] = line.slice(0, line.length - line.trimStart().length) + m.replacement;
  writeFileSync(file, lines.join('\n'));
  return dir;
}

interface Verdict {
  mutant: Mutant;
  build?: string;
  checker?: { config: string; violation: Violation } | 'survived';
  /** 'unjudged': the test that failed on the mutant failed on the real scripts too, when run again alone. */
  suites?: 'killed' | 'survived' | 'unjudged';
  /** The first test of the suites that failed on the mutant. */
  killedBy?: string;
  seconds: number;
}

/**
 * The tests left out of the mutants' suites: 10,000 leases renewed or read
 * with no command over 1 ms. Their bounds are the machine's time, which a
 * loaded machine misses whatever the scripts; the renewal budget's own test
 * (a call at 0 µs ends after one lease) judges a script's budget check.
 */
const SERVER_TIME_TESTS = 'no library command over 1 ms';

/** A failed test of the suites: its full title, and the first line of its message. */
interface Failure {
  title: string;
  message: string;
}

/**
 * Runs the script suites on the scripts of `lua` (a copy of lua/, mutated
 * or not), stopping at the first failure, or only the tests whose titles
 * hold `grep`; the test that failed, or undefined when all passed.
 */
function runSuites(lua: string, grep?: string): Failure | undefined {
  const report = join(mkdtempSync(join(tmpdir(), 'rwlock-suites-')), 'report.json');
  try {
    const run = spawnSync(
      'npx',
      [
        'mocha',
        '--config',
        '.mocharc.declared-keys.json',
        '--bail',
        // One test, or all but those that judge the server's time by SLOWLOG: machine time, not a script's outcome.
        ...(grep === undefined ? ['--grep', SERVER_TIME_TESTS, '--invert'] : ['--fgrep', grep]),
        '--reporter',
        'json',
        '--reporter-option',
        `output=${report}`,
        ...MORE_SUITES,
      ],
      { cwd: root, env: { ...process.env, TEST_DECLARED_KEYS: '1', TEST_LUA_DIR: lua }, stdio: 'ignore' },
    );
    if (run.status === 0) return undefined;
    let failures: { fullTitle: string; err: { message?: string } }[] = [];
    try {
      failures = JSON.parse(readFileSync(report, 'utf8')).failures;
    } catch {
      // no report: the run ended before mocha wrote one
    }
    const first = failures[0];
    if (first) return { title: first.fullTitle, message: String(first.err.message).split('\n')[0]!.slice(0, 200) };
    return { title: '', message: `mocha ended with ${run.signal ?? `exit code ${run.status}`}` };
  } finally {
    rmSync(dirname(report), { recursive: true, force: true });
  }
}

/** An unmutated copy of lua/: the suites run on the scripts built the same way as a mutant's. */
const realLua = copyOfLua('rwlock-unmutated-');
process.on('exit', () => rmSync(realLua, { recursive: true, force: true }));

const started = performance.now();
// The suites must pass on the real scripts first: a suite that fails on this machine anyway would count as a kill.
if (!values['no-suites']) {
  const failed = runSuites(join(realLua, 'lua'));
  if (failed) {
    console.error(
      `the script suites fail on the unmutated scripts, so no mutant can be judged by them: ${failed.title}: ${failed.message}`,
    );
    process.exit(2);
  }
}
const verdicts: Verdict[] = [];
const model = values['no-checker'] ? undefined : await startModelServer();
try {
  for (const m of mutants) {
    const t0 = performance.now();
    const dir = mutated(m);
    const verdict: Verdict = { mutant: m, seconds: 0 };
    try {
      const problems = checkLuaContracts(join(dir, 'lua')) as string[];
      if (problems.length > 0) verdict.build = problems.join('; ');
      else {
        if (model && !m.outsideModel) {
          const scripts = virtualClockScripts(buildLuaSources(join(dir, 'lua')));
          verdict.checker = 'survived';
          for (const config of [...CI, ...LARGER]) {
            const r = await check(config, { redis: model.redis, scripts, maxStates: MAX_STATES });
            if (r.violation) {
              verdict.checker = { config: config.name, violation: r.violation };
              break;
            }
          }
        }
        const killedByChecker = verdict.checker !== undefined && verdict.checker !== 'survived';
        if (!values['no-suites'] && !(values['suites-on-survivors'] && killedByChecker)) {
          const failed = runSuites(join(dir, 'lua'));
          if (failed === undefined) verdict.suites = 'survived';
          else {
            // A kill counts once the test that failed passes on the real scripts: else the machine failed it.
            const again = failed.title === '' ? failed : runSuites(join(realLua, 'lua'), failed.title);
            verdict.suites = again === undefined ? 'killed' : 'unjudged';
            verdict.killedBy = `${failed.title}: ${failed.message}`;
          }
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    verdict.seconds = (performance.now() - t0) / 1000;
    verdicts.push(verdict);
    const c = verdict.checker;
    const notRun = m.outsideModel && model ? `checker: not run (${m.outsideModel})` : '';
    const checker =
      c === undefined ? notRun : c === 'survived' ? 'checker: survived' : `checker: killed in "${c.config}" (${c.violation.kind})`;
    const suites = verdict.suites === undefined ? '' : `suites: ${verdict.suites}${verdict.killedBy ? ` by "${verdict.killedBy}"` : ''}`;
    console.log(
      `${m.id} [${m.class}]${m.equivalent ? ' (equivalent)' : ''}: ${verdict.build ? `killed by the build: ${verdict.build}` : [checker, suites].filter(Boolean).join(', ')} (${verdict.seconds.toFixed(0)} s)`,
    );
    if (c !== undefined && c !== 'survived') console.log(`    ${c.violation.message}\n      ${c.violation.trace.join('\n      ')}`);
  }
} finally {
  await model?.close();
}

const scored = verdicts.filter((v) => !v.mutant.equivalent);
const killedBy = (f: (v: Verdict) => boolean) => scored.filter((v) => v.build !== undefined || f(v)).length;
const score = (name: string, n: number) =>
  console.log(`${name}: ${n} of ${scored.length} killed (${((100 * n) / Math.max(1, scored.length)).toFixed(0)} %)`);
console.log(
  `\n${verdicts.length} mutants, ${verdicts.length - scored.length} equivalent, ${((performance.now() - started) / 1000).toFixed(0)} s`,
);
if (!values['no-checker'])
  score(
    'model checker',
    killedBy((v) => v.checker !== undefined && v.checker !== 'survived'),
  );
if (!values['no-suites'] && !values['suites-on-survivors'])
  score(
    'script suites',
    killedBy((v) => v.suites === 'killed'),
  );
if (!values['no-checker'] && !values['no-suites']) {
  score(
    'both',
    killedBy((v) => (v.checker !== undefined && v.checker !== 'survived') || v.suites === 'killed'),
  );
}
const survivors = scored.filter(
  (v) => v.build === undefined && (v.checker === undefined || v.checker === 'survived') && v.suites !== 'killed',
);
if (survivors.length > 0) console.log(`survivors: ${survivors.map((v) => v.mutant.id).join(', ')}`);
process.exitCode = survivors.length > 0 ? 1 : 0;
