/**
 * (f) Memory: `MEMORY USAGE key SAMPLES 0` of every key of a write-held lock,
 * of a lock with 1 reader and with `readers` readers, next to the floor's
 * (and so redis-semaphore's and redlock's) one string key. Also the bytes of
 * the data itself (field names, values, members, 8 bytes per score), the
 * encodings, and whether every key is gone once everything is released.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { type Lease, LockClient, type LockKeys } from '../../src/index.js';
import type { BenchConfig } from '../config.js';
import { ready, type Topology } from '../topology.js';

export interface KeyMemory {
  readonly key: string;
  readonly bytes: number;
  readonly encoding: string | null;
  /** Bytes of the data alone: field names and values (hash), members and 8-byte scores (zset), the value (string). */
  readonly dataBytes: number;
}

export interface LockMemory {
  readonly what: string;
  readonly keys: KeyMemory[];
  readonly bytes: number;
  readonly dataBytes: number;
}

export interface MemoryResult {
  readonly floor: LockMemory;
  readonly write: LockMemory;
  readonly oneReader: LockMemory;
  readonly manyReaders: LockMemory;
  readonly readers: number;
  /** (manyReaders - oneReader) / (readers - 1). */
  readonly bytesPerExtraReader: number;
  /** The same for the data alone. */
  readonly dataBytesPerExtraReader: number;
  /** Keys of the lock still present after every lease was released: must be 0. */
  readonly keysLeftAfterRelease: number;
}

async function keyMemory(topology: Topology, key: string): Promise<KeyMemory | null> {
  const node: Redis = await topology.masterFor(key);
  const bytes = (await node.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) as number | null;
  if (bytes === null) return null;
  const encoding = (await node.call('OBJECT', 'ENCODING', key)) as string | null;
  const type = await node.type(key);
  let dataBytes = 0;
  if (type === 'hash') {
    for (const [f, v] of Object.entries(await node.hgetall(key))) dataBytes += Buffer.byteLength(f) + Buffer.byteLength(v);
  } else if (type === 'zset') {
    for (const member of await node.zrange(key, '0', '-1')) dataBytes += Buffer.byteLength(member) + 8;
  } else if (type === 'string') {
    dataBytes = Buffer.byteLength((await node.get(key)) ?? '');
  }
  return { key, bytes, encoding, dataBytes };
}

async function lockMemory(topology: Topology, what: string, keys: readonly string[]): Promise<LockMemory> {
  const found = (await Promise.all(keys.map((k) => keyMemory(topology, k)))).filter((k): k is KeyMemory => k !== null);
  return {
    what,
    keys: found,
    bytes: found.reduce((a, k) => a + k.bytes, 0),
    dataBytes: found.reduce((a, k) => a + k.dataBytes, 0),
  };
}

const names = (keys: LockKeys) => [keys.state, keys.leases, keys.queue];

export async function measureMemory(topology: Topology, config: BenchConfig, tag: string): Promise<MemoryResult> {
  const redis = topology.client();
  await ready(redis);
  const locks = new LockClient(redis);
  const held: Lease[] = [];
  try {
    const floorKey = `floor:m:${tag}`;
    await redis.set(floorKey, randomUUID(), 'PX', 60_000, 'NX');
    const floor = await lockMemory(topology, 'floor: SET key token PX', [floorKey]);

    const w = locks.lock(`m:${tag}:write`);
    held.push(await w.acquireWrite());
    const write = await lockMemory(topology, 'write-held', names(w.keys));

    const r1 = locks.lock(`m:${tag}:one`);
    held.push(await r1.acquireRead());
    const oneReader = await lockMemory(topology, '1 reader', names(r1.keys));

    const rn = locks.lock(`m:${tag}:many`);
    for (let i = 0; i < config.memory.readers; i++) held.push(await rn.acquireRead());
    const manyReaders = await lockMemory(topology, `${config.memory.readers} readers`, names(rn.keys));

    await Promise.all(held.splice(0).map((l) => l.release()));
    let keysLeftAfterRelease = 0;
    for (const lock of [w, r1, rn]) {
      for (const key of names(lock.keys)) keysLeftAfterRelease += await (await topology.masterFor(key)).exists(key);
    }
    const extra = config.memory.readers - 1;
    return {
      floor,
      write,
      oneReader,
      manyReaders,
      readers: config.memory.readers,
      bytesPerExtraReader: (manyReaders.bytes - oneReader.bytes) / extra,
      dataBytesPerExtraReader: (manyReaders.dataBytes - oneReader.dataBytes) / extra,
      keysLeftAfterRelease,
    };
  } finally {
    await Promise.allSettled(held.map((l) => l.release()));
    await locks.close();
    redis.disconnect();
  }
}
