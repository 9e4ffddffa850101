// A client the library cannot drive is refused when the LockClient is made, saying what it lacks and what
// to use instead, before anything is sent: a stand-in of ioredis' shape (ioredis-mock has defineCommand,
// duplicate, eval and evalsha, but no call() and no status; its Lua does not read the scripts' flags line,
// and it has no SPUBLISH), or anything else.
import { expect } from 'chai';
import { fencedSet, InvalidArgumentError, LockClient, type LockRedisClient } from '../../src/index.js';

/** The shape of ioredis-mock 8's client, recording every call made on it. */
function mockShaped(calls: string[]): LockRedisClient {
  const record =
    (name: string) =>
    (..._args: unknown[]) => {
      calls.push(name);
      return Promise.resolve(null);
    };
  return {
    defineCommand: record('defineCommand'),
    duplicate: record('duplicate'),
    eval: record('eval'),
    evalsha: record('evalsha'),
    options: {},
    on: record('on'),
  } as unknown as LockRedisClient;
}

describe('a client the library cannot drive', () => {
  it('a stand-in of ioredis shape without call() and status: refused at construction, naming both and the testing helper', () => {
    const calls: string[] = [];
    const refusal = (() => {
      try {
        new LockClient(mockShaped(calls));
      } catch (error) {
        return error;
      }
      throw new Error('expected a refusal');
    })();
    expect(refusal).to.be.instanceOf(InvalidArgumentError);
    expect((refusal as InvalidArgumentError).argument).to.equal('redis');
    expect((refusal as Error).message).to.equal(
      "redis: has ioredis' shape (defineCommand, duplicate) but no call() and no status, which redis-rwlock drives an ioredis client by: " +
        'a stand-in such as ioredis-mock, which cannot run the Lua scripts the locks are made of either (no SPUBLISH, no script flags); ' +
        'give it a real server instead: startRedisServer() from redis-rwlock/testing starts one for tests',
    );
    expect(calls, 'calls made on the client').to.deep.equal([]);
  });

  it('the same in redlock mode and for the fencing functions', async () => {
    const calls: string[] = [];
    const mock = mockShaped(calls);
    expect(() => new LockClient([mock, mockShaped(calls), mockShaped(calls)], { mode: 'redlock' })).to.throw(
      InvalidArgumentError,
      /^redis: element 0 has ioredis' shape .* but no call\(\) and no status, .*startRedisServer\(\)/,
    );
    const error = await fencedSet(mock, 'k', 'v', 1).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(InvalidArgumentError);
    expect((error as Error).message).to.match(/no call\(\) and no status/);
    expect(calls).to.deep.equal([]);
  });

  it('with call() but no status, it names status alone', () => {
    const calls: string[] = [];
    const client = Object.assign(mockShaped(calls), { call: () => Promise.resolve(null) });
    expect(() => new LockClient(client)).to.throw(InvalidArgumentError, /but no status, /);
  });

  it('anything else: the clients the library takes', () => {
    expect(() => new LockClient({} as LockRedisClient)).to.throw(InvalidArgumentError, /^redis: must be a Redis client: an ioredis/);
  });
});
