// `npm run examples`: runs every examples/*.ts as a user would (`npx tsx
// examples/<name>.ts <redis-url>`), each in its own process, against a
// throw-away redis-server started by redis-rwlock/testing (flushed between
// examples). An example passes when it exits with code 0 within the time
// limit; the run fails if any example fails. Examples that need a Cluster
// start their own with the same helper.
//
//   npm run examples                  # all of them
//   npm run examples -- fencing       # those whose file name contains "fencing"
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedisServer } from '../src/testing/index.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const EXAMPLES = path.join(ROOT, 'examples');
const TIME_LIMIT_MS = 120_000;

interface Result {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly output: string;
  readonly ms: number;
  readonly timedOut: boolean;
}

function runExample(file: string, url: string): Promise<Result> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file, url], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGINT'); // lets the example's servers be stopped; SIGKILL follows if that hangs
      setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
    }, TIME_LIMIT_MS);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output, ms: performance.now() - started, timedOut });
    });
  });
}

const filters = process.argv.slice(2);
const files = readdirSync(EXAMPLES)
  .filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts'))
  .filter((name) => filters.length === 0 || filters.some((f) => name.includes(f)))
  .sort();
if (files.length === 0) {
  console.error(`no example in examples/ matches ${filters.join(', ') || '*.ts'}`);
  process.exit(1);
}

const server = await startRedisServer();
console.log(`Running ${files.length} example${files.length === 1 ? '' : 's'} against a throw-away redis-server at ${server.url}\n`);
let failed = 0;
try {
  for (const name of files) {
    await server.flush({ scripts: true });
    const result = await runExample(path.join(EXAMPLES, name), server.url);
    const ok = result.code === 0 && !result.timedOut;
    if (!ok) failed++;
    const why = result.timedOut
      ? ` (no exit within ${TIME_LIMIT_MS / 1000} s)`
      : result.code === 0
        ? ''
        : ` (exit ${result.code ?? result.signal})`;
    console.log(`${ok ? '✔' : '✘'} examples/${name} ${(result.ms / 1000).toFixed(1)} s${why}`);
    const indented = result.output.trimEnd().replace(/^/gm, '    ');
    if (indented.trim() !== '') console.log(indented);
  }
} finally {
  await server.stop();
}
console.log(`\n${files.length - failed} of ${files.length} examples passed`);
process.exitCode = failed === 0 ? 0 : 1;
