/**
 * (c) Readers and a writer: `readers` loops of read acquire+release on one
 * resource, spread over `readerConnections` LockClients, while one writer on
 * its own connection takes the write lock every `writerEveryMs` and holds it
 * `writerHoldMs`. Reports read throughput and the writer's wait (p50, p99,
 * longest), next to the same readers without the writer in the same run.
 */
import { setMaxListeners } from 'node:events';
import { type Lease, LockClient } from '../../src/index.js';
import type { RedisClient } from '../../src/redis.js';
import type { BenchConfig } from '../config.js';
import { max, percentile, sleep } from '../stats.js';
import { ready, type Topology } from '../topology.js';

export interface ReadersResult {
  readonly withWriter: boolean;
  readonly readCycles: number;
  readonly readsPerSec: number;
  readonly readP50Ms: number | null;
  readonly readP99Ms: number | null;
  readonly writerGrants: number;
  readonly writerWaitP50Ms: number | null;
  readonly writerWaitP99Ms: number | null;
  readonly writerWaitMaxMs: number | null;
}

export async function measureReaders(topology: Topology, config: BenchConfig, withWriter: boolean, tag: string): Promise<ReadersResult> {
  const c = config.readers;
  const resource = `r:${tag}:${withWriter ? 'w' : 'n'}`;
  const clients: RedisClient[] = [];
  for (let i = 0; i < c.readerConnections + 1; i++) clients.push(topology.client());
  await Promise.all(clients.map(ready));
  const locks = clients.map((redis) => new LockClient(redis));
  const writerLocks = locks.pop()!;
  const abort = new AbortController();
  setMaxListeners(0, abort.signal); // every reader listens to it

  const start = performance.now();
  const windowStart = start + c.warmupMs;
  const windowEnd = windowStart + c.durationMs;
  let stopped = false;
  let cycles = 0;
  const readLatencies: number[] = [];
  const writerWaits: number[] = [];

  const reader = async (locksOfReader: LockClient) => {
    const lock = locksOfReader.lock(resource);
    while (!stopped && cycles < c.maxCycles) {
      const t = performance.now();
      let lease: Lease;
      try {
        lease = await lock.acquireRead({ signal: abort.signal });
      } catch (error) {
        if (stopped) return;
        throw error;
      }
      await lease.release();
      const now = performance.now();
      if (t >= windowStart && now <= windowEnd) {
        cycles++;
        readLatencies.push(now - t);
      }
    }
  };

  const writer = async () => {
    const lock = writerLocks.lock(resource);
    let next = performance.now() + c.writerEveryMs;
    while (!stopped) {
      await sleep(Math.max(0, next - performance.now()));
      if (stopped) return;
      const t = performance.now();
      let lease: Lease;
      try {
        lease = await lock.acquireWrite({ signal: abort.signal });
      } catch (error) {
        if (stopped) return;
        throw error;
      }
      if (t >= windowStart && t <= windowEnd) writerWaits.push(performance.now() - t);
      await sleep(c.writerHoldMs);
      await lease.release();
      // Every writerEveryMs, without bursts to catch up after a long wait.
      next = Math.max(next + c.writerEveryMs, performance.now());
    }
  };

  const loops = Array.from({ length: c.readers }, (_, i) => reader(locks[i % locks.length]!));
  if (withWriter) loops.push(writer());
  try {
    await sleep(windowEnd - start);
  } finally {
    stopped = true;
    abort.abort();
    await Promise.allSettled(loops);
    await Promise.allSettled([...locks, writerLocks].map((l) => l.close()));
    for (const redis of clients) redis.disconnect();
  }
  const results = await Promise.allSettled(loops);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return {
    withWriter,
    readCycles: cycles,
    readsPerSec: (cycles * 1000) / c.durationMs,
    readP50Ms: percentile(readLatencies, 50),
    readP99Ms: percentile(readLatencies, 99),
    writerGrants: writerWaits.length,
    writerWaitP50Ms: percentile(writerWaits, 50),
    writerWaitP99Ms: percentile(writerWaits, 99),
    writerWaitMaxMs: max(writerWaits),
  };
}
