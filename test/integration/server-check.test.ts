/**
 * The server check: before a client's first script the library asks the
 * server for SPUBLISH and PEXPIRETIME (Redis 7.0, which brought script flags
 * too) and TIME, and refuses a server without one with a typed error naming
 * it, changing nothing. Against real servers: ones where SPUBLISH,
 * PEXPIRETIME or TIME is renamed away (what an older server or a service
 * lacks), one whose ACL user may not run COMMAND, and the shared topologies.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { LockClient, UnsupportedServerError } from '../../src/index.js';
import { type RedisClusterHandle, type RedisServerHandle, startRedisServer } from '../../src/testing/index.js';
import { ALL_CLIENTS, forEachTopology, sharedCluster } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { suiteLockClients } from '../support/lock-clients.js';
import { commandCalls, totalKeys } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';

describe('server check: a server without SPUBLISH', function () {
  this.timeout(30_000);
  let server: RedisServerHandle;
  let redis: Redis;
  before(async () => {
    server = await startRedisServer({ args: ['--rename-command', 'SPUBLISH', '""'] });
    redis = new Redis({ host: '127.0.0.1', port: server.port });
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
  });

  it('refuses every operation with UnsupportedServerError, says what is needed, and writes nothing', async () => {
    const locks = new LockClient(redis);
    try {
      const attempts = [
        () => locks.lock('a:{1}').acquireWrite({ waitMs: 500 }),
        () => locks.lock('a:{1}').tryAcquireRead(),
        () => locks.inspect('a:{1}'),
      ];
      for (const attempt of attempts) {
        const error = await rejection(attempt());
        expect(error).to.be.instanceOf(UnsupportedServerError);
        expect(error).to.have.property('code', 'RWLOCK_UNSUPPORTED_SERVER');
        expect(error.message)
          .to.match(/Redis 7\.0 or later/)
          .and.to.match(/upgrade the server/);
      }
      expect(await redis.dbsize()).to.equal(0);
      expect(await commandCalls(redis, ['eval', 'evalsha'])).to.equal(0);
    } finally {
      await locks.close();
    }
  });

  it('a server busy with a script at the first use is checked again once it answers, and refused then', async () => {
    const own = new Redis({ host: '127.0.0.1', port: server.port });
    const looper = new Redis({ host: '127.0.0.1', port: server.port });
    const locks = new LockClient(own);
    await redis.config('SET', 'busy-reply-threshold', '50');
    const looping = looper.eval('while true do end', 0).catch(() => undefined);
    try {
      await eventually('the server busy', async () =>
        /^BUSY/.test(String(await redis.info('memory').catch((error: Error) => error.message))),
      );
      expect((await rejection(locks.lock('a:{2}').tryAcquireWrite())).message).to.match(/BUSY/);
      await redis.call('SCRIPT', 'KILL');
      await looping;
      expect(await rejection(locks.lock('a:{2}').tryAcquireWrite())).to.be.instanceOf(UnsupportedServerError);
      expect(await redis.dbsize()).to.equal(0);
    } finally {
      await redis.call('SCRIPT', 'KILL').catch(() => undefined);
      await looping;
      await redis.config('SET', 'busy-reply-threshold', '5000');
      await locks.close();
      own.disconnect();
      looper.disconnect();
    }
  });
});

for (const command of ['TIME', 'PEXPIRETIME'] as const) {
  describe(`server check: a server without ${command}`, function () {
    this.timeout(30_000);
    let server: RedisServerHandle;
    let redis: Redis;
    before(async () => {
      // What a service that leaves the command out offers (TIME), or a server older than 7.0 (PEXPIRETIME).
      server = await startRedisServer({ args: ['--rename-command', command, '""'] });
      redis = new Redis({ host: '127.0.0.1', port: server.port });
    });
    after(async () => {
      redis.disconnect();
      await server.stop();
    });

    it(`refuses every operation with UnsupportedServerError naming ${command}, and writes nothing`, async () => {
      const locks = new LockClient(redis);
      try {
        for (const attempt of [() => locks.lock('a:{1}').acquireWrite({ waitMs: 500 }), () => locks.inspect('a:{1}')]) {
          const error = await rejection(attempt());
          expect(error).to.be.instanceOf(UnsupportedServerError);
          expect(error.message)
            .to.match(new RegExp(`has no ${command} command`))
            .and.to.match(/upgrade the server/);
        }
        expect(await redis.dbsize()).to.equal(0);
        expect(await commandCalls(redis, ['eval', 'evalsha'])).to.equal(0);
      } finally {
        await locks.close();
      }
    });
  });
}

describe('server check: a user without COMMAND', function () {
  this.timeout(30_000);
  let server: RedisServerHandle;
  before(async () => {
    server = await startRedisServer();
    const admin = new Redis({ host: '127.0.0.1', port: server.port });
    await admin.call('ACL', 'SETUSER', 'locker', 'on', '>secret', '~*', '&*', '+@all', '-command');
    admin.disconnect();
  });
  after(() => server.stop());

  it('cannot tell, so it lets the scripts run, and the lock works', async () => {
    const redis = new Redis({ host: '127.0.0.1', port: server.port, username: 'locker', password: 'secret' });
    const locks = new LockClient(redis);
    try {
      const lease = await locks.lock('a:{1}').acquireWrite();
      expect((await locks.inspect('a:{1}')).mode).to.equal('write');
      await lease.release();
      expect(await locks.lock('a:{1}').tryAcquireRead()).to.not.equal(undefined);
    } finally {
      await locks.close();
      redis.disconnect();
    }
  });
});

forEachTopology('server check', { clients: ALL_CLIENTS }, (ctx) => {
  const clients = suiteLockClients(ctx);

  it('asks once per client, before its first script, and then never again', async () => {
    const { redis } = clients;
    const locks = clients.open();
    const before = await commandCalls(redis, ['command\\|info']);
    for (let i = 0; i < 5; i++) await (await locks.lock(`check:{${i}}`).acquireWrite()).release();
    expect((await commandCalls(redis, ['command\\|info'])) - before).to.equal(1);
    expect(await totalKeys(redis)).to.equal(0);
  });
});

describe('server check: a plain connection to a Cluster node', function () {
  this.timeout(30_000);
  let cluster: RedisClusterHandle;
  before(async () => {
    cluster = await sharedCluster();
  });

  /** A lock whose slot the node on `port` serves, and one it does not. */
  async function locksAround(port: number): Promise<{ own: string; other: string }> {
    const names = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => ({ name: `node:{${i}}`, port: (await cluster.masterForKey(`rwlock:node:{${i}}`)).port })),
    );
    return { own: names.find((n) => n.port === port)!.name, other: names.find((n) => n.port !== port)!.name };
  }

  const PLAIN_NODE = /is a Redis Cluster node.*new Cluster\(\[\{ host, port \}\]\).*createCluster\(.*retrying will not help$/;

  for (const kind of ['ioredis', 'node-redis'] as const) {
    it(`${kind}: refuses it with UnsupportedServerError naming the Cluster client, before anything is written`, async () => {
      const [master] = await cluster.masters();
      const client =
        kind === 'ioredis'
          ? new Redis({ host: '127.0.0.1', port: master!.port })
          : await createClient({ socket: { host: '127.0.0.1', port: master!.port } }).connect();
      const locks = new LockClient(client);
      try {
        const { own, other } = await locksAround(master!.port);
        for (const name of [own, other]) {
          const error = await rejection(locks.lock(name).acquireWrite({ waitMs: 500 }));
          expect(error).to.be.instanceOf(UnsupportedServerError);
          expect(error.message).to.match(PLAIN_NODE);
        }
        expect(await clusterKeys(cluster)).to.equal(0);
      } finally {
        await locks.close();
        if (kind === 'ioredis') (client as Redis).disconnect();
        else (client as { destroy(): void }).destroy();
      }
    });
  }

  it('a user who may not run INFO: a MOVED reply says the same, never "may be retried"; its own slots work', async () => {
    const [master] = await cluster.masters();
    await adminOn(master!.port, ['ACL', 'SETUSER', 'noinfo', 'on', '>secret', '~*', '&*', '+@all', '-info']);
    const redis = new Redis({ host: '127.0.0.1', port: master!.port, username: 'noinfo', password: 'secret', enableReadyCheck: false });
    const locks = new LockClient(redis);
    try {
      const { own, other } = await locksAround(master!.port);
      const error = await rejection(locks.lock(other).acquireWrite({ waitMs: 500 }));
      expect(error).to.be.instanceOf(UnsupportedServerError);
      expect(error.message)
        .to.match(/MOVED \d+ /)
        .and.to.match(PLAIN_NODE)
        .and.not.match(/may be retried/);
      await (await locks.lock(own).acquireWrite()).release();
      expect(await clusterKeys(cluster)).to.equal(0);
    } finally {
      await locks.close();
      redis.disconnect();
      await adminOn(master!.port, ['ACL', 'DELUSER', 'noinfo']);
    }
  });
});

/** Keys on every master of the Cluster. */
async function clusterKeys(cluster: RedisClusterHandle): Promise<number> {
  const sizes = await Promise.all((await cluster.masters()).map((m) => adminOn(m.port, ['DBSIZE'])));
  return sizes.reduce<number>((sum, size) => sum + Number(size), 0);
}

/** One command on one node, on a connection of its own. */
async function adminOn(port: number, [command, ...args]: string[]): Promise<unknown> {
  const admin = new Redis({ host: '127.0.0.1', port, lazyConnect: true });
  try {
    await admin.connect();
    return await admin.call(command!, ...args);
  } finally {
    admin.disconnect();
  }
}
