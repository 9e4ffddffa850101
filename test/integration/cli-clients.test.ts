/**
 * The CLI on either client library: node-redis when ioredis is absent (or
 * REDIS_RWLOCK_CLIENT=node-redis asks for it), and a Cluster node given as
 * a plain server (--redis) refused before anything is read or written, on
 * both. The CLI runs as its users run it: a separate process.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { ClientLibrary } from '../../src/cli/cli-redis.js';
import { EXIT } from '../../src/cli/command.js';
import { CONNECT_TIMEOUT_MS } from '../../src/cli/connect.js';
import { LockClient } from '../../src/index.js';
import { type FaultProxy, type RedisServerHandle, startFaultProxy, startRedisServer } from '../../src/testing/index.js';
import { forEachTopology, sharedCluster } from '../setup/topologies.js';
import { bundled } from '../support/bundled.js';
import { eventually } from '../support/eventually.js';

const CLI = fileURLToPath(new URL('../../src/cli/index.ts', import.meta.url));

function cli(
  args: readonly string[],
  library: string,
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bundled(CLI), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, REDIS_RWLOCK_CLIENT: library, ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

forEachTopology('CLI on node-redis', (ctx) => {
  const target = () =>
    ctx.kind === 'cluster'
      ? ['--cluster', ctx.cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',')]
      : ['--redis', `redis://${ctx.server.host}:${ctx.server.port}`];

  it('inspects, lists and force-releases the locks a LockClient holds', async () => {
    const locks = new LockClient(ctx.client());
    try {
      for (const name of ['a', 'b', 'c']) await locks.lock(`cli-nr:{${name}}`).acquireWrite();
      const inspected = await cli(['inspect', 'cli-nr:{a}', '--json', ...target()], 'node-redis');
      expect(inspected.stderr).to.equal('');
      expect(JSON.parse(inspected.stdout)).to.include({ resource: 'cli-nr:{a}', mode: 'write' });
      const listed = await cli(['list', '--json', ...target()], 'node-redis');
      expect(listed.code).to.equal(EXIT.OK);
      const resources = (JSON.parse(listed.stdout) as { locks: { resource: string }[] }).locks.map((l) => l.resource);
      expect(resources).to.have.members(['cli-nr:{a}', 'cli-nr:{b}', 'cli-nr:{c}']); // every master's
      const released = await cli(['release', '--force', '--yes', 'cli-nr:{b}', ...target()], 'node-redis');
      expect(released.code).to.equal(EXIT.OK);
      expect((await locks.inspect('cli-nr:{b}')).mode).to.equal('free');
    } finally {
      await locks.close();
    }
  });
});

describe('CLI on node-redis: an ACL user', function () {
  this.timeout(30_000);
  let server: RedisServerHandle;
  before(async () => {
    server = await startRedisServer({ users: [{ name: 'operator', password: 'pw-5e1', rules: ['~rwlock*', '&rwlock*', '+@all'] }] });
  });
  after(() => server.stop());

  it('logs in with the password from $REDIS_PASSWORD, and says WRONGPASS for a wrong one', async () => {
    const args = ['inspect', 'job:{1}', '--json', '--redis', server.url, '--user', 'operator'];
    const right = await cli(args, 'node-redis', { REDIS_PASSWORD: 'pw-5e1' });
    expect(right.stderr).to.equal('');
    expect(JSON.parse(right.stdout)).to.include({ mode: 'free' });
    const wrong = await cli(args, 'node-redis', { REDIS_PASSWORD: 'not-it' });
    expect(wrong.code).to.equal(EXIT.FAILED);
    expect(wrong.stderr).to.match(/^redis-rwlock inspect: cannot connect to Redis at redis:\/\/127\.0\.0\.1:\d+\/?: WRONGPASS /);
  });
});

describe('CLI against a server that wants a password, given none', function () {
  this.timeout(30_000);
  let server: RedisServerHandle;
  let admin: Redis;
  before(async () => {
    server = await startRedisServer();
    admin = new Redis({ port: server.port, password: 'pw-2a7' });
    await admin.call('ACL', 'SETUSER', 'default', 'resetpass', '>pw-2a7'); // default: the harness' user, restored below
  });
  after(async () => {
    await admin.call('ACL', 'SETUSER', 'default', 'nopass');
    admin.disconnect();
    await server.stop();
  });

  for (const library of ['ioredis', 'node-redis'] as const satisfies readonly ClientLibrary[]) {
    for (const args of [
      ['inspect', 'job:{1}'],
      ['top', '-n', '1'],
    ]) {
      it(`${library}: ${args[0]} says it cannot connect, NOAUTH, and how to give a password (exit 1)`, async () => {
        const run = await cli([...args, '--redis', server.url], library);
        expect(run.code, run.stderr).to.equal(EXIT.FAILED);
        expect(run.stderr).to.match(
          new RegExp(`^redis-rwlock ${args[0]}: cannot connect to Redis at redis://127\\.0\\.0\\.1:\\d+/?: .*NOAUTH`),
        );
        expect(run.stderr).to.include('give the password in $REDIS_PASSWORD (or --ask-pass) and the user with --user');
        expect(run.stderr).to.not.include('Protocol error').and.to.not.include('.;');
      });
    }
  }
});

describe('CLI on node-redis: the documented ops user, which may not PING', function () {
  this.timeout(30_000);

  it('logs in and inspects: the login check on connect counts only a refused login', async () => {
    const operations = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
    const rule = operations
      .split('\n')
      .find((l) => l.startsWith('ACL SETUSER ops '))!
      .split(/\s+/)
      .slice(3); // after "ACL SETUSER ops"
    expect(rule).to.not.include('+ping');
    const server = await startRedisServer({ users: [{ name: 'ops', password: 'ops-pw', rules: rule.filter((r) => !r.startsWith('>')) }] });
    try {
      const run = await cli(
        ['inspect', 'rwlock-ops:{1}', '--json', '--prefix', 'rwlock', '--redis', server.url, '--user', 'ops'],
        'node-redis',
        {
          REDIS_PASSWORD: 'ops-pw',
        },
      );
      expect(run.code, run.stderr).to.equal(EXIT.OK);
      expect(JSON.parse(run.stdout)).to.include({ mode: 'free' });
    } finally {
      await server.stop();
    }
  });
});

describe('CLI given a Redis Cluster node with --redis', function () {
  this.timeout(30_000);

  for (const library of ['ioredis', 'node-redis'] as const satisfies readonly ClientLibrary[]) {
    it(`${library}: refuses it (exit 2), naming --cluster, before reading anything`, async () => {
      const cluster = await sharedCluster();
      const locks = new LockClient(cluster.client());
      try {
        for (const name of ['a', 'b', 'c', 'd', 'e', 'f']) await locks.lock(`cli-node:{${name}}`).acquireWrite();
        const [master] = await cluster.masters();
        for (const args of [['list'], ['inspect', 'cli-node:{a}'], ['release', '--force', '--yes', 'cli-node:{a}']]) {
          const run = await cli([...args, '--redis', `redis://127.0.0.1:${master!.port}`], library);
          expect(run.code).to.equal(EXIT.USAGE);
          expect(run.stdout).to.equal('');
          expect(run.stderr.split('\n')[0]).to.equal(
            `redis-rwlock ${args[0]}: --redis: redis://127.0.0.1:${master!.port} is a Redis Cluster node, and a plain connection ` +
              `sees its own slots only; give --cluster 127.0.0.1:${master!.port} (any node of the Cluster) instead`,
          );
        }
        expect((await locks.inspect('cli-node:{a}')).mode).to.equal('write');
      } finally {
        await locks.close();
      }
    });
  }

  it('refuses an unknown REDIS_RWLOCK_CLIENT in one line', async () => {
    const run = await cli(['list', '--redis', 'redis://127.0.0.1:1'], 'valkey');
    expect(run.stderr).to.equal('redis-rwlock list: REDIS_RWLOCK_CLIENT: "valkey" is not a client library; use ioredis or node-redis\n');
  });
});

describe('CLI on a server that stops answering after it connected', function () {
  this.timeout(60_000);
  let server: RedisServerHandle;
  let proxy: FaultProxy;
  before(async () => {
    server = await startRedisServer();
  });
  after(() => server.stop());
  beforeEach(async () => {
    proxy = await startFaultProxy({ target: { port: server.port } });
  });
  afterEach(() => proxy.close());

  for (const library of ['ioredis', 'node-redis'] as const satisfies readonly ClientLibrary[]) {
    it(`${library}: top gives up ${CONNECT_TIMEOUT_MS / 1000} s into a refresh that gets no answer, and exits 1`, async () => {
      const child = spawn(
        process.execPath,
        [bundled(CLI), 'top', '--json', '--interval-ms', '50', '--redis', `redis://127.0.0.1:${proxy.port}`],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
          env: { ...process.env, REDIS_RWLOCK_CLIENT: library },
        },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      try {
        await eventually('a first refresh', () => stdout.includes('\n'), 20_000);
        proxy.stall();
        const stalledAt = performance.now();
        const code = await exited;
        expect(performance.now() - stalledAt).to.be.at.least(CONNECT_TIMEOUT_MS - 100);
        expect(code).to.equal(EXIT.FAILED);
        expect(stderr).to.match(new RegExp(`^redis-rwlock top: .*no answer within ${CONNECT_TIMEOUT_MS / 1000} s`));
      } finally {
        child.kill('SIGKILL');
      }
    });
  }
});
