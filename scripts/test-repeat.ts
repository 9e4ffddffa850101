/**
 * `npm run test:repeat -- [--times N] [--load] [--grep TEXT] <test files...>`:
 * runs the given test files N times in a row (default 10), each run a mocha
 * process of its own, and prints the tests that failed with how often. With
 * `--load`, a busy loop keeps one core busy beside the runs, as a loaded CI
 * machine does: a test that passes only on a quiet machine waits for a time
 * where it should wait for a state. Exits 1 when any run failed.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const USAGE = 'usage: npm run test:repeat -- [--times N] [--load] [--grep TEXT] <test files...>';

const { values, positionals: files } = parseArgs({
  allowPositionals: true,
  options: {
    times: { type: 'string', default: '10' },
    load: { type: 'boolean', default: false },
    grep: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const times = Number(values.times);
if (files.length === 0 || !Number.isSafeInteger(times) || times < 1) {
  console.error(`test:repeat: give the test files, and --times a whole number of at least 1\n${USAGE}`);
  process.exit(2);
}

/** What mocha's json reporter writes: the failures are all this reads. */
interface MochaReport {
  stats: { passes: number; failures: number; duration: number };
  failures: { fullTitle: string; err: { message?: string } }[];
}

const dir = mkdtempSync(join(tmpdir(), 'rwlock-repeat-'));
const hog: ChildProcess | undefined = values.load ? spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }) : undefined;
const failed = new Map<string, { count: number; message: string }>();
let failedRuns = 0;
try {
  for (let run = 1; run <= times; run++) {
    const output = join(dir, `run-${run}.json`);
    // .mocharc.json names no files: these alone run, with the suite's hooks and options.
    const args = ['mocha', '--reporter', 'json', '--reporter-option', `output=${output}`];
    if (values.grep !== undefined) args.push('--grep', values.grep);
    const code = await new Promise<number>((resolve) => {
      spawn('npx', [...args, ...files], { stdio: ['ignore', 'ignore', 'inherit'] }).on('exit', (c) => resolve(c ?? 1));
    });
    let report: MochaReport;
    try {
      report = JSON.parse(readFileSync(output, 'utf8')) as MochaReport;
    } catch {
      console.error(`run ${run}: mocha exited ${code} without a report`);
      failedRuns++;
      continue;
    }
    const { passes, failures, duration } = report.stats;
    console.log(`run ${run}/${times}: ${passes} passing, ${failures} failing, ${(duration / 1000).toFixed(1)} s`);
    if (failures > 0 || code !== 0) failedRuns++;
    for (const f of report.failures) {
      const seen = failed.get(f.fullTitle) ?? { count: 0, message: (f.err.message ?? '').split('\n')[0]! };
      seen.count++;
      failed.set(f.fullTitle, seen);
    }
  }
} finally {
  hog?.kill();
  rmSync(dir, { recursive: true, force: true });
}
console.log(`\n${times - failedRuns} of ${times} runs passed${values.load ? ', with one core kept busy' : ''}`);
for (const [title, { count, message }] of failed) console.log(`  ${count}x ${title}\n     ${message}`);
process.exit(failedRuns > 0 ? 1 : 0);
