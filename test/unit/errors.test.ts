// Every error class the package exports has a stable, distinct `code`, set on
// each instance, and docs/reference.md's errors table gives each class its code.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import * as api from '../../src/index.js';
import { redisFailure } from '../../src/redis.js';

const REFERENCE = readFileSync(new URL('../../docs/reference.md', import.meta.url), 'utf8');

/** The exported error classes: RWLockError and everything that extends it. */
const errorClasses = Object.entries(api).filter(
  (entry): entry is [string, typeof api.RWLockError] =>
    typeof entry[1] === 'function' && (entry[1] === api.RWLockError || entry[1].prototype instanceof api.RWLockError),
);

/** An instance made with the arguments each constructor takes. */
function instanceOf(name: string, Class: typeof api.RWLockError): api.RWLockError {
  switch (name) {
    case 'InvalidArgumentError':
      return new api.InvalidArgumentError('waitMs', 'must be a number');
    case 'AcquireTimeoutError':
      return new api.AcquireTimeoutError(10, 'held', { resource: 'r', mode: 'write' });
    case 'QuorumError':
      return new api.QuorumError('acquiring', 2, []);
    case 'ReplicaAckError':
      return new api.ReplicaAckError(1, 0, 50, { resource: 'r', mode: 'write' });
    case 'NoPermissionError':
      return new api.NoPermissionError('refused', 'keys');
    case 'LayoutVersionError':
      return new api.LayoutVersionError(2, 1, '"r"', { resource: 'r' });
    case 'StaleFenceError':
      return new api.StaleFenceError('k', 1, 2);
    case 'EvictionRiskError':
      return new api.EvictionRiskError(
        { node: '127.0.0.1:6379', policy: 'allkeys-lru', maxmemoryBytes: 100 * 2 ** 20 },
        { resource: 'r', mode: 'write' },
      );
    default:
      return new Class('message');
  }
}

describe('error codes', () => {
  it('every exported error class has its own code, on every instance', () => {
    expect(errorClasses.length).to.be.greaterThan(10);
    const codes = errorClasses.map(([name, Class]) => {
      const error = instanceOf(name, Class);
      expect(error.name, name).to.equal(name);
      expect(error.code, name).to.match(/^RWLOCK_[A-Z_]+$/);
      return error.code;
    });
    expect(new Set(codes).size).to.equal(codes.length);
  });

  it('the errors table of docs/reference.md gives each subclass with its code', () => {
    for (const [name, Class] of errorClasses) {
      if (Class === api.RWLockError) continue;
      expect(REFERENCE, name).to.include(`| \`${name}\` | \`${instanceOf(name, Class).code}\` |`);
    }
  });
});

describe("a client library's message inside the library's", () => {
  // GLIDE's messages may end in a newline, ioredis' and the server's in a full stop: "...timed out\n; the
  // operation may be retried" and "...user is disabled.; the operation may be retried" read as broken.
  for (const text of ['timed out\n', 'Connection lost.', "READONLY You can't write against a read only replica.\r\n"]) {
    it(`${JSON.stringify(text)}: one line, no ".;"`, () => {
      const error = redisFailure('releasing the lock on "a"', new Error(text), {});
      expect(error.message).to.equal(`releasing the lock on "a" failed: ${text.trim().replace(/\.$/, '')}; the operation may be retried`);
    });
  }
});

describe("a server's refusal for a condition of its own", () => {
  // The replies as Redis 7.0 and Valkey 8 send them; GLIDE passes them on with their code first.
  const replies: [string, api.ServerCondition, RegExp][] = [
    ["OOM command not allowed when used memory > 'maxmemory'.", 'out-of-memory', /raise maxmemory, free memory/],
    ['BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.', 'busy', /SCRIPT KILL/],
    [
      "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.",
      'save-failed',
      /stop-writes-on-bgsave-error no/,
    ],
    ['NOREPLICAS Not enough good replicas to write.', 'too-few-replicas', /min-replicas-to-write/],
    ['LOADING Redis is loading the dataset in memory', 'loading', /wait until it has loaded/],
    ['ERR max number of clients reached', 'maxclients', /raise maxclients/],
  ];
  for (const [reply, condition, fix] of replies) {
    it(`${reply.split(' ')[0]}: a ServerRefusedError (${condition}) saying what to do, the reply once`, () => {
      const error = redisFailure('acquiring the write lock on "a"', new Error(reply), { resource: 'a', mode: 'write' });
      expect(error).to.be.instanceOf(api.ServerRefusedError).and.to.be.instanceOf(api.RedisUnavailableError);
      expect((error as api.ServerRefusedError).condition).to.equal(condition);
      expect(error instanceof api.ServerOutOfMemoryError).to.equal(condition === 'out-of-memory');
      expect(error.message).to.match(/^acquiring the write lock on "a" was refused: the Redis server /);
      expect(error.message).to.match(fix);
      expect(error.message.split(reply.replace(/\.$/, '')).length, 'the reply, once').to.equal(2);
      expect(error.resource).to.equal('a');
    });
  }

  it('another error reply is no refusal of that kind', () => {
    const error = redisFailure('releasing the lock on "a"', new Error('ERR unknown command'), {});
    expect(error).to.not.be.instanceOf(api.ServerRefusedError);
    expect(redisFailure('x', new Error('BUSYKEY Target key name already exists.'), {})).to.not.be.instanceOf(api.ServerRefusedError);
  });
});
