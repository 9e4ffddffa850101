import { expect } from 'chai';
import { CallGate } from '../../src/clients/glide.js';

describe('CallGate (GLIDE driver)', () => {
  it('runs at most its limit at once, and the rest in the order they came', async () => {
    const gate = new CallGate(2);
    const started: number[] = [];
    const finish: (() => void)[] = [];
    let running = 0;
    let most = 0;
    const calls = Array.from({ length: 6 }, (_, i) =>
      gate.run(
        () =>
          new Promise<number>((resolve) => {
            started.push(i);
            running++;
            most = Math.max(most, running);
            finish[i] = () => {
              running--;
              resolve(i);
            };
          }),
      ),
    );
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).to.deep.equal([0, 1]);
    // The later calls end first: the waiting ones still start in arrival order.
    for (const i of [1, 0, 3, 2, 5, 4]) {
      await new Promise((resolve) => setImmediate(resolve));
      finish[i]!();
    }
    expect(await Promise.all(calls)).to.deep.equal([0, 1, 2, 3, 4, 5]);
    expect(started).to.deep.equal([0, 1, 2, 3, 4, 5]);
    expect(most).to.equal(2);
  });

  it('frees the slot of a call that fails', async () => {
    const gate = new CallGate(1);
    const failed = gate.run(() => Promise.reject(new Error('refused')));
    const next = gate.run(() => Promise.resolve('ran'));
    expect(await failed.catch((error: Error) => error.message)).to.equal('refused');
    expect(await next).to.equal('ran');
  });
});
