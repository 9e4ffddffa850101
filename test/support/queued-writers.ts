import { setTimeout as sleep } from 'node:timers/promises';
import type { LockClient } from '../../src/index.js';
import { eventually } from './eventually.js';

/**
 * Writers that wait for `resource`, one per owner and LockClient, each queued
 * (`queued(n)` true with n of them waiting) before the next starts. Once
 * granted, each records its owner in `order`, holds 20 ms and releases;
 * `done` settles when every one has.
 */
export async function queueWriters(
  resource: string,
  owners: readonly string[],
  clients: readonly LockClient[],
  queued: (count: number) => Promise<boolean>,
): Promise<{ order: string[]; done: Promise<unknown> }> {
  const order: string[] = [];
  const waiting: Promise<void>[] = [];
  for (const [i, owner] of owners.entries()) {
    waiting.push(
      clients[i]!.lock(resource)
        .acquireWrite({ owner, waitMs: 10_000 })
        .then(async (lease) => {
          order.push(owner);
          await sleep(20);
          await lease.release();
        }),
    );
    await eventually(`${owner} to queue`, () => queued(i + 1));
  }
  return { order, done: Promise.all(waiting) };
}
