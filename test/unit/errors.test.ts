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
