/**
 * What a writer that stops waiting, or a hold given back, takes out of the
 * lock: its own try's place in the writers' queue, never the place of a
 * newer try of the same owner (an explicit `owner` may wait in two acquires
 * at once), which a release hands the lock to.
 */
import { expect } from 'chai';
import { AcquireAbortedError, LockClient } from '../../src/index.js';
import { forEachTopology } from '../setup/topologies.js';
import { eventually } from '../support/eventually.js';
import { rejection } from '../support/rejection.js';

forEachTopology('withdrawing from the writers queue', (ctx) => {
  const closing: LockClient[] = [];
  afterEach(async () => {
    for (const locks of closing.splice(0)) await locks.close();
  });

  it("an acquire that gives up leaves the place of the same owner's newer waiting acquire", async () => {
    const redis = ctx.client();
    const locks = new LockClient(redis);
    const others = new LockClient(ctx.client());
    closing.push(locks, others);
    const lock = locks.lock('withdraw');
    const { state, queue } = lock.keys;
    const holder = await others.lock('withdraw').acquireWrite();
    const giveUp = new AbortController();
    const first = rejection(lock.acquireWrite({ owner: 'owner-x', waitMs: 20_000, signal: giveUp.signal }));
    await eventually('the first acquire to queue', async () => (await redis.hget(state, 'g:owner-x')) !== null);
    const firstTry = await redis.hget(state, 'g:owner-x');
    // The same owner waits in a second acquire: its try takes over the owner's place in the queue.
    const second = lock.acquireWrite({ owner: 'owner-x', waitMs: 20_000 });
    second.catch(() => undefined); // awaited below; rejected by close() if the test fails first
    await eventually('the second acquire to queue', async () => (await redis.hget(state, 'g:owner-x')) !== firstTry);
    const third = others.lock('withdraw').acquireWrite({ waitMs: 20_000 });
    third.catch(() => undefined);
    await eventually('another writer to queue behind', async () => (await redis.zcard(queue)) === 2);
    giveUp.abort();
    expect(await first).to.be.instanceOf(AcquireAbortedError);
    await redis.exists(state); // on the lock's connection: behind the first acquire's withdrawal
    expect(await redis.zscore(queue, 'owner-x'), "the owner's place").to.not.equal(null);
    // The release hands the lock to the queue's head: the second acquire, not the writer behind it.
    await holder.release();
    await eventually('a writer to hold the lock', async () => (await others.inspect('withdraw')).writer !== null);
    expect((await others.inspect('withdraw')).writer?.owner).to.equal('owner-x');
    await (await second).release();
    await (await third).release();
  });
});
