/**
 * test/runtimes/run.ts on its own failure paths (review 43): a run that
 * checked no client must not pass.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';

const ROOT = join(import.meta.dirname, '..', '..');
const BUN = join(ROOT, 'node_modules', '.bin', 'bun');

describe('the runtime runner (test/runtimes/run.ts)', () => {
  it('fails a run whose RUNTIME_CLIENTS names no client it knows, rather than passing on no check', function () {
    if (!existsSync(BUN) || !existsSync(join(ROOT, 'dist', 'cjs', 'index.js'))) this.skip(); // needs Bun and the built package
    this.timeout(60_000);
    const run = spawnSync(BUN, ['test/runtimes/run.ts'], {
      cwd: ROOT,
      env: { ...process.env, RUNTIME_CLIENTS: 'node-redis', RUNTIME_TOPOLOGIES: 'server' },
      encoding: 'utf8',
      timeout: 55_000,
    });
    expect(run.status, run.stdout + run.stderr).to.not.equal(0);
    expect(run.stdout + run.stderr).to.contain('node-redis');
  });
});
