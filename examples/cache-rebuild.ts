/**
 * The cache-rebuild pattern (docs/cache-rebuild.md): a cached report kept in
 * several keys, served under read locks and rebuilt under the write lock.
 *
 * - Readers read every part in one MGET under a read lease: many at once, and
 *   never while a rebuild is half-way through writing.
 * - A rebuild computes the new report first, outside the lock, then writes
 *   all its parts under the write lease: readers wait only for the writing.
 * - When the report is stale, many callers notice at once. Each releases its
 *   read lease, takes the write lease, and checks again: the first one
 *   rebuilds, the others find a fresh report and do nothing. (Upgrading the
 *   read lease in place is not the way here: it works for the only reader,
 *   and with many readers a second upgrader fails with UpgradeConflictError.)
 * - The data keys share the lock's hash tag, `{report-42}`, so on a Cluster
 *   the lock and the data live on one master, and MGET works.
 *
 * Run it:
 *   npx tsx examples/cache-rebuild.ts                          # on a throw-away redis-server
 *   npx tsx examples/cache-rebuild.ts redis://127.0.0.1:6379   # on your own server
 */
import { pathToFileURL } from 'node:url';
import { type Cluster, Redis } from 'ioredis';
// In your own code: from 'redis-rwlock' and 'redis-rwlock/testing'.
import { LockClient } from 'redis-rwlock';
import { startRedisServer } from 'redis-rwlock/testing';

/** A report: a few sections, built together, served together. */
export interface Report {
  readonly version: number;
  readonly builtAt: number;
  readonly sections: readonly string[];
}

/** Computes the content of a new report, e.g. from a database. May take a while; honours `signal`. */
export type ComputeReport = (version: number, signal: AbortSignal) => Promise<string[]>;

/** A report cached in Redis, one key per section plus a header, guarded by one read-write lock. */
export class ReportCache {
  readonly #redis: Redis | Cluster;
  readonly #locks: LockClient;
  /** The lock's resource; its hash tag puts the lock in the data's slot. */
  readonly #resource: string;
  readonly #header: string;
  readonly #sectionKey: (i: number) => string;

  constructor(redis: Redis | Cluster, locks: LockClient, id: string) {
    this.#redis = redis;
    this.#locks = locks;
    this.#resource = `report:{report-${id}}`;
    this.#header = `report:{report-${id}}:header`;
    this.#sectionKey = (i) => `report:{report-${id}}:section:${i}`;
  }

  /** The cached report, or null when there is none yet. Never a half-written one. */
  get(): Promise<Report | null> {
    return this.#locks.withRead(this.#resource, () => this.#read());
  }

  /**
   * The cached report if it is younger than `maxAgeMs`; otherwise rebuilds it
   * first, once, however many callers ask at the same time.
   */
  async getFresh(maxAgeMs: number, compute: ComputeReport): Promise<Report> {
    const cached = await this.get();
    if (cached && Date.now() - cached.builtAt < maxAgeMs) return cached;
    return this.#locks.withWrite(this.#resource, async (lease) => {
      // Check again: another caller may have rebuilt it while we waited (a newer version than we
      // saw; its age alone could pass maxAgeMs on a busy machine, and it would be rebuilt again).
      const current = await this.#read();
      const rebuiltMeanwhile = current && current.version !== cached?.version;
      if (current && (rebuiltMeanwhile || Date.now() - current.builtAt < maxAgeMs)) return current;
      return this.#write((current?.version ?? 0) + 1, await compute((current?.version ?? 0) + 1, lease.signal));
    });
  }

  /** Rebuilds the report unconditionally: computes it, then writes it under the write lease. */
  async rebuild(compute: ComputeReport): Promise<Report> {
    const next = ((await this.get())?.version ?? 0) + 1;
    const sections = await compute(next, new AbortController().signal); // outside the lock: readers go on meanwhile
    return this.#locks.withWrite(this.#resource, async () => {
      const current = await this.#read();
      return this.#write(Math.max(next, (current?.version ?? 0) + 1), sections);
    });
  }

  /** Reads the header and every section in one MGET. Call it under a lease. */
  async #read(): Promise<Report | null> {
    const header = await this.#redis.get(this.#header);
    if (header === null) return null;
    const { version, builtAt, count } = JSON.parse(header) as { version: number; builtAt: number; count: number };
    const keys = Array.from({ length: count }, (_, i) => this.#sectionKey(i));
    const [again, ...sections] = await this.#redis.mget(this.#header, ...keys);
    if (again !== header || sections.some((s) => s === null || !s.startsWith(`v${version}:`))) {
      throw new Error(`report ${this.#resource} is half-built: the lock did not do its job`);
    }
    return { version, builtAt, sections: sections as string[] };
  }

  /** Writes every section, then the header, in several steps. Call it under the write lease. */
  async #write(version: number, content: readonly string[]): Promise<Report> {
    const sections = content.map((text) => `v${version}:${text}`);
    for (const [i, section] of sections.entries()) await this.#redis.set(this.#sectionKey(i), section);
    const builtAt = Date.now();
    await this.#redis.set(this.#header, JSON.stringify({ version, builtAt, count: sections.length }));
    return { version, builtAt, sections };
  }
}

/** What happened, for the runner of the examples. */
export interface CacheRebuildOutcome {
  readonly reads: number;
  /** How often `compute` ran for the stale report that 20 callers asked for at once (1 is right). */
  readonly rebuildsOnStale: number;
  readonly finalVersion: number;
}

/** Plays the pattern on `redis`: readers and rebuilds at once, then a stampede on a stale report. */
export async function runCacheRebuildExample(
  redis: Redis | Cluster,
  log: (line: string) => void = console.log,
): Promise<CacheRebuildOutcome> {
  const locks = new LockClient(redis);
  try {
    const cache = new ReportCache(redis, locks, '42');
    let computed = 0;
    const compute: ComputeReport = async (version) => {
      computed++;
      await new Promise((resolve) => setTimeout(resolve, 20)); // a slow query
      return ['revenue', 'costs', 'margin', 'outlook'].map((name) => `${name} for version ${version}`);
    };

    await cache.rebuild(compute);
    log(`built version ${(await cache.get())!.version}`);

    // Readers and rebuilds at the same time: every read is whole (get() throws otherwise).
    let reads = 0;
    const readers = Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 25; i++) {
        await cache.get();
        reads++;
      }
    });
    const rebuilds = Array.from({ length: 3 }, async () => {
      for (let i = 0; i < 3; i++) await cache.rebuild(compute);
    });
    await Promise.all([...readers, ...rebuilds]);
    log(`${reads} reads during ${computed - 1} rebuilds, none half-built; now version ${(await cache.get())!.version}`);

    // The report goes stale and 20 callers want it at once: it is rebuilt once.
    await new Promise((resolve) => setTimeout(resolve, 60));
    computed = 0;
    const results = await Promise.all(Array.from({ length: 20 }, () => cache.getFresh(50, compute)));
    const versions = new Set(results.map((r) => r.version));
    log(`20 callers asked for a fresh report at once: ${computed} rebuild, all got version ${[...versions].join(', ')}`);
    return { reads, rebuildsOnStale: computed, finalVersion: results[0]!.version };
  } finally {
    await locks.close();
  }
}

async function main(): Promise<void> {
  const url = process.argv[2];
  const server = url ? undefined : await startRedisServer();
  const redis = new Redis(url ?? server!.url);
  try {
    const keys = await redis.keys('report:{report-42}*');
    if (keys.length > 0) await redis.del(...keys);
    const outcome = await runCacheRebuildExample(redis);
    process.exitCode = outcome.rebuildsOnStale === 1 && outcome.reads === 200 ? 0 : 1;
  } finally {
    redis.disconnect();
    await server?.stop();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
