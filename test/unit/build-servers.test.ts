/**
 * scripts/build-servers.sh on its failure paths (review 43), with a
 * throw-away cache and a mirror nobody answers on: nothing is built and no
 * network is reached.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'build-servers.sh');
/** apt tries a mirror that does not answer again, for seconds: once is enough here (APT_CONFIG is apt's own). */
function deadMirror(cache: string): NodeJS.ProcessEnv {
  const config = join(cache, 'apt.conf');
  writeFileSync(config, 'Acquire::Retries "0";\n');
  return { ...process.env, REDIS_RWLOCK_SERVERS: cache, DEBIAN_MIRROR: 'http://127.0.0.1:9/debian', APT_CONFIG: config };
}
const hasApt = spawnSync('sh', ['-c', 'command -v apt-get && command -v dpkg-source && command -v cc && command -v make']).status === 0;

// Registered only where the script can run at all (Debian's tools): a skipped test would read as a pass.
if (hasApt)
  describe('scripts/build-servers.sh', () => {
    it('with the mirror unreachable, says so, not that the version was replaced', function () {
      this.timeout(120_000);
      const cache = mkdtempSync(join(tmpdir(), 'rwlock-servers-'));
      try {
        const run = spawnSync('bash', [SCRIPT, 'redis8'], {
          env: deadMirror(cache),
          encoding: 'utf8',
          timeout: 110_000,
        });
        expect(run.status, run.stderr).to.equal(1);
        expect(run.stderr).to.not.contain('a newer upload may have replaced it');
        expect(run.stderr).to.match(/could not fetch the trixie and sid source indexes from http:\/\/127\.0\.0\.1:9\/debian/);
      } finally {
        rmSync(cache, { recursive: true, force: true });
      }
    });

    it('two runs over a broken cached binary build one at a time (the second waits for the lock)', async function () {
      this.timeout(120_000);
      const cache = mkdtempSync(join(tmpdir(), 'rwlock-servers-'));
      try {
        // Executable, but no server: an interrupted copy, or a build for another machine.
        mkdirSync(join(cache, 'redis8-8.0.6-3', 'bin'), { recursive: true });
        writeFileSync(join(cache, 'redis8-8.0.6-3', 'bin', 'redis-server'), 'not a server');
        chmodSync(join(cache, 'redis8-8.0.6-3', 'bin', 'redis-server'), 0o755);
        const env = deadMirror(cache);
        const run = () =>
          new Promise<string>((resolve) => {
            const child = spawn('bash', [SCRIPT, 'redis8'], { env });
            let stderr = '';
            child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
            child.on('close', () => resolve(stderr));
          });
        const first = run();
        await new Promise((resolve) => setTimeout(resolve, 500));
        const second = await run();
        await first;
        // Not the other run's apt lock or build directory in its way: its own fetch, failing on the mirror.
        expect(second).to.match(/could not fetch the trixie and sid source indexes/);
      } finally {
        rmSync(cache, { recursive: true, force: true });
      }
    });
  });
