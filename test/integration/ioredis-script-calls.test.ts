/**
 * A script call as the ioredis driver builds it. A `Command` built with its
 * arguments copies them with `Array.prototype.flat`, about 100 ns an
 * argument on Node 20: an acquire's 9 cost 1 µs of client CPU, as much as
 * the rest of ioredis' work on the call. The driver builds each script's
 * `Command` with no arguments and sets them after, so it copies none, with
 * autopipelining on and off; what ioredis' command methods give a call
 * still holds (a Buffer sent as its bytes, a friendly error stack).
 */
import { expect } from 'chai';
import type { Cluster, Redis } from 'ioredis';
import { holderArg } from '../../src/backends/scripts.js';
import { driverFor } from '../../src/clients/index.js';
import { IoredisDriver } from '../../src/clients/ioredis.js';
import { fencedSet, LockClient } from '../../src/index.js';
import { forEachTopology } from '../setup/topologies.js';
import { rejection } from '../support/rejection.js';

const realFlat = Array.prototype.flat;

/** Until its driver has found ioredis' Command (a dynamic import), a client's calls take ioredis' command methods. */
async function loaded(of: Redis | Cluster | IoredisDriver): Promise<void> {
  const driver = of instanceof IoredisDriver ? of : driverFor(of);
  await (driver as unknown as { loading?: Promise<void> }).loading;
}

/** The lists that `Array.prototype.flat` copied while `run` ran and that name one of its locks (`cost:`). */
async function flattened(run: () => Promise<void>): Promise<unknown[][]> {
  const copied: unknown[][] = [];
  Array.prototype.flat = function (this: unknown[], ...args: [number?]) {
    if (this.some((item) => typeof item === 'string' && item.includes('cost:'))) copied.push([...this]);
    return realFlat.apply(this, args);
  } as typeof realFlat;
  try {
    await run();
  } finally {
    Array.prototype.flat = realFlat;
  }
  return copied;
}

forEachTopology('a script call on ioredis', (ctx) => {
  // Also if a test timed out inside `flattened`.
  afterEach(() => {
    Array.prototype.flat = realFlat;
  });

  for (const enableAutoPipelining of [false, true]) {
    it(`copies none of its arguments${enableAutoPipelining ? ', autopipelining' : ''}`, async () => {
      const redis: Redis | Cluster = ctx.client({ enableAutoPipelining });
      const locks = new LockClient(redis);
      const cycles = async () => {
        for (const mode of ['read', 'write'] as const) {
          const lock = locks.lock(`cost:${mode}`);
          const lease = await (mode === 'read' ? lock.acquireRead() : lock.acquireWrite());
          await lease.extend();
          await lease.release();
        }
      };
      try {
        // The server check, the scripts loaded, ioredis' Command found, and on a Cluster the
        // connections to the locks' masters up (until then a call goes through the Cluster client).
        await cycles();
        await loaded(redis);
        expect(await flattened(cycles), 'lists of arguments copied').to.deep.equal([]);
      } finally {
        await locks.close();
      }
    });
  }

  it('sends a Buffer argument as its bytes, bytes that are not UTF-8 among them', async () => {
    const redis = ctx.client();
    await loaded(redis);
    const bytes = Buffer.from([0xff, 0x00, 0x80, 0x41, 0xc3]);
    await fencedSet(redis, 'blob:{cost}', bytes, 100);
    expect((await redis.getBuffer('blob:{cost}'))?.toString('hex')).to.equal(bytes.toString('hex'));
  });

  if (ctx.kind === 'standalone')
    it("carries the caller's stack in a script's error, on a client with showFriendlyErrorStack", async () => {
      const redis = ctx.client({ showFriendlyErrorStack: true }) as Redis;
      const driver = new IoredisDriver(redis);
      const args = (key: string) => [
        3,
        key,
        `rwlock#leases:${key}`,
        `rwlock#queue:${key}`,
        30_000,
        holderArg('write', 'x.0', 'me'),
        0,
        '0',
      ];
      await loaded(driver);
      expect(await driver.script('acquireWrite', args('rwlock:{stack-ok}'))).to.be.a('number'); // the script loaded
      await redis.set('rwlock:{stack}', 'not a hash');
      const error = await rejection(driver.script('acquireWrite', args('rwlock:{stack}')));
      expect(error.message).to.match(/WRONGTYPE/);
      expect(error.stack, 'the stack of the call').to.include('ioredis-script-calls.test.ts');
    });
});
