/**
 * .ci/run's `npm test` on Redis 7.0 with `TEST_SERVER=valkey npm test` beside
 * it (scripts/beside.sh): .ci/run's own lines of that step, run with a fake
 * `npm` on PATH: each run a shell under "npm" and a process under that shell
 * (as npm runs `sh -c "mocha && ..."`, and mocha its test process and
 * servers). Whichever way the step ends, no process of either run may
 * outlive it: a run left behind would go on starting servers beside the next
 * CI step for minutes.
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';

const ROOT = join(import.meta.dirname, '..', '..');

/** This process's environment without the switches of the test run it is in (TEST_SERVER=valkey would make both fake runs Valkey's). */
function outsideEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of Object.keys(env)) if (name.startsWith('TEST_')) delete env[name];
  return env;
}

/** .ci/run's lines from `source scripts/beside.sh` to `joined`, as a script of their own. */
function sideBySideStep(): string {
  const lines = readFileSync(join(ROOT, '.ci', 'run'), 'utf8').split('\n');
  const from = lines.findIndex((l) => l.startsWith('source scripts/beside.sh'));
  const to = lines.findIndex((l) => l.startsWith('joined '));
  expect(from, '.ci/run sources scripts/beside.sh').to.be.at.least(0);
  expect(to, '.ci/run joins the run beside').to.be.greaterThan(from);
  const step = lines.find((l) => l.startsWith('step() '));
  expect(step, ".ci/run's step timer").to.not.equal(undefined);
  return ['set -euo pipefail', `cd ${JSON.stringify(ROOT)}`, step!, ...lines.slice(from, to + 1)].join('\n');
}

/**
 * `npm test` as the fake npm plays it, by `TEST_SERVER`: FAKE_REDIS or FAKE_VALKEY is
 * `pass`, `fail` (after 300 ms) or `hang` (60 s). It prints a line, then runs a shell
 * (its script's) that runs `sleep`, whose pid it records in FAKE_PIDS.
 */
const FAKE_NPM = `#!/bin/sh
if [ -n "\${TEST_SERVER:-}" ]; then how=$FAKE_VALKEY; else how=$FAKE_REDIS; fi
echo "fake npm test on \${TEST_SERVER:-redis}: $how"
case $how in pass) secs=0.3 ;; fail) secs=0.3 ;; *) secs=60 ;; esac
sh -c 'sleep "$1" & echo $! >>"$FAKE_PIDS"; wait $!' sh "$secs"
[ "$how" != fail ]
`;

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Alive and not a zombie (a container's init may not reap orphans at once). */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

async function settle(pids: () => number[]): Promise<number[]> {
  // A process signalled as the script ends takes a moment to go.
  for (let i = 0; i < 20 && pids().some(alive); i++) await new Promise((resolve) => setTimeout(resolve, 50));
  return pids().filter(alive);
}

describe(".ci/run's npm test beside npm test on Valkey 8 (scripts/beside.sh)", function () {
  this.timeout(20_000);
  let dir: string;
  let pidsFile: string;
  const pids = (): number[] =>
    existsSync(pidsFile)
      ? readFileSync(pidsFile, 'utf8')
          .split('\n')
          .filter((l) => l !== '')
          .map(Number)
      : [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rwlock-side-by-side-'));
    pidsFile = join(dir, 'pids');
    writeFileSync(join(dir, 'npm'), FAKE_NPM);
    chmodSync(join(dir, 'npm'), 0o755);
  });
  afterEach(() => {
    for (const pid of pids()) {
      try {
        process.kill(pid, 'SIGKILL'); // what a failing case left behind: this test's own processes
      } catch {
        // gone
      }
    }
    rmSync(dir, { recursive: true, force: true });
  });

  /** Runs the step; `onStart` may signal its process group (as a CI runner stops a job) once both runs are under way. */
  function run(redis: string, valkey: string, onStart?: (pid: number) => void): Promise<Ended> {
    const started = performance.now();
    const child = spawn('bash', ['-c', sideBySideStep()], {
      detached: true,
      env: { ...outsideEnv(), PATH: `${dir}:${process.env.PATH}`, FAKE_REDIS: redis, FAKE_VALKEY: valkey, FAKE_PIDS: pidsFile },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    if (onStart) {
      const poll = setInterval(() => {
        if (pids().length === 2) {
          clearInterval(poll);
          onStart(child.pid!);
        }
      }, 20);
      child.on('close', () => clearInterval(poll));
    }
    // Its end, not its pipes' (a process left behind holds them open); then what is in them by the next moment.
    const closed = new Promise((resolve) => child.on('close', resolve));
    return new Promise((resolve) =>
      child.on('exit', (code, signal) => {
        const ms = performance.now() - started;
        void Promise.race([closed, new Promise((r) => setTimeout(r, 500))]).then(() => resolve({ code, signal, stdout, stderr, ms }));
      }),
    );
  }

  it('both pass: exits 0, the Valkey run printed after the Redis one', async () => {
    const ended = await run('pass', 'pass');
    expect(ended.code, ended.stderr).to.equal(0);
    expect(ended.stdout).to.match(/on redis: pass[\s\S]*--- npm test on Valkey 8 ---\n[\s\S]*on valkey: pass/);
  });

  it('the Valkey run fails: exits 1 once both ended, with its output', async () => {
    const ended = await run('pass', 'fail');
    expect(ended.code).to.equal(1);
    expect(ended.stdout).to.contain('on valkey: fail');
    expect(ended.stderr).to.contain('npm test on Valkey 8 failed');
    expect(await settle(pids), 'processes left running').to.deep.equal([]);
  });

  it('the Redis run fails while the Valkey run goes on: exits 1 at once, and stops every process of the Valkey run', async () => {
    const ended = await run('fail', 'hang');
    expect(await settle(pids), 'processes left running').to.deep.equal([]);
    expect(ended.code).to.equal(1);
    expect(ended.ms, 'not waiting for the Valkey run').to.be.below(10_000);
    expect(ended.stdout, 'what the Valkey run printed').to.contain('on valkey: hang');
  });

  it('stopped by SIGTERM to its process group while both run: no process of either is left', async () => {
    const ended = await run('hang', 'hang', (pid) => process.kill(-pid, 'SIGTERM'));
    expect(await settle(pids), 'processes left running').to.deep.equal([]);
    expect(ended.code === 0, 'a stopped run passes').to.equal(false);
    expect(ended.ms, 'stopped, not run to its end').to.be.below(10_000);
  });
});
