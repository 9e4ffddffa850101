/**
 * The one-timer bound of every call (src/deadlines.ts): a call settled before
 * it was listed (an aborted signal, a closed LockClient) leaves the other
 * pending calls' bounds in place, and `close()` ends only the calls that say
 * what closing means.
 */
import { expect } from 'chai';
import { Deadlines } from '../../src/deadlines.js';
import { rejection } from '../support/rejection.js';

const never = () => new Promise<never>(() => undefined);
const errors = (name: string) => ({ late: () => new Error(`${name} late`), aborted: () => new Error(`${name} aborted`) });

describe('Deadlines', () => {
  it('a call whose signal aborted before it started leaves the bound of the calls pending', async () => {
    const deadlines = new Deadlines();
    const pending = rejection(deadlines.race(never(), performance.now() + 20, errors('pending')));
    const stop = new AbortController();
    stop.abort();
    const aborted = await rejection(deadlines.race(never(), performance.now() + 60_000, errors('aborted'), stop.signal));
    expect((aborted as Error).message).to.equal('aborted aborted');
    // Before the fix, the aborted call unlinked the list's head: the pending call never ended.
    expect(((await pending) as Error).message).to.equal('pending late');
  });

  it('close() ends the calls with a closed() error at once, and every such call made after it; others wait on', async () => {
    const deadlines = new Deadlines();
    const closable = { ...errors('acquire'), closed: () => new Error('acquire closed') };
    const acquiring = rejection(deadlines.race(never(), performance.now() + 60_000, closable));
    const releasing = rejection(deadlines.race(never(), performance.now() + 30, errors('release')));
    deadlines.close();
    expect(((await acquiring) as Error).message).to.equal('acquire closed');
    expect(((await rejection(deadlines.race(never(), performance.now() + 60_000, closable))) as Error).message).to.equal('acquire closed');
    expect(((await releasing) as Error).message).to.equal('release late');
    expect(await deadlines.race(Promise.resolve(7), performance.now() + 60_000, errors('answered'))).to.equal(7);
  });
});
