/**
 * `PacedQueue`: at most a few calls in flight, tracked for `close()`, and
 * none sent once `close()`'s bound has passed; a call dropped unsent
 * settles (a caller awaiting it must not wait forever).
 */
import { expect } from 'chai';
import { Cleanups } from '../../src/cleanups.js';
import { ClientClosedError } from '../../src/errors.js';
import { PacedQueue } from '../../src/paced.js';

/** A call that stays in flight until `answer` is called. */
function pending(): { call: () => Promise<string>; answer: () => void; sent: () => boolean } {
  let answer: () => void = () => undefined;
  let sent = false;
  const call = () => {
    sent = true;
    return new Promise<string>((resolve) => (answer = () => resolve('answered')));
  };
  return { call, answer: () => answer(), sent: () => sent };
}

describe('PacedQueue', () => {
  it('sends at most its number in flight, the next as one settles', async () => {
    const queue = new PacedQueue(2, new Cleanups());
    const calls = [pending(), pending(), pending()];
    const outcomes = calls.map((c) => queue.run(c.call, 'a call'));
    expect(calls.map((c) => c.sent())).to.deep.equal([true, true, false]);
    calls[0]!.answer();
    expect(await outcomes[0]).to.equal('answered');
    await new Promise(setImmediate); // the loop that sent it goes on once its microtasks ran
    expect(calls[2]!.sent()).to.equal(true);
    calls[1]!.answer();
    calls[2]!.answer();
    expect(await Promise.all(outcomes)).to.deep.equal(['answered', 'answered', 'answered']);
  });

  it("drops the calls still queued once close()'s bound has passed, and rejects them", async () => {
    const cleanups = new Cleanups();
    const queue = new PacedQueue(1, cleanups);
    const first = pending();
    const second = pending();
    const answered = queue.run(first.call, 'the first call');
    const dropped = queue.run(second.call, 'the second call');
    cleanups.closing(performance.now()); // close() began, and its bound is already past
    first.answer();
    expect(await answered).to.equal('answered');
    const error = await dropped.catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ClientClosedError);
    expect((error as Error).message).to.match(/^the second call was not sent: the LockClient was closed first/);
    expect(second.sent()).to.equal(false);
    await cleanups.settled(); // the loop that sent them was tracked, and has ended
  });

  it('rejects a call that throws at once, and goes on with the next', async () => {
    const queue = new PacedQueue(1, new Cleanups());
    const thrown = queue.run(() => {
      throw new Error('at once');
    }, 'a call');
    const next = queue.run(async () => 'next', 'the next call');
    expect(await thrown.catch((e: unknown) => (e as Error).message)).to.equal('at once');
    expect(await next).to.equal('next');
  });
});
