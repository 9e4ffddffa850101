/**
 * `redis-rwlock top` against real servers with contended locks: the JSON
 * stream and the plain lines of a separate process (as its users run it,
 * not on a terminal), live refreshes as locks change hands, a clean quit on
 * SIGINT, and the redrawn screen on a terminal (main() in-process with a
 * scripted terminal).
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { Cluster } from 'ioredis';
import type { CliIO } from '../../src/cli/command.js';
import type { TopLock, TopSnapshot } from '../../src/cli/commands/top.js';
import { main } from '../../src/cli/main.js';
import { type Lease, LockClient } from '../../src/index.js';
import { isCluster, type RedisClient } from '../../src/redis.js';
import { forEachTopology, type TopologyContext } from '../setup/topologies.js';
import { bundled } from '../support/bundled.js';
import { eventually } from '../support/eventually.js';

const CLI = fileURLToPath(new URL('../../src/cli/index.ts', import.meta.url));

function target(ctx: TopologyContext): string[] {
  return ctx.kind === 'cluster'
    ? ['--cluster', ctx.cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',')]
    : ['--redis', `redis://${ctx.server.host}:${ctx.server.port}`];
}

/** The CLI in its own process, its output collected as it comes. */
class Running {
  readonly child: ChildProcessWithoutNullStreams;
  stdout = '';
  stderr = '';
  readonly exited: Promise<number | null>;

  constructor(args: readonly string[]) {
    this.child = spawn(process.execPath, [bundled(CLI), ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout.on('data', (d) => (this.stdout += d));
    this.child.stderr.on('data', (d) => (this.stderr += d));
    this.child.stdin.end(); // not a terminal
    this.exited = once(this.child, 'exit').then(([code]) => code as number | null);
  }

  /** The JSON documents printed so far (complete lines only). */
  docs(): TopSnapshot[] {
    return this.stdout
      .split('\n')
      .slice(0, -1)
      .map((line) => JSON.parse(line) as TopSnapshot);
  }
}

/** How the test locks look: `hot` has a writer and two writers queued, `warm` a writer and one, `cold` two readers. */
async function contend(holder: LockClient, waiters: LockClient): Promise<{ hot: Lease; waiting: Promise<Lease>[] }> {
  const hot = await holder.lock('hot').acquireWrite();
  await holder.lock('warm').acquireWrite();
  await holder.lock('cold').acquireRead();
  await waiters.lock('cold').acquireRead();
  const waiting = [
    waiters.lock('hot').acquireWrite({ waitMs: 60_000 }),
    waiters.lock('hot').acquireWrite({ waitMs: 60_000 }),
    waiters.lock('warm').acquireWrite({ waitMs: 60_000 }),
    waiters.lock('hot').acquireRead({ waitMs: 60_000 }), // waiting readers leave nothing in Redis
  ];
  for (const w of waiting) w.catch(() => undefined); // ended by close() after the test
  await eventually(
    'the writers to queue',
    async () => (await holder.inspect('hot')).queue.length === 2 && (await holder.inspect('warm')).queue.length === 1,
  );
  return { hot, waiting };
}

describe('CLI top without a server', function () {
  this.timeout(30_000);
  const help = () => {
    let out = '';
    const io: CliIO = { out: (t) => void (out += t), err: (t) => void (out += t), interactive: false, ask: async () => '' };
    return main(['top', '--help'], io).then((code) => ({ code, out }));
  };

  it('prints its help, and docs/cli.md shows exactly that help', async () => {
    const { code, out } = await help();
    expect(code).to.equal(0);
    expect(out).to.match(/^Usage: redis-rwlock top /);
    const docs = readFileSync(fileURLToPath(new URL('../../docs/cli.md', import.meta.url)), 'utf8');
    expect(docs).to.include(`\`\`\`\n${out.trimEnd()}\n\`\`\``);
  });

  for (const [args, message] of [
    [['--interval-ms', 'soon'], /--interval-ms: must be a whole number from 10/],
    [['-n', '0'], /--iterations: must be a whole number from 1/],
    [['extra'], /unexpected argument "extra"/],
  ] as const) {
    it(`exits 2 on ${args.join(' ')}`, async () => {
      const run = new Running(['top', ...args, '--redis', 'redis://127.0.0.1:1']);
      expect(await run.exited).to.equal(2);
      expect(run.stderr).to.match(message);
      expect(run.stdout).to.equal('');
    });
  }
});

forEachTopology('CLI top', (ctx) => {
  let redis: RedisClient;
  let holder: LockClient;
  let waiters: LockClient;
  const running: Running[] = [];
  const run = (args: readonly string[]) => {
    const r = new Running([...args, ...target(ctx)]);
    running.push(r);
    return r;
  };

  beforeEach(() => {
    redis = ctx.client();
    holder = new LockClient(redis);
    waiters = new LockClient(redis, { recheckMs: 50 });
  });
  afterEach(async () => {
    for (const r of running.splice(0)) if (r.child.exitCode === null) r.child.kill('SIGKILL');
    await holder.close();
    await waiters.close();
  });

  it('streams JSON refreshes, most contended first, with holders, waiting writers, queue, age and lease', async function () {
    this.timeout(60_000);
    if (isCluster(redis)) {
      // The locks live on more than one master: top reads every one.
      await holder.inspect('x');
      const slots = (redis as Cluster).slots;
      const owners = new Set(['hot', 'warm', 'cold'].map((r) => slots[holder.lock(r).keys.slot]![0]));
      expect(owners.size, 'masters holding the test locks').to.be.greaterThan(1);
    }
    const { hot } = await contend(holder, waiters);
    const top = run(['top', '--json', '-n', '2', '--interval-ms', '50']);
    expect(await top.exited, top.stderr).to.equal(0);
    const docs = top.docs();
    expect(docs).to.have.length(2);
    const [first] = docs;
    expect(first!.locks.map((l) => l.resource)).to.deep.equal(['hot', 'warm', 'cold']);
    const [h, w, c] = first!.locks as TopLock[];
    expect(h).to.include({ layout: 'hash', mode: 'write', waitingWriters: 2, fence: hot.fence });
    expect(h!.writer?.owner).to.equal(hot.token);
    expect(h!.queue).to.have.length(2);
    expect(h!.waitingWriter?.owner).to.equal(h!.queue[0]!.owner);
    expect(w).to.include({ mode: 'write', waitingWriters: 1 });
    expect(c).to.include({ mode: 'read', waitingWriters: 0, waitingWriter: null });
    expect(c!.readers).to.have.length(2);
    for (const l of first!.locks) {
      expect(l.ageMs).to.be.a('number').and.at.least(0).and.below(60_000);
      expect(l.leaseLeftMs).to.be.above(20_000).and.at.most(30_000);
    }
    expect(first!.omitted).to.equal(0);
    expect(Date.parse(docs[1]!.time)).to.be.at.least(Date.parse(first!.time) + 40);
  });

  it('prints plain tables when not on a terminal, refreshes as locks change hands, and quits cleanly on SIGINT', async function () {
    this.timeout(60_000);
    const { hot, waiting } = await contend(holder, waiters);
    const top = run(['top', '--interval-ms', '50']);
    await eventually(
      'a first refresh',
      () => /RESOURCE\s+MODE\s+HOLDERS\s+WAITING WRITER\s+WRITERS WAITING\s+AGE\s+LEASE LEFT/.test(top.stdout),
      20_000,
    );
    const firstTable = top.stdout.split('\n').find((line) => line.startsWith('hot'));
    expect(firstTable).to.match(/^hot\s+write\s+writer\s+\S+\s+2\s+/);
    expect(top.stdout).to.match(/3 lock\(s\): 2 write, 1 read, 0 free; 2 with writers waiting \(3 writer\(s\)\)/);
    expect(top.stdout).to.not.include('\x1b['); // no terminal control codes in a pipe
    // The holder lets go: a queued writer gets "hot", and the next refreshes show one writer left waiting.
    const seen = top.stdout.length;
    await hot.release();
    const next = await Promise.race(waiting.slice(0, 2));
    await eventually('a refresh with the new holder', () => /^hot\s+write\s+writer\s+\S+\s+1\s+/m.test(top.stdout.slice(seen)), 20_000);
    expect(next.resource).to.equal('hot');
    expect(top.stdout).to.not.include(next.token).and.to.not.include(hot.token); // shown shortened, whole only with --json
    top.child.kill('SIGINT');
    expect(await top.exited, top.stderr).to.equal(0);
    expect(top.stderr).to.equal('');
    expect(top.stdout.endsWith('\n')).to.equal(true);
  });

  for (const [key, name] of [
    ['q', 'q'],
    ['\x03', 'Ctrl-C'],
  ] as const) {
    it(`quits on ${name} on a real terminal (a pseudo-terminal made by script(1)), restoring the cursor`, async function () {
      this.timeout(60_000);
      await contend(holder, waiters);
      const command = [process.execPath, bundled(CLI), 'top', '--interval-ms', '100', ...target(ctx)].map((a) => `'${a}'`).join(' ');
      const child = spawn('script', ['-qfec', `stty cols 100 rows 20; ${command}`, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      const exited = once(child, 'exit');
      try {
        await eventually('a frame on the terminal', () => /\x1b\[H\x1b\[J[\s\S]*RESOURCE[\s\S]*\nhot /.test(out), 20_000);
        child.stdin.write(key);
        const [code] = await exited;
        expect(code, out).to.equal(0);
        expect(out).to.include('(q or Ctrl-C quits)');
        expect(out.lastIndexOf('\x1b[?25h')).to.be.greaterThan(out.lastIndexOf('\x1b[H\x1b[J'));
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
      }
    });
  }

  it('redraws one screen on a terminal, cut to its size, and restores the cursor when told to quit', async function () {
    this.timeout(60_000);
    await contend(holder, waiters);
    for (let i = 0; i < 6; i++) await holder.lock(`extra:${i}`).acquireRead();
    const controller = new AbortController();
    let out = '';
    const io: CliIO = {
      out: (text) => void (out += text),
      err: (text) => void (out += text),
      interactive: true,
      ask: async () => '',
      screen: { columns: 70, rows: 10 },
      interrupts: () => ({ signal: controller.signal, dispose: () => undefined }),
    };
    const done = main(['top', '--interval-ms', '50', ...target(ctx)], io);
    await eventually('two frames', () => out.split('\x1b[H\x1b[J').length >= 3, 20_000);
    controller.abort(); // what q or Ctrl-C does
    expect(await done).to.equal(0);
    expect(out.startsWith('\x1b[?25l')).to.equal(true); // cursor hidden while it draws
    expect(out.endsWith('\x1b[?25h')).to.equal(true); // and shown again
    const frame = out.split('\x1b[H\x1b[J').at(-1)!.replace('\x1b[?25h', '');
    const lines = frame.split('\n').filter((l) => l !== '');
    expect(lines.length).to.be.at.most(10);
    for (const line of lines) expect(line.length).to.be.at.most(70);
    expect(lines[0]).to.include('q or Ctrl-C quits');
    expect(lines.find((l) => l.startsWith('RESOURCE'))).to.not.equal(undefined);
    expect(lines.findIndex((l) => l.startsWith('hot'))).to.equal(lines.findIndex((l) => l.startsWith('RESOURCE')) + 1);
    expect(lines.at(-1)).to.match(/^\.\.\. and \d+ more$/);
  });
});
