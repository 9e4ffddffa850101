// Property tests of key routing (no server needed): for arbitrary names, every
// Redis name of one lock shares a Cluster slot, and two different resources
// never share a lock, except the documented equivalence of a tagless `x` with
// `{x}` (Redis itself hashes both the same way).
import { expect } from 'chai';
import fc from 'fast-check';
import { InvalidArgumentError, RWLockError } from '../../src/errors.js';
import { hashTagOf, lockKeys, MAX_RESOURCE_BYTES, validatePrefix, validateResource } from '../../src/keys/keys.js';

/**
 * Redis's keyHashSlot (cluster.c), byte for byte: the hash tag is what lies
 * between the first "{" and the first "}" after it, unless that is empty;
 * then, or without a tag, the whole name is hashed (CRC16/XMODEM). The
 * oracle here, not cluster-key-slot, which reads an empty first tag
 * differently ("a{}b}" hashes "b" there, the whole name in Redis).
 */
function redisSlot(name: string): number {
  const bytes = Buffer.from(name);
  let [from, to] = [0, bytes.length];
  const open = bytes.indexOf(0x7b);
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) [from, to] = [open + 1, close];
  }
  let crc = 0;
  for (let i = from; i < to; i++) {
    crc ^= bytes[i]! << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc & 16383;
}

/** Characters that matter to routing, plus some that matter to encodings. */
const AWKWARD = [
  '{',
  '}',
  '{',
  '}',
  'a',
  'b',
  ':',
  '#',
  ' ',
  'é',
  '日',
  '😀',
  '\u200d',
  '\ufeff',
  '\ud800',
  '\udfff',
  '\n',
  '\u0000',
  '\u007f',
];
const awkwardString = fc.string({ unit: fc.constantFrom(...AWKWARD), maxLength: 12 });
/** Any string: awkward characters, any code point, or any UTF-16 unit (lone surrogates included). */
const anyString = fc.oneof(
  { weight: 3, arbitrary: awkwardString },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 20 }) },
);
const prefix = fc.oneof(
  fc.constant('rwlock'),
  fc.string({ unit: fc.constantFrom('a', 'z', ':', '-', '_', '.', 'é', '日'), minLength: 1, maxLength: 10 }),
);

function isValidResource(resource: string): boolean {
  try {
    validateResource(resource);
    return true;
  } catch (error) {
    expect(error).to.be.instanceOf(InvalidArgumentError);
    return false;
  }
}

/** The documented equivalence: a tagless `x` and `{x}` (when `{x}` carries a tag) are one lock. */
function equivalent(a: string, b: string): boolean {
  const wrapped = (x: string, y: string) => y === `{${x}}` && hashTagOf(x) === undefined && hashTagOf(y) !== undefined;
  return a === b || wrapped(a, b) || wrapped(b, a);
}

describe('key routing (properties)', () => {
  it('accepts or refuses every string with a typed error, never anything else', () => {
    fc.assert(
      fc.property(anyString, (resource) => {
        try {
          validateResource(resource);
        } catch (error) {
          expect(error).to.be.instanceOf(RWLockError);
          expect(error).to.be.instanceOf(InvalidArgumentError);
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it("puts every name of a lock in one slot, the slot of the resource's own hash tag when it has one", () => {
    fc.assert(
      fc.property(prefix, anyString, (p, resource) => {
        fc.pre(isValidResource(resource));
        const keys = lockKeys(validatePrefix(p), resource);
        for (const name of [keys.state, keys.leases, keys.queue, keys.channel]) {
          expect(redisSlot(name), name).to.equal(keys.slot);
          expect(name.startsWith(p)).to.equal(true);
        }
        const tag = hashTagOf(resource);
        if (tag !== undefined) {
          // The user's own data key with that tag lands in the lock's slot.
          expect(keys.slot)
            .to.equal(redisSlot(resource))
            .and.to.equal(redisSlot(`{${tag}}`));
        }
        expect(new Set([keys.state, keys.leases, keys.queue]).size).to.equal(3);
      }),
      { numRuns: 2_000 },
    );
  });

  it('gives two resources the same keys only when they are equal or the documented x ≡ {x} pair', () => {
    // Pairs built from one small alphabet, plus pairs where one is the other wrapped, so that near-collisions are common.
    const pair = fc.oneof(
      fc.tuple(awkwardString, awkwardString),
      awkwardString.map((x) => [x, `{${x}}`] as [string, string]),
      fc.tuple(awkwardString, awkwardString).map(([x, y]) => [`${x}{${y}}`, `{${y}}${x}`] as [string, string]),
    );
    fc.assert(
      fc.property(prefix, pair, (p, [a, b]) => {
        fc.pre(isValidResource(a) && isValidResource(b));
        const ka = lockKeys(p, a);
        const kb = lockKeys(p, b);
        const names = (k: typeof ka) => [k.state, k.leases, k.queue];
        const shared = names(ka).filter((n) => names(kb).includes(n));
        if (equivalent(a, b)) {
          expect(shared).to.deep.equal(names(ka));
        } else {
          // Not one name in common: neither the same lock nor a key of one lock reused by another.
          expect(shared, `${JSON.stringify(a)} vs ${JSON.stringify(b)}`).to.deep.equal([]);
        }
      }),
      { numRuns: 5_000 },
    );
  });

  it('never lets the names of two locks of different colon-free prefixes collide', () => {
    // With a ':' in a prefix they can: prefix 'app' with resource 'x:{1}' and prefix
    // 'app:x' with resource '{1}' share the hash 'app:x:{1}' (not their other keys).
    const colonFree = fc.string({ unit: fc.constantFrom('a', 'z', '-', '_', '.', 'é'), minLength: 1, maxLength: 6 });
    fc.assert(
      fc.property(colonFree, colonFree, awkwardString, awkwardString, (p, q, a, b) => {
        fc.pre(p !== q && isValidResource(a) && isValidResource(b));
        const all = (k: ReturnType<typeof lockKeys>) => [k.state, k.leases, k.queue];
        const pa = all(lockKeys(p, a));
        for (const name of all(lockKeys(q, b))) expect(pa).to.not.include(name);
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses names over the byte limit however the bytes are made', () => {
    const unit = fc.constantFrom('a', 'é', '日', '😀');
    fc.assert(
      fc.property(unit, fc.integer({ min: 1, max: 8 }), (u, extra) => {
        const bytesPer = Buffer.byteLength(u);
        const fits = u.repeat(Math.floor(MAX_RESOURCE_BYTES / bytesPer));
        expect(validateResource(fits)).to.equal(fits);
        expect(() => validateResource(fits + u.repeat(extra))).to.throw(InvalidArgumentError);
      }),
    );
  });
});
