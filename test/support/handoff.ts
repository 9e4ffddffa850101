/**
 * The core of a lock's life, shared by the suites that run it under other
 * conditions (an ACL user, TLS, another client library).
 *
 * @module
 */
import { expect } from 'chai';
import type { Lease, LockClient } from '../../src/index.js';
import { eventually } from './eventually.js';

/**
 * `locks` (with a lease short enough to be renewed during the test, and long
 * enough that a loaded machine's late renewal does not lose it first) takes
 * the write lock of `resource`; `other` (with a long `recheckMs`) queues
 * behind it. The holder is renewed,
 * extends, shows in `inspect`, and releases; the waiter gets the lock, and
 * its lease is returned.
 */
export async function handOffWrite(locks: LockClient, other: LockClient, resource: string): Promise<Lease> {
  const lease = await locks.lock(resource).acquireWrite();
  const waiter = other.lock(resource).acquireWrite({ waitMs: 10_000 });
  await eventually('the writer queued', async () => (await locks.inspect(resource)).queue.length > 0);
  await eventually('renewals past the first lease', () => locks.stats().renewals >= 2, 20_000); // a state, not a time: 20 s only bounds a hang
  expect(lease.held).to.equal(true);
  await lease.extend(5_000);
  expect((await locks.inspect(resource)).writer?.owner).to.equal(lease.token);
  await lease.release();
  const next = await waiter; // woken by the release: its recheckMs is far longer than the test
  expect(next.held).to.equal(true);
  return next;
}
