import { expect } from 'chai';
import calculateSlot from 'cluster-key-slot';
import { resourceOf } from '../../src/cli/commands/list.js';
import { parseClusterNodes, redact } from '../../src/cli/connect.js';
import { duration, table } from '../../src/cli/format.js';
import { templateGlob } from '../../src/cli/lock-options.js';
import { CrossSlotError, InvalidArgumentError } from '../../src/errors.js';
import { lockKeys, validatePrefix } from '../../src/keys/keys.js';
import { defaultLegacyKeys, isLegacyLockKeys, legacyLockKeys, resolveLegacyPair } from '../../src/keys/legacy.js';
import { resolveClientOptions } from '../../src/options.js';

describe('legacy key names', () => {
  it('defaults to <resource>:read and <resource>:write', () => {
    expect(defaultLegacyKeys('cache:user:42')).to.deep.equal({ read: 'cache:user:42:read', write: 'cache:user:42:write' });
    expect(resolveClientOptions({ mode: 'legacy' }, validatePrefix).legacyKeys('x')).to.deep.equal({ read: 'x:read', write: 'x:write' });
  });

  it('keeps legacy mode state beside the legacy keys, in their slot', () => {
    const k = legacyLockKeys('rwlock', 'r', { read: '{r}:read', write: '{r}:write' }, 'legacy', true);
    expect(k).to.include({
      state: 'rwlock#legacy:{r}:read',
      leases: 'rwlock#legacy-leases:{r}:read',
      queue: 'rwlock#legacy-queue:{r}:read',
      readers: 'rwlock#readers:{r}:read',
      channel: 'rwlock#legacy:{r}:read',
      read: '{r}:read',
      write: '{r}:write',
      layout: 'legacy',
    });
    expect(k.slot).to.equal(calculateSlot('r'));
    expect(isLegacyLockKeys(k)).to.equal(true);
    expect(isLegacyLockKeys(lockKeys('rwlock', 'r'))).to.equal(false);
  });

  it('uses the hash-mode lock itself in bridge mode, and wakes legacy-mode waiters on their channel', () => {
    const k = legacyLockKeys('rwlock', 'r', { read: '{r}:read', write: '{r}:write' }, 'bridge', true);
    const hash = lockKeys('rwlock', 'r');
    expect(k).to.include({ state: hash.state, leases: hash.leases, queue: hash.queue, channel: hash.channel, slot: hash.slot });
    expect(k.peerChannel).to.equal('rwlock#legacy:{r}:read');
  });

  it('accepts any names on one server, and refuses names in two slots on a Cluster with the fix in the message', () => {
    const pair = { read: 'a:read', write: 'a:write' };
    expect(() => legacyLockKeys('rwlock', 'a', pair, 'legacy', false)).to.not.throw();
    expect(() => legacyLockKeys('rwlock', 'a', pair, 'legacy', true)).to.throw(CrossSlotError, /\{a\}:read/);
    // Bridge: a common tag is not enough, it must be the lock's.
    expect(() => legacyLockKeys('rwlock', 'a', { read: '{b}r', write: '{b}w' }, 'bridge', true)).to.throw(CrossSlotError, /rwlock:\{a\}/);
    expect(() => legacyLockKeys('rwlock', 'a', { read: '{b}r', write: '{b}w' }, 'legacy', true)).to.not.throw();
    expect(() =>
      legacyLockKeys('rwlock', 'user:{42}:p', { read: 'user:{42}:p:read', write: 'user:{42}:p:write' }, 'bridge', true),
    ).to.not.throw();
  });

  it('refuses what a legacyKeys function must not return', () => {
    const bad: [string, () => unknown][] = [
      ['non-strings', () => ({ read: 1, write: 'w' })],
      ['nothing', () => undefined],
      ['an empty name', () => ({ read: 'r', write: '' })],
      ['one key twice', () => ({ read: 'k', write: 'k' })],
      ['control characters', () => ({ read: 'r\u0000', write: 'w' })],
      ['an oversized name', () => ({ read: 'r'.repeat(9000), write: 'w' })],
      [
        'an exception',
        () => {
          throw new Error('boom');
        },
      ],
    ];
    for (const [what, fn] of bad) {
      expect(() => resolveLegacyPair(fn as never, 'x'), what).to.throw(InvalidArgumentError);
    }
    expect(() => legacyLockKeys('rwlock', 'x', { read: 'rwlock:{x}', write: 'w' }, 'bridge', false)).to.throw(
      InvalidArgumentError,
      /library's own/,
    );
  });

  it('validates mode and legacyKeys options', () => {
    expect(() => resolveClientOptions({ mode: 'redis' }, validatePrefix)).to.throw(InvalidArgumentError, /mode/);
    expect(() => resolveClientOptions({ mode: 'legacy', legacyKeys: 'x:read' }, validatePrefix)).to.throw(InvalidArgumentError, /function/);
    expect(() => resolveClientOptions({ legacyKeys: defaultLegacyKeys }, validatePrefix)).to.throw(
      InvalidArgumentError,
      /"legacy" or "bridge"/,
    );
    expect(resolveClientOptions({ mode: 'bridge' }, validatePrefix).mode).to.equal('bridge');
    expect(resolveClientOptions(undefined, validatePrefix).mode).to.equal('hash');
  });
});

describe('CLI helpers', () => {
  it('turns key templates into SCAN globs, escaping glob characters', () => {
    expect(templateGlob('%s:read')).to.equal('*:read');
    expect(templateGlob('{%s}:write')).to.equal('{*}:write');
    expect(templateGlob('lock[*]:%s?')).to.equal('lock\\[\\*\\]:*\\?');
  });

  it('recovers the resource from a hash-mode key', () => {
    expect(resourceOf('{cache:user:42}')).to.equal('cache:user:42');
    expect(resourceOf('user:{42}:profile')).to.equal('user:{42}:profile');
    expect(resourceOf('{a{b}}')).to.equal('{a{b}}');
    expect(lockKeys('rwlock', resourceOf('{x}')).state).to.equal('rwlock:{x}');
  });

  it('parses --cluster node lists', () => {
    expect(parseClusterNodes('a:7000, b:7001,c')).to.deep.equal([
      { host: 'a', port: 7000 },
      { host: 'b', port: 7001 },
      { host: 'c', port: 6379 },
    ]);
    expect(parseClusterNodes('[::1]:7000')).to.deep.equal([{ host: '::1', port: 7000 }]);
    expect(() => parseClusterNodes('a:0')).to.throw(/not host:port/);
    expect(() => parseClusterNodes(' , ')).to.throw(/at least one/);
  });

  it('hides passwords in URLs', () => {
    expect(redact('redis://user:pw@h:1/0')).to.equal('redis://user:***@h:1/0');
    expect(redact('rediss://pw@h:1')).to.equal('rediss://***@h:1');
    expect(redact('redis://h:1')).to.equal('redis://h:1');
  });

  it('formats durations and tables', () => {
    expect([
      duration(null),
      duration(350),
      duration(1_234),
      duration(125_000),
      duration(3 * 3_600_000 + 600_000),
      duration(Number.MAX_SAFE_INTEGER),
    ]).to.deep.equal(['-', '350ms', '1.2s', '2m05s', '3h10m', 'until deleted']);
    expect(table(['A', 'BB'], [['xxx', 'y']])).to.equal('A    BB\nxxx  y');
  });
});
