// The demo (`npm run demo`, `redis-rwlock demo`) run as a user runs it: a
// separate process, against the shared standalone server and Cluster, and on
// its own embedded Cluster; to its end and stopped by SIGINT. Each run must
// exit as documented, see no half-built value, and leave no lock key and no
// redis-server process behind.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { type Cluster, Redis } from 'ioredis';
import type { DemoSummary } from '../../src/demo/index.js';
import { isPortFree, type RedisServerHandle, startRedisServer } from '../../src/testing/index.js';
import { forEachTopology, type TopologyContext } from '../setup/topologies.js';
import { bundled } from '../support/bundled.js';
import { eventually } from '../support/eventually.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DEMO = path.join(ROOT, 'src/demo/main.ts');
const CLI = path.join(ROOT, 'src/cli/index.ts');
/** Lighter than the defaults: the test machine is shared. */
const LIGHT = ['--processes', '3', '--readers', '4'];

interface DemoRun {
  readonly pid: number;
  /** Human output so far (stderr, since --json puts the summary alone on stdout). */
  readonly stderr: () => string;
  readonly exited: Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
    summary: DemoSummary | undefined;
    stdout: string;
    stderr: string;
  }>;
  kill(signal: NodeJS.Signals): void;
}

/** Runs the demo on its own (`npm run demo`), or through the CLI (`redis-rwlock demo`) with `{ cli: true }`. */
function startDemo(args: readonly string[], { cli = false, env = {} as Record<string, string> } = {}): DemoRun {
  const entry = cli ? [bundled(CLI), 'demo'] : [bundled(DEMO)];
  const child = spawn(process.execPath, [...entry, '--json', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<Awaited<DemoRun['exited']>>((resolve) =>
    child.once('exit', (code, signal) => {
      const last = stdout.trim().split('\n').pop();
      let summary: DemoSummary | undefined;
      try {
        summary = last ? (JSON.parse(last) as DemoSummary) : undefined;
      } catch {
        summary = undefined;
      }
      resolve({ code, signal, summary, stdout, stderr });
    }),
  );
  return { pid: child.pid!, stderr: () => stderr, exited, kill: (signal) => child.kill(signal) };
}

/**
 * Waits until a progress line shows reads served and a rebuild done: a stop before that would leave the summary's
 * "the workers did something" checks nothing to see (the first progress line can still say "reads 0").
 */
async function workersAtWork(run: DemoRun): Promise<void> {
  const atWork = (): boolean =>
    [...run.stderr().matchAll(/^\[ +\d+\.\d s\] reads ([\d,]+), rebuilds ([\d,]+),/gm)].some((m) => m[1] !== '0' && m[2] !== '0');
  await eventually('a progress line with reads and rebuilds done', atWork, 60_000, 50);
}

/** Temp dirs of redis-server processes started by `pid` (the harness names them `redis-rwlock-<pid>-*`). */
function serverDirsOf(pid: number): string[] {
  return readdirSync(os.tmpdir())
    .filter((name) => name.startsWith(`redis-rwlock-${pid}-`))
    .map((name) => path.join(os.tmpdir(), name));
}

/** Live processes whose working directory is one of the harness dirs of `pid` (every harness redis-server runs in its dir). */
function serverProcessesOf(pid: number): number[] {
  const prefix = path.join(os.tmpdir(), `redis-rwlock-${pid}-`);
  const found: number[] = [];
  if (!existsSync('/proc/self/cwd')) return found; // not Linux: the temp dirs and ports are checked still
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/cwd`).startsWith(prefix)) found.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

/** Ports named in the summary's description of the embedded cluster. */
function embeddedPorts(summary: DemoSummary): number[] {
  return [...summary.redis.matchAll(/\b(\d{4,5})\b/g)].map((m) => Number(m[1]));
}

async function demoKeys(ctx: TopologyContext): Promise<string[]> {
  if (ctx.kind === 'cluster') {
    const client: Cluster = ctx.client();
    return (await Promise.all(client.nodes('master').map((n) => n.keys('rwlock*')))).flat();
  }
  const client: Redis = ctx.client();
  return client.keys('rwlock*');
}

function targetArgs(ctx: TopologyContext): string[] {
  return ctx.kind === 'cluster'
    ? ['--cluster', ctx.cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',')]
    : ['--redis', `redis://${ctx.server.host}:${ctx.server.port}`];
}

function expectCleanSummary(summary: DemoSummary | undefined, stderr: string): asserts summary is DemoSummary {
  expect(summary, `no JSON summary; the demo said:\n${stderr}`).to.not.equal(undefined);
  expect(summary!.halfBuilt, 'half-built reads').to.equal(0);
  expect(summary!.errors, `errors: ${summary!.notes.join('; ')}`).to.equal(0);
  expect(summary!.lostWorkers).to.equal(0);
  expect(summary!.locksLeft, 'lock keys left').to.equal(0);
  expect(summary!.valuesWhole).to.equal(summary!.values);
  expect(summary!.reads).to.be.greaterThan(0);
  expect(summary!.rebuilds).to.be.greaterThan(0);
  // Every read and rebuild took a lock (and the warm-up one read per value and worker): the workers' stats() agree.
  const locks = summary!.lockStats!;
  expect(locks, "the workers' LockClient.stats()").to.not.equal(null);
  expect(locks.acquires).to.be.at.least(summary!.reads + summary!.rebuilds);
  expect(locks.releases).to.equal(locks.acquires);
  expect(locks).to.include({ heldLeases: 0, losses: 0, timeouts: 0, failures: 0 });
  expect(locks.waits).to.be.at.least(summary!.readerWaits + summary!.writerWaits);
  expect(locks.waitTime.counts.reduce((a, b) => a + b, 0)).to.equal(locks.acquires);
}

describe('the demo', function () {
  this.timeout(120_000);

  it('refuses a bad command line with exit code 2 and the usage', async () => {
    const run = startDemo(['--duration', 'soon']);
    const { code, stderr } = await run.exited;
    expect(code).to.equal(2);
    expect(stderr).to.include('--duration: expected a time');
    expect(stderr).to.include('Usage: redis-rwlock demo');
  });

  it('is a command of the CLI: redis-rwlock demo --help', async () => {
    const run = startDemo(['--help'], { cli: true });
    const { code, stdout } = await run.exited;
    expect(code).to.equal(0);
    expect(stdout).to.include('Usage: redis-rwlock demo');
    expect(stdout).to.include('--without-locks');
  });

  describe('on an embedded Redis Cluster', () => {
    it('runs to its end, sees no half-built value, and removes its servers', async () => {
      const run = startDemo(['--duration', '3s', ...LIGHT]);
      const { code, summary, stderr } = await run.exited;
      expectCleanSummary(summary, stderr);
      expect(code, stderr).to.equal(0);
      expect(summary.ok).to.equal(true);
      expect(summary.interrupted).to.equal(false);
      expect(summary.redis).to.match(/^embedded Redis Cluster, 3 masters \+ 3 replicas/);
      expect(stderr).to.include('no reader ever saw a half-built value');
      const ports = embeddedPorts(summary);
      expect(ports).to.have.length(6);
      expect(serverProcessesOf(run.pid)).to.deep.equal([]);
      expect(serverDirsOf(run.pid)).to.deep.equal([]);
      for (const port of ports) expect(await isPortFree(port), `port ${port} free again`).to.equal(true);
    });

    it('stops cleanly on SIGINT: every lock released, every server stopped, exit code 130', async () => {
      const run = startDemo(['--duration', '60s', ...LIGHT]);
      await workersAtWork(run);
      expect(serverProcessesOf(run.pid)).to.have.length(6);
      run.kill('SIGINT');
      const { code, summary, stderr } = await run.exited;
      expectCleanSummary(summary, stderr);
      expect(code, stderr).to.equal(130);
      expect(summary.interrupted).to.equal(true);
      expect(summary.elapsedMs).to.be.below(30_000);
      expect(stderr).to.include('SIGINT: stopping');
      expect(serverProcessesOf(run.pid)).to.deep.equal([]);
      expect(serverDirsOf(run.pid)).to.deep.equal([]);
      for (const port of embeddedPorts(summary)) expect(await isPortFree(port), `port ${port} free again`).to.equal(true);
    });

    it('a second Ctrl-C forces the stop: workers killed, every server stopped, exit code 130', async () => {
      const run = startDemo(['--duration', '60s', ...LIGHT]);
      await workersAtWork(run);
      run.kill('SIGINT');
      await eventually('the demo to say it stops', () => run.stderr().includes('SIGINT: stopping'), 10_000, 20);
      run.kill('SIGINT');
      const { code, stderr } = await run.exited;
      expect(code, stderr).to.equal(130);
      expect(stderr).to.include('SIGINT again: killing the workers and stopping the servers');
      expect(serverProcessesOf(run.pid)).to.deep.equal([]);
      expect(serverDirsOf(run.pid)).to.deep.equal([]);
    });
  });

  forEachTopology('against servers given on the command line', (ctx) => {
    it('runs to its end, sees no half-built value, and leaves no key behind', async () => {
      const run = startDemo([...targetArgs(ctx), '--duration', '3s', ...LIGHT]);
      const { code, summary, stderr } = await run.exited;
      expectCleanSummary(summary, stderr);
      expect(code, stderr).to.equal(0);
      expect(summary.redis).to.include(ctx.kind === 'cluster' ? 'Redis Cluster 127.0.0.1:' : 'Redis server redis://127.0.0.1:');
      expect(await demoKeys(ctx)).to.deep.equal([]);
      expect(serverDirsOf(run.pid)).to.deep.equal([]); // it started no server of its own
    });

    if (ctx.kind === 'standalone') {
      it('runs the same through the CLI (redis-rwlock demo), whose workers are the CLI run again', async () => {
        const run = startDemo([...targetArgs(ctx), '--duration', '2s', ...LIGHT], { cli: true });
        const { code, summary, stderr } = await run.exited;
        expectCleanSummary(summary, stderr);
        expect(code, stderr).to.equal(0);
        expect(summary.processes).to.equal(3);
        expect(await demoKeys(ctx)).to.deep.equal([]);
      });
    }

    if (ctx.kind === 'standalone') {
      it('stops cleanly on SIGTERM too, with exit code 143 (128 + 15)', async () => {
        const run = startDemo([...targetArgs(ctx), '--duration', '60s', ...LIGHT]);
        await workersAtWork(run);
        run.kill('SIGTERM');
        const { code, summary, stderr } = await run.exited;
        expectCleanSummary(summary, stderr);
        expect(code, stderr).to.equal(143);
        expect(summary.stoppedBy).to.equal('SIGTERM');
        expect(await demoKeys(ctx)).to.deep.equal([]);
      });
    }

    it('releases every lock when stopped by SIGINT', async () => {
      const run = startDemo([...targetArgs(ctx), '--duration', '60s', ...LIGHT]);
      await workersAtWork(run);
      run.kill('SIGINT');
      const { code, summary, stderr } = await run.exited;
      expectCleanSummary(summary, stderr);
      expect(code, stderr).to.equal(130);
      expect(await demoKeys(ctx)).to.deep.equal([]);
    });

    it('catches half-built values when run --without-locks (the check is not vacuous), and exits 1', async () => {
      const run = startDemo([...targetArgs(ctx), '--duration', '2s', '--without-locks', ...LIGHT]);
      const { code, summary, stderr } = await run.exited;
      expect(summary, stderr).to.not.equal(undefined);
      expect(code).to.equal(1);
      expect(summary!.ok).to.equal(false);
      expect(summary!.halfBuilt).to.be.greaterThan(0);
      expect(summary!.notes.join('\n')).to.match(/half-built read of cache:\{report-\d\}: meta says version \d+, parts are versions/);
      expect(stderr).to.include('readers saw half-built values (expected: --without-locks)');
    });
  });

  describe('over TLS, as an ACL user limited to its prefix', () => {
    const PASSWORD = 'demo-pw-51c2';
    let server: RedisServerHandle;
    before(async () => {
      server = await startRedisServer({
        tls: true,
        users: [{ name: 'demo', password: PASSWORD, rules: ['~rwlock-demo*', '&rwlock-demo*', '+@all'] }],
      });
    });
    after(() => server.stop());

    it('runs with rediss://, --tls-ca, --user and $REDIS_PASSWORD, passes its checks, and never shows the password', async () => {
      const url = server.tls!.url;
      const run = startDemo(['--redis', url, '--tls-ca', server.tls!.caFile, '--user', 'demo', '--duration', '2s', ...LIGHT], {
        cli: true,
        env: { REDIS_PASSWORD: PASSWORD },
      });
      const { code, summary, stdout, stderr } = await run.exited;
      expectCleanSummary(summary, stderr);
      expect(code, stderr).to.equal(0);
      expect(summary.redis).to.include(url);
      expect(stdout + stderr).to.not.include(PASSWORD);
      const admin = new Redis({ host: '127.0.0.1', port: server.port });
      expect(await admin.keys('rwlock-demo:{*')).to.deep.equal([]); // no lock left
      admin.disconnect();
    });
  });
});
