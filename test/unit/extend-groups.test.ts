import { expect } from 'chai';
import { extendByGroup } from '../../src/backends/extend-groups.js';

describe('extendByGroup', () => {
  it('fills the answers of the groups that succeeded and leaves NaN for a failed one', async () => {
    const results = await extendByGroup(4, [[0, 1], [2], [3]], async (indexes, out) => {
      if (indexes[0] === 2) throw new Error('node down');
      for (const i of indexes) out[i] = 100 + i;
    });
    expect(results.slice(0, 2)).to.deep.equal([100, 101]);
    expect(Number.isNaN(results[2])).to.equal(true);
    expect(results[3]).to.equal(103);
  });

  it('throws the first error when every group failed', async () => {
    const error = await extendByGroup(2, [[0], [1]], async () => {
      throw new Error('all down');
    }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(error?.message).to.equal('all down');
  });
});
