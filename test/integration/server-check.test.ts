/**
 * The server check: before a client's first script the library asks the
 * server for SPUBLISH (Redis 7.0, which brought script flags too) and refuses
 * a server without it with a typed error, changing nothing. Against real
 * servers: one where SPUBLISH is renamed away (what an older server lacks),
 * one whose ACL user may not run COMMAND, and the shared topologies.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { LockClient, UnsupportedServerError } from '../../src/index.js';
import { type RedisServerHandle, startRedisServer } from '../../src/testing/index.js';
import { forEachTopology } from '../setup/topologies.js';
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
});

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

forEachTopology('server check', (ctx) => {
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
