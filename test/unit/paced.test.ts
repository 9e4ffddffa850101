/**
 * `PacedQueue`: at most a few calls in flight, tracked for `close()`; an
 * optional call is not sent once `close()`'s bound has passed, and settles
 * unsent (a caller awaiting it must not wait forever), while the others
 * still go.
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
    const outcomes = calls.map((c) => queue.run(c.call, 'a call', true));
    expect(calls.map((c) => c.sent())).to.deep.equal([true, true, false]);
    calls[0]!.answer();
    expect(await outcomes[0]).to.equal('answered');
    await new Promise(setImmediate); // the loop that sent it goes on once its microtasks ran
    expect(calls[2]!.sent()).to.equal(true);
    calls[1]!.answer();
    calls[2]!.answer();
    expect(await Promise.all(outcomes)).to.deep.equal(['answered', 'answered', 'answered']);
  });

  it("drops the optional calls still queued once close()'s bound has passed, and rejects them; sends the others", async () => {
    const cleanups = new Cleanups();
    const queue = new PacedQueue(1, cleanups);
    const first = pending();
    const optional = pending();
    const needed = pending();
    const answered = queue.run(first.call, 'the first call', true);
    const dropped = queue.run(optional.call, 'the optional call', true);
    const sentLate = queue.run(needed.call, 'the needed call', false);
    cleanups.closed(); // close() has settled
    first.answer();
    expect(await answered).to.equal('answered');
    const error = await dropped.catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ClientClosedError);
    expect((error as Error).message).to.match(/^the optional call was not sent: the LockClient was closed first/);
    expect(optional.sent()).to.equal(false);
    await new Promise(setImmediate); // the loop goes on with the next call once its microtasks ran
    expect(needed.sent(), 'a call that is not optional, after the bound').to.equal(true);
    needed.answer();
    expect(await sentLate).to.equal('answered');
    await cleanups.settled(); // the loop that sent them was tracked, and has ended
  });

  it("drops an optional call pushed after close()'s bound at once, even behind a call that never answers", async () => {
    const cleanups = new Cleanups();
    const queue = new PacedQueue(1, cleanups);
    const stuck = pending();
    void queue.run(stuck.call, 'a call to a node that never answers', false);
    cleanups.closed();
    const error = await queue.run(async () => 'sent', 'the late optional call', true).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ClientClosedError);
  });

  it('drops the optional calls queued behind a call that never answers once close() has settled', async () => {
    const cleanups = new Cleanups();
    const queue = new PacedQueue(1, cleanups);
    const stuck = pending();
    void queue.run(stuck.call, 'a call to a node that never answers', false);
    const queued = queue.run(async () => 'sent', 'an optional call', true);
    const needed = pending();
    void queue.run(needed.call, 'a needed call', false);
    cleanups.closed();
    expect(await queued.catch((e: unknown) => e)).to.be.instanceOf(ClientClosedError);
    stuck.answer();
    await new Promise(setImmediate);
    expect(needed.sent(), 'the needed call, still sent once the node answers').to.equal(true);
  });

  it('rejects a call that throws at once, and goes on with the next', async () => {
    const queue = new PacedQueue(1, new Cleanups());
    const thrown = queue.run(
      () => {
        throw new Error('at once');
      },
      'a call',
      true,
    );
    const next = queue.run(async () => 'next', 'the next call', true);
    expect(await thrown.catch((e: unknown) => (e as Error).message)).to.equal('at once');
    expect(await next).to.equal('next');
  });
});
