// A separate process for the migration tests: one "service" that locks with
// the old two-key scripts (kind `old`) or with the library in `legacy`,
// `bridge` or `hash` mode. Mixed reads and writes over a few resources; each
// write does a non-atomic read-modify-write of a counter (GET, pause, SET)
// under the write lock, each read checks that it never sees a half-built
// value. With RWLOCK_UNTIL_FILE set it runs until that file exists instead of
// for RWLOCK_OPS operations. Prints one JSON line of results.
import { existsSync } from 'node:fs';
import { LockClient, type LockClientMode } from '../../src/index.js';
import { OldLocker, taggedLegacyKeys } from '../support/old-scripts.js';
import { connectTarget, type WorkerTarget } from '../support/targets.js';

const target = JSON.parse(process.env.RWLOCK_TARGET!) as WorkerTarget;
const kind = (process.env.RWLOCK_KIND ?? 'old') as 'old' | LockClientMode;
const ops = Number(process.env.RWLOCK_OPS ?? 500);
const untilFile = process.env.RWLOCK_UNTIL_FILE;
const resources = (process.env.RWLOCK_RESOURCES ?? 'a,b,c').split(',');
const writeShare = Number(process.env.RWLOCK_WRITE_SHARE ?? 0.3);
const readShareOfOld = process.env.RWLOCK_OLD_READS === '0' ? 0 : 1;
const oldTtlSeconds = Number(process.env.RWLOCK_OLD_TTL ?? 30);

const redis = connectTarget(target);
const legacyKeys = taggedLegacyKeys;
// Legacy and bridge waiters re-check often: an old process's release wakes nobody. A hash-mode
// writer may be handed the lock by a release, and holds it for one queue heartbeat (2 x recheckMs
// + 100 ms) until its extension, sent a third of the way in, lands: 4.1 s here. Workers stall for
// up to 0.9 s on a loaded 2-core machine; a 200 ms handed hold was lost to such stalls.
const recheckMs = kind === 'hash' ? 2_000 : 50;
const locks =
  kind === 'old'
    ? undefined
    : new LockClient(redis, { mode: kind, waitMs: 120_000, recheckMs, ...(kind === 'hash' ? {} : { legacyKeys }) });
const pause = () => new Promise<void>((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const writes: Record<string, number> = Object.fromEntries(resources.map((r) => [r, 0]));
let reads = 0;
let halfBuilt = 0;

async function write(resource: string, data: string): Promise<void> {
  await redis.set(`${data}:state`, 'building');
  const value = Number((await redis.get(`${data}:counter`)) ?? 0);
  await pause();
  await redis.set(`${data}:counter`, value + 1);
  await redis.set(`${data}:state`, 'ready');
  writes[resource]!++;
}

async function read(data: string): Promise<void> {
  if ((await redis.get(`${data}:state`)) === 'building') halfBuilt++;
  reads++;
}

/** An old process: spin on the old scripts with a short random back-off, as such services did. */
async function oldOperation(resource: string, data: string, writing: boolean): Promise<void> {
  const { read: readKey, write: writeKey } = legacyKeys(resource);
  const old = new OldLocker(redis, readKey, writeKey, oldTtlSeconds);
  if (writing) {
    while (!(await old.tryWrite())) await sleep(1 + Math.random() * 3);
    try {
      await write(resource, data);
    } finally {
      await old.releaseWrite();
    }
  } else {
    while (!(await old.tryRead())) await sleep(1 + Math.random() * 3);
    try {
      await read(data);
    } finally {
      await old.releaseRead();
    }
  }
}

async function worker(count: number): Promise<void> {
  for (let i = 0; untilFile ? !existsSync(untilFile) : i < count; i++) {
    const resource = resources[Math.floor(Math.random() * resources.length)]!;
    const data = `data:{${resource}}`;
    const writing = Math.random() < writeShare || (kind === 'old' && readShareOfOld === 0);
    if (!locks) await oldOperation(resource, data, writing);
    else if (writing) await locks.withWrite(resource, () => write(resource, data));
    else await locks.withRead(resource, () => read(data));
  }
}

// A few concurrent loops per process, as a service handling several requests at once.
const loops = 4;
await Promise.all(Array.from({ length: loops }, (_, i) => worker(Math.floor(ops / loops) + (i < ops % loops ? 1 : 0))));
await locks?.close();
await redis.quit();
process.stdout.write(`${JSON.stringify({ kind, writes, reads, halfBuilt })}\n`);
