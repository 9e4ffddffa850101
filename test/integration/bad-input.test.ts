import { expect } from 'chai';
import { ClientClosedError, InvalidArgumentError, LockClient, LockNotHeldError, RWLockError, type Lease } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import { totalKeys } from '../support/redis-stats.js';
import { forEachTopology } from '../setup/topologies.js';

type AnyOptions = any; // hostile values on purpose

forEachTopology('bad input', (ctx) => {
  let redis: RedisClient;
  let locks: LockClient;
  let held: Lease;

  beforeEach(async () => {
    redis = ctx.client();
    locks = new LockClient(redis);
    held = await locks.lock('existing').acquireWrite(); // some state that must stay as it is
  });
  afterEach(async () => {
    await locks.close();
  });

  const lock = () => locks.lock('target');
  type ErrorClass = abstract new (...args: never[]) => RWLockError;
  const cases: [string, () => unknown, ErrorClass][] = [
    ['an empty resource', () => locks.lock(''), InvalidArgumentError],
    ['a non-string resource', () => locks.lock(42 as AnyOptions), InvalidArgumentError],
    ['an oversized resource', () => locks.lock('x'.repeat(5_000)), InvalidArgumentError],
    ['a resource with a lone surrogate', () => locks.lock('bad\ud800'), InvalidArgumentError],
    ['a zero lease', () => lock().acquireRead({ leaseMs: 0 }), InvalidArgumentError],
    ['a negative lease', () => lock().acquireRead({ leaseMs: -5 }), InvalidArgumentError],
    ['a NaN lease', () => lock().acquireWrite({ leaseMs: NaN }), InvalidArgumentError],
    ['an infinite lease', () => lock().acquireWrite({ leaseMs: Infinity }), InvalidArgumentError],
    ['a fractional lease', () => lock().acquireWrite({ leaseMs: 1.5 }), InvalidArgumentError],
    ['a huge wait', () => lock().acquireWrite({ waitMs: 2 ** 40 }), InvalidArgumentError],
    ['a negative wait', () => lock().acquireWrite({ waitMs: -1 }), InvalidArgumentError],
    ['an infinite wait', () => lock().acquireRead({ waitMs: Infinity }), InvalidArgumentError],
    ['an empty owner', () => lock().acquireWrite({ owner: '' }), InvalidArgumentError],
    ['a non-string owner', () => lock().tryAcquireWrite({ owner: 5 as AnyOptions }), InvalidArgumentError],
    ['an owner with a newline', () => lock().tryAcquireRead({ owner: 'a\nb' }), InvalidArgumentError],
    ['a signal that is not an AbortSignal', () => lock().acquireRead({ signal: 'stop' as AnyOptions }), InvalidArgumentError],
    ['an unknown option', () => lock().acquireRead({ leasems: 5 } as AnyOptions), InvalidArgumentError],
    ['a wait on a try-acquire', () => lock().tryAcquireWrite({ waitMs: 10 } as AnyOptions), InvalidArgumentError],
    ['options that are not an object', () => lock().acquireRead('fast' as AnyOptions), InvalidArgumentError],
    ['a prototype-polluting options object', () => lock().acquireRead(JSON.parse('{"__proto__":{"leaseMs":1}}')), InvalidArgumentError],
    ['a prefix with braces', () => new LockClient(redis, { prefix: 'a{b}' }), InvalidArgumentError],
    ['an empty prefix', () => new LockClient(redis, { prefix: '' }), InvalidArgumentError],
    ['a non-client', () => new LockClient({} as AnyOptions), InvalidArgumentError],
    ['a zero client lease', () => new LockClient(redis, { leaseMs: 0 }), InvalidArgumentError],
    ['a zero extension', () => held.extend(0), InvalidArgumentError],
    ['withWrite without a function', () => locks.withWrite('target', 'rebuild' as AnyOptions), InvalidArgumentError],
  ];

  for (const [what, call, type] of cases) {
    it(`refuses ${what} with ${type.name} and leaves Redis untouched`, async () => {
      const before = await totalKeys(redis);
      let error: unknown;
      try {
        await call();
      } catch (e) {
        error = e;
      }
      expect(error, 'should have thrown').to.be.instanceOf(type);
      expect(error).to.be.instanceOf(RWLockError);
      expect((error as Error).message.length).to.be.greaterThan(15);
      expect(await totalKeys(redis)).to.equal(before);
      expect((await locks.inspect('existing')).writer?.owner).to.equal(held.token);
    });
  }

  it("refuses a lost lease's release with LockNotHeldError and leaves the new owner's lock alone", async () => {
    const lost = await lock().acquireWrite({ leaseMs: 50 });
    await new Promise((resolve) => setTimeout(resolve, 120));
    const current = await lock().acquireWrite();
    const before = await totalKeys(redis);
    const error = await lost.release().then(() => undefined, (e) => e);
    expect(error).to.be.instanceOf(LockNotHeldError);
    expect(await totalKeys(redis)).to.equal(before);
    expect((await lock().inspect()).writer?.owner).to.equal(current.token);
    await current.release();
  });

  it('refuses every operation of a closed LockClient, and of one whose ioredis client was closed', async () => {
    const closing = new LockClient(redis);
    await closing.close();
    expect(() => closing.lock('target')).to.throw(ClientClosedError);
    const own = ctx.client();
    const onOwn = new LockClient(own);
    const target = onOwn.lock('target');
    await own.quit();
    const before = await totalKeys(redis);
    const error = await target.acquireWrite().then(() => undefined, (e) => e);
    expect(error).to.be.instanceOf(ClientClosedError);
    expect(() => new LockClient(own)).to.throw(ClientClosedError);
    expect(await totalKeys(redis)).to.equal(before);
    await onOwn.close();
  });
});
