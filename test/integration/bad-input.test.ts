// Bad input, systematically: every public entry point with hostile values
// (wrong types, empty, huge, negative, NaN, Infinity, fractional, unicode edge
// cases, prototype-polluting objects, tokens and leases of other owners). Each
// case must give a typed error and write nothing: DBSIZE unchanged, an existing
// lock untouched, and for argument errors not one command sent to Redis.
import { expect } from 'chai';
import { type Command, Redis } from 'ioredis';
import type { LockRedisClient } from '../../src/clients/index.js';
import {
  AcquireAbortedError,
  ClientClosedError,
  InvalidArgumentError,
  type Lease,
  LockClient,
  LockLostError,
  LockNotHeldError,
  RedisUnavailableError,
  RWLockError,
} from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import { ALL_CLIENTS, forEachTopology, quit } from '../setup/topologies.js';
import { isGlide } from '../support/glide-clients.js';
import { totalKeys } from '../support/redis-stats.js';
import { rejection } from '../support/rejection.js';

// biome-ignore lint/suspicious/noExplicitAny: hostile values on purpose
type Hostile = any;
type ErrorClass = abstract new (...args: never[]) => RWLockError;

/** Values of every wrong type for a string argument. */
const NOT_STRINGS: [string, unknown][] = [
  ['undefined', undefined],
  ['null', null],
  ['a number', 42],
  ['NaN', NaN],
  ['a boolean', true],
  ['an object', {}],
  ['an array', ['x']],
  ['a function', () => 'x'],
  ['a symbol', Symbol('x')],
  ['a bigint', 10n],
  ['a String object', new String('x')],
];

/** Strings no name may be. */
const BAD_NAMES: [string, string][] = [
  ['empty', ''],
  ['4097 ASCII bytes', 'x'.repeat(4097)],
  ['4098 bytes of 2-byte characters', 'é'.repeat(2049)],
  ['4100 bytes of emoji', '😀'.repeat(1025)],
  ['a lone high surrogate', 'bad\ud800'],
  ['a lone low surrogate', '\udfffbad'],
  ['reversed surrogates', '\udc00\ud800'],
  ['a NUL', 'a\u0000b'],
  ['a newline', 'a\nb'],
  ['a DEL', '\u007f'],
  ['an escape sequence', '\u001b[31mred'],
  ['a leading "}" and no hash tag (an empty tag: a different Cluster slot per lock name)', '}x'],
];

/** Values no duration may be (the minimum is checked separately). */
const BAD_DURATIONS: [string, unknown][] = [
  ['-1', -1],
  ['-Infinity', -Infinity],
  ['NaN', NaN],
  ['Infinity', Infinity],
  ['fractional 1.5', 1.5],
  ['fractional 1e-9', 1e-9],
  ['2^31 (past the longest timer)', 2 ** 31],
  ['2^53', 2 ** 53],
  ['a numeric string', '1000'],
  ['null', null],
  ['a boolean', true],
  ['an object', {}],
  ['an array', [1000]],
  ['a bigint', 1000n],
  ['a Number object', new Number(1000)],
];

const BAD_OWNERS: [string, unknown][] = [
  ['an empty owner', ''],
  ['a 257-character owner', 'o'.repeat(257)],
  ['an owner with a newline', 'a\nb'],
  ['an owner with a NUL', 'a\u0000'],
  ['an owner with a lone surrogate', 'owner\ud800'],
  ...NOT_STRINGS.filter(([what]) => what !== 'undefined').map(([what, v]) => [`a non-string owner (${what})`, v] as [string, unknown]),
];

/** Options arguments that are not a plain bag of known options. */
const BAD_OPTION_BAGS: [string, unknown][] = [
  ['null', null],
  ['a string', 'fast'],
  ['a number', 42],
  ['a boolean', true],
  ['an array', []],
  ['a function', () => ({})],
  ['a JSON "__proto__" key (prototype pollution)', JSON.parse('{"__proto__": {"leaseMs": 1}}')],
  ['a "constructor" key', { constructor: { prototype: { leaseMs: 1 } } }],
  ['a "toString" key', { toString: 'x' }],
  ['a "hasOwnProperty" key', { hasOwnProperty: 1 }],
  ['a misspelt option', { leasems: 5 }],
  ['an option in other case', { LeaseMs: 5000 }],
];

const BAD_SIGNALS: [string, unknown][] = [
  ['a string', 'stop'],
  ['an object', {}],
  ['a duck-typed signal', { aborted: false, reason: undefined, addEventListener() {}, removeEventListener() {} }],
  ['null', null],
  ['an AbortController', new AbortController()],
];

const BAD_FNS: [string, unknown][] = [
  ['undefined', undefined],
  ['null', null],
  ['a string', 'rebuild'],
  ['a number', 1],
  ['an object', {}],
  ['a promise', Promise.resolve(1)],
];

interface Case {
  entry: string;
  what: string;
  call: () => unknown;
  error: ErrorClass;
  /** The call may send commands (it has to ask Redis to find out); it must still change nothing. */
  sends?: boolean;
}

const counts = new Map<string, Map<string, number>>();

/** Records the name of every command `client` sends, so that argument errors can be shown to send none. */
function recordCommands(client: LockRedisClient): string[] {
  const sent: string[] = [];
  if (isGlide(client)) {
    const glide = client as unknown as Record<'customCommand' | 'invokeScript', (...args: unknown[]) => unknown>;
    const custom = glide.customCommand.bind(client);
    const invoke = glide.invokeScript.bind(client);
    glide.customCommand = (...args: unknown[]) => {
      sent.push(String((args[0] as string[])[0]));
      return custom(...args);
    };
    glide.invokeScript = (...args: unknown[]) => {
      sent.push('EVALSHA');
      return invoke(...args);
    };
    return sent;
  }
  const target = client as unknown as { sendCommand: (...args: unknown[]) => unknown };
  const send = target.sendCommand.bind(client);
  target.sendCommand = (...args: unknown[]) => {
    // ioredis: sendCommand(command); node-redis: sendCommand(args), on a Cluster sendCommand(firstKey, isReadonly, args).
    const command = args.find((a) => Array.isArray(a)) as string[] | undefined;
    sent.push(command ? String(command[0]) : (args[0] as Command).name);
    return send(...args);
  };
  return sent;
}

forEachTopology('bad input', { clients: ALL_CLIENTS }, (ctx) => {
  let admin: RedisClient; // the test's own look at Redis
  let redis: LockRedisClient; // the LockClients' client, of the suite's library
  let locks: LockClient;
  let held: Lease;
  let sent: string[];

  // One set of clients for the suite (connecting a Cluster client per case would be most of its time);
  // each test starts from a flushed topology, so the lock that must stay as it is is taken per test.
  before(async () => {
    admin = ctx.client();
    redis = await ctx.lockRedis();
    sent = recordCommands(redis);
    locks = new LockClient(redis);
  });
  beforeEach(async () => {
    held = await locks.lock('existing').acquireWrite({ leaseMs: 60_000 }); // some state that must stay as it is
  });
  afterEach(async () => {
    await held.release();
  });
  after(async () => {
    await locks.close();
  });

  const lock = () => locks.lock('target');
  const cases: Case[] = [];
  const add = (entry: string, what: string, call: () => unknown, error: ErrorClass = InvalidArgumentError, sends = false) =>
    cases.push({ entry, what, call, error, sends });

  // new LockClient(redis, options)
  for (const [what, value] of [
    ...NOT_STRINGS,
    ['a URL string', 'redis://127.0.0.1:6379'],
    ['an object without duplicate()', { defineCommand() {} }],
  ] as [string, unknown][]) {
    add('new LockClient', `redis: ${what}`, () => new LockClient(value as Hostile));
  }
  add('new LockClient', 'redis: an ioredis client with a keyPrefix', () => new LockClient(ctx.client({ keyPrefix: 'app:' })));
  for (const [what, value] of BAD_OPTION_BAGS) add('new LockClient', `options: ${what}`, () => new LockClient(redis, value as Hostile));
  for (const [what, value] of [
    ...BAD_NAMES,
    ['with braces', 'a{b}'],
    ['with "#"', 'a#b'],
    ['with a space', 'a b'],
    ['257 bytes', 'p'.repeat(257)],
  ] as [string, unknown][]) {
    add('new LockClient', `prefix: ${what}`, () => new LockClient(redis, { prefix: value as Hostile }));
  }
  for (const [what, value] of NOT_STRINGS.filter(([w]) => w !== 'undefined'))
    add('new LockClient', `prefix: ${what}`, () => new LockClient(redis, { prefix: value as Hostile }));
  for (const [name, min] of [
    ['leaseMs', 10],
    ['waitMs', 0],
    ['recheckMs', 1],
    ['linkCheckMs', 50],
  ] as const) {
    for (const [what, value] of [...BAD_DURATIONS, [`below the minimum ${min}`, min - 1]] as [string, unknown][]) {
      add('new LockClient', `${name}: ${what}`, () => new LockClient(redis, { [name]: value as Hostile }));
    }
  }
  for (const name of ['writerPreference', 'fair'] as const) {
    for (const [what, value] of [
      ['"true"', 'true'],
      ['1', 1],
      ['null', null],
      ['"false"', 'false'],
    ] as [string, unknown][]) {
      add('new LockClient', `${name}: ${what}`, () => new LockClient(redis, { [name]: value as Hostile }));
    }
  }
  for (const [what, value] of [
    ['"WARN"', 'WARN'],
    ['"refuse " (a trailing space)', 'refuse '],
    ['"silence"', 'silence'],
    ['true', true],
    ['null', null],
    ['1', 1],
    ['an object', {}],
  ] as [string, unknown][]) {
    add('new LockClient', `onEvictionRisk: ${what}`, () => new LockClient(redis, { onEvictionRisk: value as Hostile }));
  }

  // locks.lock(resource)
  for (const [what, value] of [...NOT_STRINGS, ...BAD_NAMES]) add('lock()', `resource: ${what}`, () => locks.lock(value as Hostile));

  // acquireRead / acquireWrite / tryAcquireRead / tryAcquireWrite
  const acquires = [
    ['acquireRead', (o: unknown) => lock().acquireRead(o as Hostile)],
    ['acquireWrite', (o: unknown) => lock().acquireWrite(o as Hostile)],
    ['tryAcquireRead', (o: unknown) => lock().tryAcquireRead(o as Hostile)],
    ['tryAcquireWrite', (o: unknown) => lock().tryAcquireWrite(o as Hostile)],
  ] as const;
  for (const [entry, acquire] of acquires) {
    const waits = !entry.startsWith('try');
    for (const [what, value] of BAD_OPTION_BAGS) add(entry, `options: ${what}`, () => acquire(value));
    for (const [what, value] of [...BAD_DURATIONS, ['0', 0], ['9 (below the minimum)', 9]] as [string, unknown][]) {
      add(entry, `leaseMs: ${what}`, () => acquire({ leaseMs: value }));
    }
    for (const [what, value] of BAD_OWNERS) add(entry, `owner: ${what}`, () => acquire({ owner: value }));
    if (waits) {
      for (const [what, value] of BAD_DURATIONS) add(entry, `waitMs: ${what}`, () => acquire({ waitMs: value }));
      for (const [what, value] of BAD_SIGNALS) add(entry, `signal: ${what}`, () => acquire({ signal: value }));
      add(entry, 'signal: already aborted', () => acquire({ signal: AbortSignal.abort(new Error('stop')) }), AcquireAbortedError);
    } else {
      add(entry, 'a waitMs option (tries do not wait)', () => acquire({ waitMs: 10 }));
      add(entry, 'a signal option (tries do not wait)', () => acquire({ signal: new AbortController().signal }));
    }
  }

  // Lease.extend(leaseMs)
  for (const [what, value] of [...BAD_DURATIONS, ['0', 0], ['9 (below the minimum)', 9]] as [string, unknown][]) {
    add('Lease.extend', `leaseMs: ${what}`, () => held.extend(value as Hostile));
  }

  // withRead / withWrite
  for (const [entry, withLease] of [
    ['withRead', (r: unknown, fn: unknown, o?: unknown) => locks.withRead(r as Hostile, fn as Hostile, o as Hostile)],
    ['withWrite', (r: unknown, fn: unknown, o?: unknown) => locks.withWrite(r as Hostile, fn as Hostile, o as Hostile)],
  ] as const) {
    for (const [what, value] of [...NOT_STRINGS, ...BAD_NAMES]) add(entry, `resource: ${what}`, () => withLease(value, () => 1));
    for (const [what, value] of BAD_FNS) add(entry, `fn: ${what}`, () => withLease('target', value));
    for (const [what, value] of BAD_OPTION_BAGS) add(entry, `options: ${what}`, () => withLease('target', () => 1, value));
    for (const [what, value] of BAD_DURATIONS.slice(0, 6))
      add(entry, `options.leaseMs: ${what}`, () => withLease('target', () => 1, { leaseMs: value }));
    for (const [what, value] of BAD_OWNERS.slice(0, 5))
      add(entry, `options.owner: ${what}`, () => withLease('target', () => 1, { owner: value }));
  }

  // inspect(resource)
  for (const [what, value] of [...NOT_STRINGS, ...BAD_NAMES]) add('inspect', `resource: ${what}`, () => locks.inspect(value as Hostile));

  // Every case on every client library: each must be refused before the client is used.
  for (const c of cases) {
    it(`${c.entry}: refuses ${c.what} with ${c.error.name}, writing nothing`, async () => {
      const before = await totalKeys(admin);
      sent.length = 0;
      let error: unknown;
      try {
        await c.call();
      } catch (e) {
        error = e;
      }
      const commands = [...sent];
      expect(error, 'should have thrown').to.be.instanceOf(c.error);
      expect(error).to.be.instanceOf(RWLockError);
      expect((error as Error).message.length).to.be.greaterThan(15);
      if (error instanceof InvalidArgumentError) expect(error.argument).to.be.a('string').and.not.equal('');
      if (!c.sends) expect(commands, 'commands sent').to.deep.equal([]);
      expect(await totalKeys(admin)).to.equal(before);
      expect((await locks.inspect('existing')).writer?.owner).to.equal(held.token);
    });
  }
  const suite = ctx.clientKind === 'ioredis' ? ctx.kind : `${ctx.kind}, ${ctx.clientKind}`;
  const tally = counts.get(suite) ?? new Map<string, number>();
  counts.set(suite, tally);
  for (const c of cases) tally.set(c.entry, (tally.get(c.entry) ?? 0) + 1);

  // Leases and tokens of other owners.
  it("refuses a lost lease's release and extend, and leaves the new owner's lock alone", async () => {
    const lost = await lock().acquireWrite({ leaseMs: 50 });
    await new Promise((resolve) => setTimeout(resolve, 120));
    const current = await lock().acquireWrite();
    const before = await totalKeys(admin);
    expect(
      await lost.release().then(
        () => undefined,
        (e: unknown) => e,
      ),
    ).to.be.instanceOf(LockNotHeldError);
    expect(
      await lost.extend().then(
        () => undefined,
        (e: unknown) => e,
      ),
    ).to.be.instanceOf(LockLostError);
    expect(await totalKeys(admin)).to.equal(before);
    expect((await lock().inspect()).writer?.owner).to.equal(current.token);
    await current.release();
  });

  it("a released lease's second release is a no-op, and its extend is refused, with another owner holding the lock", async () => {
    const first = await lock().acquireWrite();
    await first.release();
    const next = await lock().acquireWrite();
    sent.length = 0;
    await first.release();
    expect(sent, 'a second release sends nothing').to.deep.equal([]);
    expect(
      await first.extend().then(
        () => undefined,
        (e: unknown) => e,
      ),
    ).to.be.instanceOf(LockNotHeldError);
    expect((await lock().inspect()).writer?.owner).to.equal(next.token);
    await next.release();
  });

  it("ignores inherited options, even when Object.prototype is polluted with another owner's token", async () => {
    const proto = Object.prototype as Record<string, unknown>;
    proto.owner = held.token;
    proto.leaseMs = 10;
    proto.waitMs = -1;
    proto.prefix = '{evil}';
    let lease: Lease | undefined;
    let polluted: LockClient | undefined;
    try {
      polluted = new LockClient(redis, {});
      lease = await polluted.lock('target').acquireWrite({});
      const inherited = await locks.lock('existing').tryAcquireWrite(Object.create({ owner: held.token }));
      expect(inherited, "an inherited owner is not used: the lock stays the other owner's").to.equal(null);
    } finally {
      delete proto.owner;
      delete proto.leaseMs;
      delete proto.waitMs;
      delete proto.prefix;
    }
    expect(polluted.options.prefix).to.equal('rwlock');
    expect(lease.token).to.not.equal(held.token);
    expect(lease.autoRenew).to.equal(true);
    expect(lease.leaseMs).to.equal(30_000);
    await lease.release();
    await polluted.close();
  });

  it('refuses every operation of a closed LockClient, and of one whose Redis client was closed, writing nothing', async () => {
    const closing = new LockClient(redis);
    const early = closing.lock('target');
    const lease = await closing.lock('leased').acquireRead();
    await closing.close();
    await closing.close(); // a second close is a no-op
    const before = await totalKeys(admin);
    const rejects = async (call: () => unknown) => {
      try {
        await call();
      } catch (e) {
        return e;
      }
      return undefined;
    };
    for (const call of [
      () => closing.lock('target'),
      () => closing.inspect('target'),
      () => closing.withRead('target', () => 1),
      () => closing.withWrite('target', () => 1),
      () => early.acquireRead(),
      () => early.acquireWrite(),
      () => early.tryAcquireRead(),
      () => early.tryAcquireWrite(),
      () => early.inspect(),
    ]) {
      expect(await rejects(call)).to.be.instanceOf(ClientClosedError);
    }
    expect(lease.held, 'close() released it').to.equal(false);
    await lease.release(); // a no-op
    expect(await totalKeys(admin)).to.equal(before);

    const own = await ctx.lockRedis();
    const onOwn = new LockClient(own);
    const target = onOwn.lock('target');
    await quit(own);
    expect(await rejects(() => target.acquireWrite())).to.be.instanceOf(ClientClosedError);
    expect(await rejects(() => onOwn.inspect('target'))).to.be.instanceOf(ClientClosedError);
    expect(() => new LockClient(own)).to.throw(ClientClosedError);
    expect(await totalKeys(admin)).to.equal(before);
    await onOwn.close();
  });
});

after(() => {
  for (const [kind, tally] of counts) {
    const total = [...tally.values()].reduce((a, b) => a + b, 0);
    console.log(`      bad-input cases [${kind}]: ${[...tally].map(([entry, n]) => `${entry} ${n}`).join(', ')}; total ${total}`);
  }
});

describe('a server down at start: the timeout says the connection failed', function () {
  this.timeout(30_000);

  it('ioredis: the acquire names the address and the refused connection, and says to check the server', async () => {
    const redis = new Redis({ host: '127.0.0.1', port: 1 }); // nothing listens on port 1
    redis.on('error', () => {});
    const locks = new LockClient(redis, { redisTimeoutMs: 1_000 });
    try {
      const error = await rejection(locks.lock('job:{1}').acquireWrite({ waitMs: 100 }));
      expect(error, String(error)).to.be.instanceOf(RedisUnavailableError);
      expect(error.message).to.match(
        /Redis did not answer within 1000 ms .*: the client is not connected to Redis at 127\.0\.0\.1:1 \(connect ECONNREFUSED 127\.0\.0\.1:1\): check that Redis runs there/,
      );
    } finally {
      await locks.close();
      redis.disconnect();
    }
  });
});
