/**
 * Least privilege: the ACL rules of docs/operations.md ("Redis ACL"), read
 * from that page and set on every node, are enough for the library's core
 * (acquire, wait and wake-up, extend, renewal, inspect, release, force-release)
 * on both topologies and in legacy mode, and for the operator's CLI commands;
 * outside them the server refuses, and the caller gets a NoPermissionError
 * that names what is missing, with nothing left in Redis.
 */

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { EXIT } from '../../src/cli/command.js';
import type { LockRedisClient } from '../../src/clients/index.js';
import { LockClient, type LockClientOptions, NoPermissionError } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import { type RedisServerHandle, startRedisMasters, startRedisServer } from '../../src/testing/index.js';
import { ALL_CLIENTS, forEachTopology, type TopologyContext } from '../setup/topologies.js';
import { bundled } from '../support/bundled.js';
import { eventually } from '../support/eventually.js';
import { handOffWrite } from '../support/handoff.js';
import { taggedLegacyKeys } from '../support/old-scripts.js';
import { masters, totalKeys } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';

const OPERATIONS = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
const CLI = fileURLToPath(new URL('../../src/cli/index.ts', import.meta.url));

/** The `ACL SETUSER <user> ...` line of docs/operations.md, as arguments after `ACL`. */
function documentedRule(user: string): string[] {
  const line = OPERATIONS.split('\n').find((l) => l.startsWith(`ACL SETUSER ${user} `));
  if (line === undefined) throw new Error(`docs/operations.md has no "ACL SETUSER ${user}" rule`);
  return line.split(/\s+/).slice(1);
}
/** The password the documented rule sets: its `>password` argument. */
const passwordOf = (rule: readonly string[]) => rule.find((a) => a.startsWith('>'))!.slice(1);

/** Every node of the topology (replicas too: a failover must not lose the user). */
function nodeClients(ctx: TopologyContext): RedisClient[] {
  if (ctx.kind === 'standalone') return [ctx.client()];
  return ctx.cluster.nodes.map((node) => node.client());
}

async function setUser(ctx: TopologyContext, rule: readonly string[], extra: readonly string[] = []): Promise<void> {
  for (const node of nodeClients(ctx)) {
    await node.call('ACL', ...rule, ...extra);
    if (ctx.kind === 'cluster') node.disconnect();
  }
}

/** The CLI's connection options for the topology. */
function cliTarget(ctx: TopologyContext): string[] {
  return ctx.kind === 'cluster'
    ? ['--cluster', ctx.cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',')]
    : ['--redis', `redis://${ctx.server.host}:${ctx.server.port}`];
}

/** A Redis client of the suite's library logged in as `user`. */
function clientAs(ctx: TopologyContext, user: string, password: string): Promise<LockRedisClient> {
  return ctx.lockRedis({ user: { username: user, password } });
}

forEachTopology('least privilege: the documented ACL', { clients: ALL_CLIENTS }, (ctx) => {
  const app = documentedRule('app');
  const opened: LockClient[] = [];
  const open = (redis: LockRedisClient, options?: LockClientOptions) => {
    const locks = new LockClient(redis, options);
    opened.push(locks);
    return locks;
  };
  beforeEach(() => setUser(ctx, app));
  afterEach(async () => {
    for (const locks of opened.splice(0)) await locks.close();
  });

  it('lets a LockClient acquire, wait and be woken, extend, renew, inspect and release', async () => {
    const redis = await clientAs(ctx, 'app', passwordOf(app));
    const locks = open(redis, { leaseMs: 2_000 });
    const other = open(await clientAs(ctx, 'app', passwordOf(app)), { recheckMs: 20_000 });
    const next = await handOffWrite(locks, other, 'job:{1}'); // the wake-up comes over the permitted channel
    const reader = await locks.lock('job:{2}').acquireRead();
    await Promise.all([next.release(), reader.release()]);
    expect(locks.stats().subscriberErrors + other.stats().subscriberErrors).to.equal(0);
    expect(await totalKeys(ctx.client())).to.equal(0);
  });

  it('works on after the servers lost their scripts: they are loaded by EVAL, not SCRIPT LOAD', async () => {
    const locks = open(await clientAs(ctx, 'app', passwordOf(app)));
    await (await locks.lock('job:{4}').acquireWrite()).release();
    for (const node of await masters(ctx.client())) await node.script('FLUSH');
    await (await locks.lock('job:{4}').acquireWrite()).release();
    expect(await totalKeys(ctx.client())).to.equal(0);
  });

  it('refuses a lock outside the prefix with NoPermissionError naming the keys, and writes nothing', async () => {
    const locks = open(await clientAs(ctx, 'app', passwordOf(app)), { prefix: 'other' });
    const error = await rejection(locks.lock('x').acquireWrite({ waitMs: 500 }));
    expect(error).to.be.instanceOf(NoPermissionError);
    expect(error).to.include({ permission: 'keys', code: 'RWLOCK_NO_PERMISSION' });
    expect(error.message)
      .to.match(/NOPERM/)
      .and.to.match(/grant the Redis user access to the lock's keys/);
    expect(await totalKeys(ctx.client())).to.equal(0);
  });

  it('names the command a script was refused, when the rule lacks one (here SPUBLISH)', async () => {
    await setUser(ctx, app, ['-spublish']);
    const locks = open(await clientAs(ctx, 'app', passwordOf(app)));
    const lease = await locks.lock('job:{3}').acquireWrite();
    const waiter = locks
      .lock('job:{3}')
      .acquireWrite({ owner: 'next', waitMs: 2_000 })
      .catch((e: unknown) => e);
    await eventually('the writer queued', async () => (await locks.inspect('job:{3}')).queue.length > 0);
    const error = await rejection(lease.release());
    expect(error).to.be.instanceOf(NoPermissionError);
    expect(error).to.include({ permission: 'command spublish' });
    expect(error.message).to.include('grant the Redis user +spublish');
    await waiter;
  });

  for (const mode of ['legacy', 'bridge'] as const) {
    it(`in ${mode} mode, with the legacy keys and channel added, works as documented`, async () => {
      await setUser(ctx, app, ['~{*}:read', '~{*}:write', '&rwlock#*']);
      const locks = open(await clientAs(ctx, 'app', passwordOf(app)), { mode, legacyKeys: taggedLegacyKeys });
      const writer = await locks.lock('report').acquireWrite();
      expect(await locks.lock('report').tryAcquireRead({ owner: 'reader' })).to.equal(null);
      await writer.release();
      await (await locks.lock('report').acquireRead()).release();
      expect(await totalKeys(ctx.client())).to.equal(0);
    });
  }

  // The CLI's own client is ioredis: its runs need not repeat per library.
  if (ctx.clientKind === 'ioredis')
    describe('operators', () => {
      const ops = documentedRule('ops');
      const opsRelease = documentedRule('ops-release');

      /** Runs the CLI as `user`, the password in its environment. */
      const cliAs = (user: string, password: string, args: readonly string[]) =>
        new Promise<{ code: number | null; out: string }>((resolve, reject) => {
          const child = spawn(process.execPath, [bundled(CLI), ...args, '--user', user, ...cliTarget(ctx)], {
            env: { ...process.env, REDIS_PASSWORD: password },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          let out = '';
          child.stdout.on('data', (d) => (out += d));
          child.stderr.on('data', (d) => (out += d));
          child.on('error', reject);
          child.on('exit', (code) => resolve({ code, out }));
        });

      it('lets the read-only operator inspect, list and top, and refuses its release --force', async () => {
        await setUser(ctx, ops);
        const holder = open(await clientAs(ctx, 'app', passwordOf(app)));
        await holder.lock('job:{4}').acquireWrite();
        const password = passwordOf(ops);
        for (const args of [
          ['inspect', 'job:{4}', '--json'],
          ['list', '--json'],
          ['top', '-n', '1', '--json'],
        ]) {
          const run = await cliAs('ops', password, args);
          expect(run.code, `${args[0]}: ${run.out}`).to.equal(EXIT.OK);
          expect(run.out, args[0]).to.include('job:{4}');
        }
        const release = await cliAs('ops', password, ['release', '--force', 'job:{4}', '--yes']);
        expect(release.code, release.out).to.equal(EXIT.FAILED);
        expect(release.out).to.match(/NoPermissionError/);
        expect((await holder.inspect('job:{4}')).mode).to.equal('write');
      });

      it('lets the release operator force-release', async () => {
        await setUser(ctx, opsRelease);
        const holder = open(await clientAs(ctx, 'app', passwordOf(app)));
        await holder.lock('job:{5}').acquireWrite();
        const run = await cliAs('ops-release', passwordOf(opsRelease), ['release', '--force', 'job:{5}', '--yes']);
        expect(run.code, run.out).to.equal(EXIT.OK);
        expect((await holder.inspect('job:{5}')).mode).to.equal('free');
      });

      it('lets a release operator whose rule predates UNLINK force-release (the script falls back to DEL)', async () => {
        await setUser(ctx, opsRelease, ['-unlink']);
        const holder = open(await clientAs(ctx, 'app', passwordOf(app)));
        await holder.lock('job:{6}').acquireWrite();
        const run = await cliAs('ops-release', passwordOf(opsRelease), ['release', '--force', 'job:{6}', '--yes']);
        expect(run.code, run.out).to.equal(EXIT.OK);
        expect((await holder.inspect('job:{6}')).mode).to.equal('free');
      });
    });
});

describe('least privilege: redlock mode under the documented ACL', function () {
  this.timeout(30_000);
  const app = documentedRule('app');
  const user = { name: 'app', password: passwordOf(app), rules: app.slice(app.indexOf(`>${passwordOf(app)}`) + 1) };

  it('takes, waits for and releases a lock on 3 masters, each with the same rule and nothing more', async () => {
    await using masters = await startRedisMasters(3, { users: [user] });
    const clients = masters.clients({ username: user.name, password: user.password });
    const locks = new LockClient(clients, { mode: 'redlock' });
    const other = new LockClient(masters.clients({ username: user.name, password: user.password }), { mode: 'redlock' });
    try {
      const lease = await locks.lock('job:{1}').acquireWrite();
      const waiter = other.lock('job:{1}').acquireWrite({ waitMs: 5_000 });
      await lease.release();
      await (await waiter).release();
      expect((await locks.inspect('job:{1}')).mode).to.equal('free');
    } finally {
      await Promise.all([locks.close(), other.close()]);
    }
  });
});

describe('a refused login says so, and that a retry will not help', function () {
  this.timeout(30_000);
  let server: RedisServerHandle;
  before(async () => {
    server = await startRedisServer({ users: [{ name: 'app', password: 'pw-9c1', rules: ['on', '~*', '&*', '+@all'] }] });
  });
  after(() => server.stop());

  for (const [what, password] of [
    ['a wrong password', 'not-it'],
    ['no password', undefined],
  ] as const) {
    it(`ioredis with ${what}: NoPermissionError "login", the server's reply, what to set, no "may be retried"`, async () => {
      const redis = new Redis({ port: server.port, username: 'app', ...(password !== undefined && { password }) });
      redis.on('error', () => {}); // the login failure is the acquire's to report
      const locks = new LockClient(redis);
      try {
        const error = await rejection(locks.lock('job:{1}').acquireWrite({ waitMs: 100 }));
        expect(error, String(error)).to.be.instanceOf(NoPermissionError);
        expect((error as NoPermissionError).permission).to.equal('login');
        expect((error as Error).message).to.match(
          /the server refused the client's login \((WRONGPASS|NOAUTH) [^)]*[^.]\); set the username and password/,
        );
        expect((error as Error).message).to.match(/retrying will not help$/);
        expect((error as Error).message)
          .to.not.include('may be retried')
          .and.to.not.include('.;');
      } finally {
        await locks.close();
        redis.disconnect();
      }
    });
  }
});
