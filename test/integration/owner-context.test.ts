import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { forEachTopology } from '../setup/topologies.js';
import { bundled } from '../support/bundled.js';
import { targetOf } from '../support/targets.js';

const WORKER = fileURLToPath(new URL('../workers/promise-tracking-worker.ts', import.meta.url));

interface Tracking {
  before: boolean;
  reentrant: boolean;
  after: boolean;
}

function runWorker(target: object): Promise<Tracking> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bundled(WORKER)], {
      env: { ...process.env, RWLOCK_TARGET: JSON.stringify(target) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    // A worker that never ends would keep mocha from ending: stop it before the test's timeout.
    const stop = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('exit', (code, signal) => {
      clearTimeout(stop);
      if (code === 0) resolve(JSON.parse(out.trim().split('\n').pop()!));
      else reject(new Error(`worker exited ${code ?? signal}: ${err}`));
    });
  });
}

forEachTopology('withRead/withWrite and the rest of the process', (ctx) => {
  // In a process of its own: another suite's AsyncLocalStorage (OpenTelemetry's) would track promises anyway.
  it('leaves no promise tracking running once the calls have returned (Node 20 and 22 ran async_hooks on every promise for good)', async () => {
    const tracking = await runWorker(targetOf(ctx));
    expect(tracking.before, 'the probe: a fresh process tracks no promise').to.equal(false);
    expect(tracking.reentrant, 'a nested call inside the function is still its owner').to.equal(true);
    expect(tracking.after, 'promises tracked after the calls returned').to.equal(false);
  });
});
