import { expect } from 'chai';
import sinon from 'sinon';
import { Watch } from '../../src/wakeups.js';

describe('Watch (waiter sleep)', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => (clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })));
  afterEach(() => clock.restore());

  it('returns at once when a wake-up arrived before the sleep began', async () => {
    const watch = new Watch(() => undefined);
    watch.notify();
    let done = false;
    void watch.sleep(10_000).then(() => (done = true));
    await clock.tickAsync(0);
    expect(done).to.equal(true);
  });

  it('ends the sleep on a wake-up', async () => {
    const watch = new Watch(() => undefined);
    let done = false;
    void watch.sleep(10_000).then(() => (done = true));
    await clock.tickAsync(5);
    expect(done).to.equal(false);
    watch.notify();
    await clock.tickAsync(0);
    expect(done).to.equal(true);
  });

  it('lets a waiting writer sleep through releases that name another writer as next', async () => {
    const writer = new Watch(() => undefined, 'me');
    const reader = new Watch(() => undefined);
    for (const message of ['write:other', 'read:other:with:colons', 'write:me:not-quite']) {
      writer.notify(message);
      reader.notify(message);
      expect(writer.woken, message).to.equal(false);
      expect(reader.woken, message).to.equal(true);
      reader.woken = false;
    }
    for (const message of ['write:me', 'read', 'abandon']) {
      writer.notify(message);
      expect(writer.woken, message).to.equal(true);
      writer.woken = false;
    }
    writer.notify(); // the hub closing
    expect(writer.woken).to.equal(true);
  });

  it('ends the sleep after its bound without a wake-up', async () => {
    const watch = new Watch(() => undefined);
    let done = false;
    void watch.sleep(300).then(() => (done = true));
    await clock.tickAsync(299);
    expect(done).to.equal(false);
    await clock.tickAsync(1);
    expect(done).to.equal(true);
    expect(clock.countTimers()).to.equal(0);
  });

  it('ends the sleep on abort and leaves no timer behind', async () => {
    const watch = new Watch(() => undefined);
    const controller = new AbortController();
    let done = false;
    void watch.sleep(10_000, controller.signal).then(() => (done = true));
    controller.abort();
    await clock.tickAsync(0);
    expect(done).to.equal(true);
    expect(clock.countTimers()).to.equal(0);
  });
});
