import { expect } from 'chai';
import { InvalidArgumentError, RWLockError } from '../../src/errors.js';
import { validatePrefix } from '../../src/keys/keys.js';
import { CLIENT_DEFAULTS, duration, MAX_DURATION_MS, ownerToken, ownOptions, resolveClientOptions } from '../../src/options.js';

describe('options', () => {
  it('fills in the defaults', () => {
    expect(resolveClientOptions(undefined, validatePrefix)).to.deep.equal(CLIENT_DEFAULTS);
    expect(resolveClientOptions({ leaseMs: 1000 }, validatePrefix).leaseMs).to.equal(1000);
  });

  for (const bad of [0, -1, NaN, Infinity, -Infinity, 1.5, MAX_DURATION_MS + 1, '100', null, 10n]) {
    it(`refuses the duration ${String(bad)}`, () => {
      expect(() => duration('leaseMs', bad, 10)).to.throw(InvalidArgumentError, /leaseMs: must be a whole number/);
    });
  }

  it('accepts the duration bounds', () => {
    expect(duration('waitMs', 0, 0)).to.equal(0);
    expect(duration('waitMs', MAX_DURATION_MS, 0)).to.equal(MAX_DURATION_MS);
  });

  it('takes linkCheckMs from 50 ms, and says what it must be otherwise', () => {
    expect(CLIENT_DEFAULTS.linkCheckMs).to.equal(2_500);
    expect(resolveClientOptions({ linkCheckMs: 50 }, validatePrefix).linkCheckMs).to.equal(50);
    expect(resolveClientOptions({ linkCheckMs: 60_000 }, validatePrefix).linkCheckMs).to.equal(60_000);
    for (const bad of [49, 0, -1, NaN, Infinity, 2.5e3 + 0.5, MAX_DURATION_MS + 1, '2500', null]) {
      expect(() => resolveClientOptions({ linkCheckMs: bad }, validatePrefix), String(bad)).to.throw(
        InvalidArgumentError,
        /^linkCheckMs: must be a whole number of milliseconds from 50 to 2147483647, got /,
      );
    }
  });

  it('refuses unknown option names, so a typo is not silently ignored', () => {
    expect(() => resolveClientOptions({ leasems: 5 }, validatePrefix)).to.throw(InvalidArgumentError, /unknown option "leasems"/);
  });

  it('ignores inherited properties, so a polluted prototype cannot inject options', () => {
    const polluted = Object.create({ leaseMs: 1 });
    expect(resolveClientOptions(polluted, validatePrefix).leaseMs).to.equal(CLIENT_DEFAULTS.leaseMs);
    const parsed = JSON.parse('{"__proto__": {"leaseMs": 1}}');
    expect(() => resolveClientOptions(parsed, validatePrefix)).to.throw(InvalidArgumentError, /unknown option "__proto__"/);
  });

  it('refuses options that are not plain objects', () => {
    for (const bad of [null, 5, 'x', [1]]) expect(() => ownOptions(bad, ['a'], 'options')).to.throw(InvalidArgumentError);
  });

  it('checks owner tokens', () => {
    expect(ownerToken('worker-1')).to.equal('worker-1');
    for (const bad of ['', 5, 'a\nb', 'x'.repeat(257), '\udc00']) expect(() => ownerToken(bad)).to.throw(InvalidArgumentError, /owner/);
  });

  it('errors carry a name, the argument and the context', () => {
    try {
      duration('waitMs', -5, 0, { resource: 'r', mode: 'read', owner: 'o' });
      expect.fail('should throw');
    } catch (error) {
      expect(error).to.be.instanceOf(RWLockError);
      const e = error as InvalidArgumentError;
      expect(e.name).to.equal('InvalidArgumentError');
      expect(e.argument).to.equal('waitMs');
      expect([e.resource, e.mode, e.owner]).to.deep.equal(['r', 'read', 'o']);
      expect(e.stack).to.include('InvalidArgumentError');
    }
  });
});
