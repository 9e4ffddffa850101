import { expect } from 'chai';
import calculateSlot from 'cluster-key-slot';
import { InvalidArgumentError } from '../../src/errors.js';
import { hashTagOf, lockKeys, MAX_RESOURCE_BYTES, slotPart, validatePrefix, validateResource } from '../../src/keys/keys.js';

describe('key routing', () => {
  it('wraps a resource without a hash tag in braces', () => {
    const keys = lockKeys('rwlock', 'cache:user:42');
    expect(keys.state).to.equal('rwlock:{cache:user:42}');
    expect(keys.leases).to.equal('rwlock#leases:{cache:user:42}');
    expect(keys.queue).to.equal('rwlock#queue:{cache:user:42}');
    expect(keys.channel).to.equal(keys.state);
    expect(keys.slot).to.equal(calculateSlot('cache:user:42'));
  });

  it('keeps a non-empty hash tag, so the lock lands in the slot of the data', () => {
    const keys = lockKeys('rwlock', 'user:{42}:profile');
    expect(keys.state).to.equal('rwlock:user:{42}:profile');
    expect(keys.slot).to.equal(calculateSlot('user:{42}:profile')).and.to.equal(calculateSlot('42'));
  });

  // Each awkward name: the tag Redis would hash, and the slot every name of its lock must share
  // (a name that starts with "}" and has no tag of its own is refused: see below).
  const awkward: [string, string | undefined][] = [
    ['a{b}c', 'b'],
    ['{}', undefined],
    ['{', undefined],
    ['}{x}', 'x'],
    ['{a}{b}', 'a'],
    ['{}{b}', undefined],
    ['a{{b}}', '{b'],
    ['日本語{ロック}', 'ロック'],
    ['emoji 🔒 lock', undefined],
    ['x'.repeat(1024), undefined],
    [`{${'y'.repeat(1022)}}`, 'y'.repeat(1022)],
  ];
  for (const [resource, tag] of awkward) {
    it(`routes ${JSON.stringify(resource.length > 30 ? `${resource.slice(0, 12)}…(${resource.length})` : resource)} to one slot`, () => {
      expect(hashTagOf(resource)).to.equal(tag);
      const keys = lockKeys('rwlock', resource);
      const slots = [keys.state, keys.leases, keys.queue, keys.channel].map((k) => calculateSlot(k));
      expect(new Set(slots).size).to.equal(1);
      expect(keys.slot).to.equal(slots[0]);
      if (tag !== undefined) expect(keys.slot).to.equal(calculateSlot(resource));
    });
  }

  it('gives distinct resources distinct keys, also when one looks like a derived name', () => {
    const names = ['a', 'x{a}', 'x{a}:leases', '#leases:{a}', 'leases:{a}', '{}', '{}{}', '{', '{}}', 'x}{'];
    const all = names.flatMap((n) => {
      const k = lockKeys('rwlock', n);
      return [k.state, k.leases, k.queue];
    });
    expect(new Set(all).size).to.equal(all.length);
  });

  it('names the same lock for a tagless resource and that resource in braces, as Redis would', () => {
    for (const r of ['a', '{x', 'x}', '{}']) {
      expect(hashTagOf(r)).to.equal(undefined);
      expect(lockKeys('p', `{${r}}`)).to.deep.equal(lockKeys('p', r));
    }
  });

  it('wraps only when Redis would not find a tag', () => {
    expect(slotPart('plain')).to.equal('{plain}');
    expect(slotPart('{}x')).to.equal('{{}x}');
    expect(slotPart('t{1}')).to.equal('t{1}');
  });

  it('refuses a resource whose lock names would have an empty hash tag, and takes it with a tag of its own', () => {
    for (const resource of ['}x', '}', '}{}']) {
      expect(() => validateResource(resource), resource).to.throw(InvalidArgumentError, /empty hash tag/);
      expect(() => lockKeys('p', resource), resource).to.throw(InvalidArgumentError, /empty hash tag/);
    }
    expect(lockKeys('p', '{orders}}x').slot).to.equal(calculateSlot('orders'));
    expect(lockKeys('p', 'x}').state).to.equal('p:{x}}');
  });

  describe('validation', () => {
    const badResources: unknown[] = [
      '',
      42,
      null,
      undefined,
      {},
      ['a'],
      'a\u0000b',
      'tab\there',
      '\ud800',
      'x'.repeat(MAX_RESOURCE_BYTES + 1),
    ];
    for (const bad of badResources) {
      it(`refuses the resource ${typeof bad === 'string' ? JSON.stringify(bad.slice(0, 12)) : String(bad)}`, () => {
        expect(() => validateResource(bad)).to.throw(InvalidArgumentError, /resource/);
      });
    }
    it('accepts a resource of exactly the byte limit, counted in UTF-8', () => {
      expect(validateResource('x'.repeat(MAX_RESOURCE_BYTES))).to.have.length(MAX_RESOURCE_BYTES);
      expect(() => validateResource('é'.repeat(MAX_RESOURCE_BYTES / 2 + 1))).to.throw(InvalidArgumentError);
    });
    it('names a value of the wrong type with its article: an object, a function', () => {
      expect(() => validateResource({})).to.throw(InvalidArgumentError, /got an object$/);
      expect(() => validateResource(() => 'a')).to.throw(InvalidArgumentError, /got a function$/);
    });
    for (const bad of ['', 'a{b', 'a}b', 'a#b', 'a b', 7, 'p'.repeat(300)]) {
      it(`refuses the prefix ${JSON.stringify(bad).slice(0, 20)}`, () => {
        expect(() => validatePrefix(bad)).to.throw(InvalidArgumentError, /prefix/);
      });
    }
  });
});
