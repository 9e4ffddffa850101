import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { type CliIO, EXIT } from '../../src/cli/command.js';
import { CONNECT_TIMEOUT_MS } from '../../src/cli/connect.js';
import { shortToken } from '../../src/cli/format.js';
import { main } from '../../src/cli/main.js';
import { LockClient, LockLostError } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import { forEachTopology, type TopologyContext } from '../setup/topologies.js';
import { bundled } from '../support/bundled.js';
import { eventually } from '../support/eventually.js';
import { allKeys } from '../support/mixed-workers.js';
import { OldLocker, taggedLegacyKeys } from '../support/old-scripts.js';
import { targetOf } from '../support/targets.js';

const CLI = fileURLToPath(new URL('../../src/cli/index.ts', import.meta.url));
const WORKER = fileURLToPath(new URL('../workers/mixed-worker.ts', import.meta.url));
const COMMANDS = ['inspect', 'list', 'release', 'migrate-check'];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI as its users do: a separate node process. */
function cli(args: readonly string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bundled(CLI), ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(); // not a terminal, and nothing to read
  });
}

/** The connection options for the topology under test. */
function target(ctx: TopologyContext): string[] {
  return ctx.kind === 'cluster'
    ? ['--cluster', ctx.cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',')]
    : ['--redis', `redis://${ctx.server.host}:${ctx.server.port}`];
}

const TAGGED = ['--legacy-read', '{%s}:read', '--legacy-write', '{%s}:write'];

describe('CLI without a server', function () {
  this.timeout(60_000);

  it('prints the commands and exit codes for --help, and exits 0', async () => {
    const run = await cli(['--help']);
    expect(run.code).to.equal(0);
    for (const name of COMMANDS) expect(run.stdout).to.include(name);
    expect(run.stdout).to.match(/Exit codes:[\s\S]*4\s+migrate-check/);
  });

  for (const flag of ['--version', '-v']) {
    it(`prints the package's version for ${flag}, and exits 0`, async () => {
      const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
      const run = await cli([flag]);
      expect(run.stdout).to.equal(`${version}\n`);
      expect(run.code).to.equal(0);
    });
  }

  it('prints the usage on stderr and exits 2 without a command', async () => {
    const run = await cli([]);
    expect(run.code).to.equal(EXIT.USAGE);
    expect(run.stderr).to.include('Usage: redis-rwlock <command>');
  });

  for (const name of COMMANDS) {
    it(`prints ${name} --help without connecting anywhere`, async () => {
      const run = await cli([name, '--help', '--redis', 'redis://127.0.0.1:1']);
      expect(run.code).to.equal(0);
      expect(run.stdout).to.include(`Usage: redis-rwlock ${name}`);
      expect(run.stdout).to.include('Exit codes');
      expect(run.stdout).to.include('--json');
    });
  }

  const usageErrors: [string, string[], RegExp][] = [
    ['an unknown command', ['frobnicate'], /unknown command "frobnicate"/],
    ['an unknown option', ['inspect', 'x', '--bogus'], /Unknown option '--bogus'/],
    ['a missing resource', ['inspect'], /missing <resource>/],
    ['an extra argument', ['list', 'extra'], /unexpected argument "extra"/],
    ['release without --force', ['release', 'x', '--yes'], /pass --force/],
    ['both --redis and --cluster', ['list', '--redis', 'redis://a:1', '--cluster', 'b:2'], /not both/],
    ['a bad --cluster node', ['list', '--cluster', 'host:notaport'], /not host:port/],
    ['a bad --mode', ['inspect', 'x', '--mode', 'two-key'], /--mode: must be one of/],
    ['a template without %s', ['inspect', 'x', '--mode', 'legacy', '--legacy-read', 'r'], /must contain %s/],
    ['a bad --watch-ms', ['migrate-check', '--watch-ms', 'soon'], /--watch-ms/],
  ];
  for (const [what, args, message] of usageErrors) {
    it(`exits 2 on ${what}, saying what is wrong`, async () => {
      const run = await cli([...args]);
      expect(run.code).to.equal(EXIT.USAGE);
      expect(run.stderr).to.match(message);
      expect(run.stdout).to.equal('');
    });
  }

  it('exits 1 when Redis cannot be reached, with the error as JSON under --json', async () => {
    const run = await cli(['list', '--redis', 'redis://127.0.0.1:1', '--json']);
    expect(run.code).to.equal(EXIT.FAILED);
    expect(run.stderr).to.match(/cannot connect to Redis at redis:\/\/127\.0\.0\.1:1/);
    expect(JSON.parse(run.stdout).error.message).to.match(/cannot connect/);
  });

  it(`gives up after ${CONNECT_TIMEOUT_MS / 1000} s on a server that accepts the connection and never answers`, async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket.on('error', () => undefined))).listen(0, '127.0.0.1');
    await once(silent, 'listening');
    try {
      // In-process, so the time is the CLI's own, not node's start-up.
      let stderr = '';
      const io: CliIO = { interactive: false, out: () => undefined, err: (text) => void (stderr += text), ask: async () => '' };
      const started = performance.now();
      const code = await main(['list', '--redis', `redis://127.0.0.1:${(silent.address() as AddressInfo).port}`], io);
      const ms = performance.now() - started;
      expect(code).to.equal(EXIT.FAILED);
      expect(stderr).to.match(/cannot connect to Redis at redis:\/\/127\.0\.0\.1:\d+: no answer within 5 s/);
      expect(ms, 'time to give up')
        .to.be.at.least(CONNECT_TIMEOUT_MS - 50)
        .and.below(CONNECT_TIMEOUT_MS + 1_500);
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });

  it('does not print the password of a --redis URL', async () => {
    const run = await cli(['list', '--redis', 'redis://user:s3cret@127.0.0.1:1']);
    expect(run.code).to.equal(EXIT.FAILED);
    expect(run.stderr).to.not.include('s3cret');
  });
});

forEachTopology('CLI', (ctx) => {
  let redis: RedisClient;
  let locks: LockClient;
  beforeEach(() => {
    redis = ctx.client();
    locks = new LockClient(redis);
  });
  afterEach(async () => {
    await locks.close();
  });

  describe('inspect', () => {
    it('shows a lock as LockClient.inspect() does, as a table and as JSON', async () => {
      const a = await locks.lock('cache:user:42').acquireRead();
      const b = await locks.lock('cache:user:42').acquireRead();
      const human = await cli(['inspect', 'cache:user:42', ...target(ctx)]);
      expect(human.code).to.equal(0);
      expect(human.stdout).to.match(/mode\s+read/);
      // Tokens release holds: a terminal shows enough to tell them apart, --json gives them whole.
      expect(human.stdout).to.include(shortToken(a.token)).and.to.include(shortToken(b.token));
      expect(human.stdout).to.not.include(a.token).and.to.not.include(b.token);
      expect(human.stdout).to.match(/ROLE\s+OWNER\s+HOLDS\s+LEASE LEFT/);
      const run = await cli(['inspect', 'cache:user:42', '--json', ...target(ctx)]);
      expect(run.code).to.equal(0);
      const doc = JSON.parse(run.stdout);
      const info = await locks.inspect('cache:user:42');
      expect(doc).to.include({
        layout: 'hash',
        resource: 'cache:user:42',
        key: info.key,
        mode: 'read',
        fence: info.fence,
        slot: locks.lock('cache:user:42').keys.slot,
      });
      expect(doc.readers.map((r: { owner: string }) => r.owner).sort()).to.deep.equal([a.token, b.token].sort());
      expect(doc.writer).to.equal(null);
    });

    it('exits 2 on an empty resource, a bad value as the exit codes say, naming it', async () => {
      const run = await cli(['inspect', '', ...target(ctx)]);
      expect(run.code, run.stderr).to.equal(EXIT.USAGE);
      expect(run.stderr).to.match(/^redis-rwlock inspect: resource: must be a non-empty string/);
      expect(run.stderr).to.include('redis-rwlock inspect --help');
    });

    it('shows a free lock as free, and exits 0', async () => {
      const run = await cli(['inspect', 'nothing:here', '--json', ...target(ctx)]);
      expect(run.code).to.equal(0);
      expect(JSON.parse(run.stdout)).to.include({ mode: 'free', fence: null });
    });

    it('shows the legacy keys and an old holder in legacy mode', async () => {
      const keys = taggedLegacyKeys('report:7');
      await new OldLocker(redis, keys.read, keys.write).tryWrite();
      const human = await cli(['inspect', 'report:7', '--mode', 'legacy', ...TAGGED, ...target(ctx)]);
      expect(human.code).to.equal(0);
      expect(human.stdout).to.match(/mode\s+write/);
      expect(human.stdout).to.match(/\{report:7\}:write\s+1\s+\S+\s+an old process/);
      const doc = JSON.parse((await cli(['inspect', 'report:7', '--mode', 'legacy', ...TAGGED, '--json', ...target(ctx)])).stdout);
      expect(doc.layout).to.equal('legacy');
      expect(doc.legacy).to.deep.include({ oldWriter: true, oldReadersTtlMs: 0 });
      expect(doc.legacy.write).to.include({ key: keys.write, value: '1' });
    });

    if (ctx.kind === 'cluster') {
      it('exits 1 with the CrossSlotError when the legacy keys cannot share a slot', async () => {
        const run = await cli(['inspect', 'report:7', '--mode', 'bridge', ...target(ctx)]);
        expect(run.code).to.equal(EXIT.FAILED);
        expect(run.stderr).to.include('CrossSlotError');
        expect(run.stderr).to.include('hash tag');
      });
    }
  });

  describe('list', () => {
    it('finds the locks of every mode on every master, as a table and as JSON', async () => {
      const bridge = new LockClient(redis, { mode: 'bridge', legacyKeys: taggedLegacyKeys });
      const legacy = new LockClient(redis, { mode: 'legacy', legacyKeys: taggedLegacyKeys });
      try {
        const resources = ['cache:user:1', 'cache:user:2', 'user:{9}:profile', 'orders', 'a b c'];
        const held = await Promise.all(resources.map((r, i) => (i % 2 ? locks.lock(r).acquireRead() : locks.lock(r).acquireWrite())));
        const bw = await bridge.lock('doc:1').acquireWrite();
        const lr = await legacy.lock('doc:2').acquireRead();
        const human = await cli(['list', ...target(ctx)]);
        expect(human.code).to.equal(0);
        expect(human.stdout).to.match(/^RESOURCE\s+MODE\s+WRITER\s+READERS\s+LEASE LEFT\s+WAITING\s+FENCE/);
        for (const r of [...resources, 'doc:1']) expect(human.stdout).to.include(r);
        expect(human.stdout).to.include('{doc:2}:read (legacy read key)');
        expect(human.stdout).to.include(shortToken(bw.token));
        for (const lease of [...held, bw, lr]) expect(human.stdout).to.not.include(lease.token);
        const doc = JSON.parse((await cli(['list', '--json', ...target(ctx)])).stdout);
        expect(doc.omitted).to.equal(0);
        const byResource = new Map(doc.locks.map((l: { resource: string }) => [l.resource, l]));
        expect(byResource.size).to.equal(resources.length + 2);
        resources.forEach((r, i) => {
          const l = byResource.get(r) as { layout: string; mode: string; fence: number };
          expect(l, r).to.include({ layout: 'hash', mode: i % 2 ? 'read' : 'write', fence: held[i]!.fence });
        });
        expect(byResource.get('doc:1')).to.deep.include({
          layout: 'hash',
          mode: 'write',
          writer: { owner: bw.token, holds: 1, ttlMs: (byResource.get('doc:1') as { writer: { ttlMs: number } }).writer.ttlMs },
        });
        expect(byResource.get('{doc:2}:read')).to.include({ layout: 'legacy', mode: 'read' });
        expect((byResource.get('{doc:2}:read') as { readers: { owner: string }[] }).readers[0]!.owner).to.equal(lr.token);
        const limited = JSON.parse((await cli(['list', '--json', '--limit', '2', ...target(ctx)])).stdout);
        expect(limited.locks).to.have.length(2);
        expect(limited.omitted).to.equal(resources.length);
      } finally {
        await bridge.close();
        await legacy.close();
      }
    });

    it('says so when there are no locks', async () => {
      const run = await cli(['list', ...target(ctx)]);
      expect(run.code).to.equal(0);
      expect(run.stdout).to.include('no locks with state');
      expect(JSON.parse((await cli(['list', '--json', ...target(ctx)])).stdout).locks).to.deep.equal([]);
    });
  });

  describe('release --force', () => {
    it('refuses without --yes when nobody can confirm, and leaves the lock alone (exit 5)', async () => {
      const w = await locks.lock('job:1').acquireWrite();
      const run = await cli(['release', '--force', 'job:1', ...target(ctx)]);
      expect(run.code).to.equal(EXIT.CANCELLED);
      expect(run.stderr).to.include('--yes');
      expect((await locks.inspect('job:1')).writer?.owner).to.equal(w.token);
    });

    it("deletes the lock's keys and wakes its waiters at once; the holder finds it lost at its next renewal", async () => {
      const w = await locks.lock('job:1').acquireWrite();
      const patient = new LockClient(redis, { recheckMs: 20_000 });
      try {
        const waiting = patient.lock('job:1').acquireWrite({ waitMs: 30_000 });
        await sleep(200);
        const run = await cli(['release', '--force', 'job:1', '--yes', '--json', ...target(ctx)]);
        expect(run.code).to.equal(0);
        const doc = JSON.parse(run.stdout);
        expect(doc).to.include({ resource: 'job:1', layout: 'hash', released: true });
        expect(doc.deleted).to.include(locks.lock('job:1').keys.state);
        expect(doc.before.writer.owner).to.equal(w.token);
        const started = performance.now();
        const next = await waiting; // woken by the published wake-up, long before its 20 s re-check
        expect(performance.now() - started).to.be.below(5_000);
        expect(next.token).to.not.equal(w.token);
        const error = await w.extend().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).to.be.instanceOf(LockLostError);
        await next.release();
      } finally {
        await patient.close();
      }
    });

    it('exits 3 when the lock has no keys', async () => {
      const run = await cli(['release', '--force', 'job:none', '--yes', ...target(ctx)]);
      expect(run.code).to.equal(EXIT.NOTHING);
      expect(run.stdout).to.include('nothing to release');
    });

    it("also deletes the legacy keys in legacy mode, an old process's included, in human output", async () => {
      const keys = taggedLegacyKeys('report:7');
      await new OldLocker(redis, keys.read, keys.write).tryRead();
      const legacy = new LockClient(redis, { mode: 'legacy', legacyKeys: taggedLegacyKeys });
      try {
        await legacy.lock('report:7').acquireRead();
        const run = await cli(['release', '--force', 'report:7', '--yes', '--mode', 'legacy', ...TAGGED, ...target(ctx)]);
        expect(run.code).to.equal(0);
        expect(run.stdout).to.match(/released "report:7": deleted .*\{report:7\}:read/);
        expect(run.stdout).to.include('will find the lock lost');
        expect(await allKeys(redis)).to.deep.equal([]);
      } finally {
        await legacy.close();
      }
    });
  });

  describe('migrate-check', () => {
    it('reports old processes holding legacy keys (exit 4), and only library writers once they are gone (exit 0)', async function () {
      this.timeout(60_000);
      const legacy = new LockClient(redis, { mode: 'legacy', legacyKeys: taggedLegacyKeys });
      try {
        const old = new OldLocker(redis, '{a}:read', '{a}:write');
        await old.tryWrite();
        const busy = await cli(['migrate-check', '--watch-ms', '300', ...TAGGED, '--json', ...target(ctx)]);
        expect(busy.code).to.equal(EXIT.LEGACY_ACTIVE);
        const doc = JSON.parse(busy.stdout);
        expect(doc).to.include({ verdict: 'old-processes-active', oldHolding: 1 });
        expect(doc.keys.map((k: { key: string }) => k.key)).to.deep.equal(['{a}:write']);
        expect(doc.rounds).to.be.at.least(2);
        await old.releaseWrite();
        // A library writer re-taking its lock during the watch: library writes, no old ones.
        const renewals = setInterval(() => void legacy.withWrite('b', () => sleep(20)).catch(() => undefined), 50);
        // And one holding its lock through the watch, renewed every ~200 ms: its key holds a token at every look.
        const renewing = new LockClient(redis, { mode: 'legacy', legacyKeys: taggedLegacyKeys, leaseMs: 600 });
        const held = await renewing.lock('c').acquireWrite();
        try {
          // Looks 70 ms apart: a multiple of the writer's 50 ms period would see it at one phase only, maybe never held.
          const quiet = await cli(['migrate-check', '--watch-ms', '2500', '--interval-ms', '70', ...TAGGED, ...target(ctx)]);
          expect(quiet.code).to.equal(0);
          // It shows its progress while it watches, on stderr (at most one line a second), and the report on stdout.
          const progress = quiet.stderr
            .split('\n')
            .filter((line) =>
              /^\[ *\d+\.\d s of 2\.5 s\] look \d+: \d+ legacy key\(s\) seen; writes so far: 0 by old processes, \d+ by the library$/.test(
                line,
              ),
            );
          expect(progress.length, quiet.stderr).to.be.within(2, 3);
          expect(quiet.stdout).to.not.include('writes so far');
          expect(quiet.stdout).to.include('{b}:write');
          // Its VALUE column shows a writer's owner token shortened, never whole (tables; --json has it whole).
          expect(quiet.stdout).to.include(`{c}:write`).and.to.include(shortToken(held.token));
          expect(quiet.stdout).to.not.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/);
          expect(quiet.stdout).to.match(/ written or held, 0 of them by old processes\n/); // library keys are not counted as old
          expect(quiet.stdout).to.match(/no old process seen \(\d+ write\(s\) by library processes\)/);
        } finally {
          clearInterval(renewals);
          await renewing.close();
        }
      } finally {
        await legacy.close();
      }
    });

    it('reports the legacy writers of running old processes until they stop, next to bridge-mode processes', async function () {
      this.timeout(120_000);
      const OLD_TTL_S = 2; // the TTL old processes give their keys
      const dir = mkdtempSync(join(tmpdir(), 'rwlock-migrate-'));
      const worker = (kind: string, until: string) =>
        new Promise<void>((resolve, reject) => {
          const child = spawn(process.execPath, [bundled(WORKER)], {
            env: {
              ...process.env,
              RWLOCK_TARGET: JSON.stringify(targetOf(ctx)),
              RWLOCK_KIND: kind,
              RWLOCK_UNTIL_FILE: join(dir, until),
              RWLOCK_RESOURCES: 'alpha,beta',
              RWLOCK_OLD_TTL: String(OLD_TTL_S),
            },
            stdio: ['ignore', 'ignore', 'pipe'],
          });
          let err = '';
          child.stderr.on('data', (d) => (err += d));
          child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${kind} worker exited ${code}: ${err}`))));
        });
      const oldDone = worker('old', 'stop-old');
      const bridgeDone = worker('bridge', 'stop-bridge');
      try {
        // Watch until one window saw both at work: on a loaded machine the workers take a while to
        // start, and a bridge writer may wait out old readers for a TTL (docs/migration.md).
        await eventually(
          'a migrate-check watch that sees old and library writes',
          async () => {
            const during = await cli(['migrate-check', '--watch-ms', '1500', '--interval-ms', '50', ...TAGGED, '--json', ...target(ctx)]);
            // A watch over before the old worker's first write saw no old process (exit 0; the bridge
            // worker's legacy keys may be there already): watch again.
            if (during.code === 0) return false;
            expect(during.code, during.stderr).to.equal(EXIT.LEGACY_ACTIVE);
            const busy = JSON.parse(during.stdout);
            expect(busy.verdict).to.equal('old-processes-active');
            expect(busy.keys.some((k: { old: boolean }) => k.old)).to.equal(true);
            return busy.oldWrites > 0 && busy.libraryWrites > 0;
          },
          60_000,
        );

        writeFileSync(join(dir, 'stop-old'), '');
        await oldDone;
        // Old readers count until their key's TTL while library readers keep the read key alive (docs/migration.md,
        // readers registry: the library cannot see an old release then), so bridge writers, and the readers queued
        // behind them, may wait that long: watch once it has passed. (With a 5 s TTL and no wait, a CI run saw none.)
        await sleep(OLD_TTL_S * 1000 + 200);
        // Every watch from now on sees no old process; one sees the bridge processes keep writing the legacy keys.
        await eventually(
          'a migrate-check watch that sees library writes and no old process',
          async () => {
            const after = await cli(['migrate-check', '--watch-ms', '1500', '--interval-ms', '50', ...TAGGED, '--json', ...target(ctx)]);
            expect(after.code, after.stdout).to.equal(0);
            const quiet = JSON.parse(after.stdout);
            expect(quiet).to.include({ verdict: 'no-old-processes-seen', oldWrites: 0, oldHolding: 0 });
            expect(quiet.keys.every((k: { old: boolean }) => !k.old)).to.equal(true);
            return quiet.libraryWrites > 0;
          },
          60_000,
        );
      } finally {
        writeFileSync(join(dir, 'stop-old'), '');
        writeFileSync(join(dir, 'stop-bridge'), '');
        await Promise.allSettled([oldDone, bridgeDone]);
        rmSync(dir, { recursive: true, force: true });
      }
      await bridgeDone;
    });
  });
});

describe('CLI confirmation on a terminal', () => {
  // The prompt needs a terminal; run main() in-process with a scripted one.
  function terminal(answer: string): CliIO & { output: string } {
    const io = {
      output: '',
      interactive: true,
      out: (text: string) => void (io.output += text),
      err: (text: string) => void (io.output += text),
      ask: async (question: string) => {
        io.output += question;
        return answer;
      },
    };
    return io;
  }

  forEachTopology('release', (ctx) => {
    for (const [answer, released] of [
      ['y', true],
      ['n', false],
    ] as const) {
      it(`shows the lock, asks, and ${released ? 'releases on "y"' : 'keeps it on "n" (exit 5)'}`, async () => {
        const redis = ctx.client();
        const locks = new LockClient(redis);
        const w = await locks.lock('job:1').acquireWrite();
        const io = terminal(answer);
        const code = await main(['release', '--force', 'job:1', ...target(ctx)], io);
        expect(io.output).to.include(shortToken(w.token)).and.to.not.include(w.token);
        // A sole holder lives in the lock's hash alone.
        expect(io.output).to.match(/Delete 1 key\(s\) of lock "job:1" \(rwlock:\{job:1\}\)\? Its holders will lose it\. \[y\/N\]/);
        expect(code).to.equal(released ? 0 : EXIT.CANCELLED);
        expect((await locks.inspect('job:1')).mode).to.equal(released ? 'free' : 'write');
        if (released) await w.release().catch(() => undefined);
        await locks.close();
      });
    }
  });
});
