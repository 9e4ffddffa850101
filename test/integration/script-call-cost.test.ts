/**
 * What a script call costs the client in ioredis. A `Command` built with
 * its arguments copies them with `Array.prototype.flat`, about 100 ns an
 * argument on Node 20: an acquire's 9 cost 1 µs of client CPU, as much as
 * the rest of ioredis' work on the call. The driver builds each script's
 * `Command` with no arguments and sets them, already strings, so it copies
 * none, with autopipelining on and off.
 */
import { expect } from 'chai';
import type { Cluster, Redis } from 'ioredis';
import { LockClient } from '../../src/index.js';
import { forEachTopology } from '../setup/topologies.js';

/** The lists that `Array.prototype.flat` copied while `run` ran and that name one of its locks (`cost:`). */
async function flattened(run: () => Promise<void>): Promise<unknown[][]> {
  const flat = Array.prototype.flat;
  const copied: unknown[][] = [];
  Array.prototype.flat = function (this: unknown[], ...args: [number?]) {
    if (this.some((item) => typeof item === 'string' && item.includes('cost:'))) copied.push([...this]);
    return flat.apply(this, args);
  } as typeof flat;
  try {
    await run();
  } finally {
    Array.prototype.flat = flat;
  }
  return copied;
}

forEachTopology('a script call on ioredis', (ctx) => {
  for (const enableAutoPipelining of [false, true]) {
    it(`copies none of its arguments${enableAutoPipelining ? ', autopipelining' : ''}`, async () => {
      const redis: Redis | Cluster = ctx.client({ enableAutoPipelining });
      const locks = new LockClient(redis);
      const cycles = async () => {
        for (const mode of ['read', 'write'] as const) {
          const lock = locks.lock(`cost:${mode}`);
          const lease = await (mode === 'read' ? lock.acquireRead() : lock.acquireWrite());
          await lease.extend();
          await lease.release();
        }
      };
      try {
        // The server check, the scripts loaded, ioredis' Command found, and on a Cluster the
        // connections to the locks' masters up (until then a call goes through the Cluster client).
        await cycles();
        expect(await flattened(cycles), 'lists of arguments copied').to.deep.equal([]);
      } finally {
        await locks.close();
      }
    });
  }
});
