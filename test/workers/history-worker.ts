// One process of the history workload (test/support/history-run.ts starts
// several): its own ioredis client for the data, its LockClient (on that
// client, or on a node-redis one when the target names node-redis), a few concurrent loops of
// mixed reads and writes over a few resources with random hold times. Every
// step is printed at once as one JSON line on stdout, so the history survives
// a SIGKILL of this process up to the moment it died.
//
// A write, under the write lock: SET state "building:<grant id>", GET the
// counter, hold for a random time, SET counter+1 (skipped when the lease's
// signal says the lock was lost meanwhile), SET state "ready". A read, under a
// read lock: GET state and counter, hold for a random time.
//
// Times are Date.now() on this host (see history.ts for why that is sound
// here). Stops by itself after HISTORY_OPS operations or HISTORY_DURATION_MS,
// whichever comes first, or when the parent sends 'stop' over IPC; then closes
// the LockClient and prints { t: 'done' }.
//
// 'shutdown' over IPC is a graceful shutdown in the middle of the work: no
// critical section begins any more (a hold granted from then on does nothing
// and is released at once), and once no loop holds a lease (its release
// settled) the process prints { t: 'shutdown' } and, in the same tick, closes
// its LockClient, which ends the acquires still in flight with
// ClientClosedError; then it quits its Redis client and exits 0. Each acquire's owner is its operation id, so what a
// process holds can be read from Redis (with ownerPerLoop, its loop's: each loop acquires one resource as one owner,
// again as soon as it released).
//
// With redlockNodes the LockClient runs in redlock mode on one ioredis client per node; the data stays on the
// target. A planted bug (config.plant) patches this process's copy of the library, never the shipped code.
import { tracingChannel } from 'node:diagnostics_channel';
import { type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { ALL_HOLDS, type ExtendRequest } from '../../src/backends/backend.js';
import type { ExtendRound } from '../../src/backends/extend-groups.js';
import { RedlockBackend } from '../../src/backends/redlock.js';
import { type Lease, LockClient, type LockClientOptions, RWLockError, TRACING_CHANNELS } from '../../src/index.js';
import { type HistoryEvent, PAUSE_REPORT_MS, type WorkerConfig } from '../support/history.js';
import { closeLockClientOf, connectTarget, lockClientOf } from '../support/targets.js';

const config = JSON.parse(process.env.HISTORY_CONFIG!) as WorkerConfig;
const { target, name } = config;

const redis = connectTarget(target, config.redisOptions as RedisOptions, {
  scaleReads: 'master',
  ...(config.clusterOptions as ClusterOptions),
});
redis.on('error', () => undefined); // reconnects are ioredis' business; failures show up on the commands

const clientOptions: LockClientOptions = { leaseMs: config.leaseMs, waitMs: config.waitMs, ...config.lockOptions };
const lockRedis = await lockClientOf(target, redis);
const redlockNodes = config.redlockNodes?.map((n) => {
  const node = new Redis(n.port, n.host, config.redisOptions as RedisOptions);
  node.on('error', () => undefined); // killed and paused nodes are part of the run
  return node;
});
if (config.plant === 'renewal-abandons-all') plantRenewalAbandonsAll();
const locks = new LockClient(redlockNodes ?? lockRedis, clientOptions);
locks.on('lost', () => undefined); // each lease's own signal is recorded below

const emit = (event: HistoryEvent) => process.stdout.write(`${JSON.stringify(event)}\n`);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** When the client's last renewal round started (config.releaseBeforeRenewalMs). */
let lastRenewalAt: number | undefined;
if (config.releaseBeforeRenewalMs !== undefined) {
  tracingChannel(TRACING_CHANNELS.renew).start.subscribe(() => {
    lastRenewalAt = Date.now();
  });
}

/**
 * How long to hold: for three holds in four, until a quarter to all of
 * `releaseBeforeRenewalMs` before a renewal round (a timer that fires late
 * still releases before the round), else at random.
 */
function holdMs(): number {
  const before = config.releaseBeforeRenewalMs;
  if (before === undefined || lastRenewalAt === undefined || Math.random() < 0.25) {
    return config.minHoldMs + Math.random() * (config.maxHoldMs - config.minHoldMs);
  }
  const period = Math.floor(config.leaseMs / 3); // the client's renewal interval (src/holdings.ts)
  const now = Date.now();
  let end = lastRenewalAt + period - before * (0.25 + 0.75 * Math.random());
  while (end - now < config.minHoldMs) end += period;
  return end - now;
}

// The event loop's pauses (CPU starvation, GC), in which no lease can be renewed: a ticker that
// ran late says so, for the checker (history.ts, "Stalled holders").
let lastTick = Date.now();
setInterval(() => {
  const now = Date.now();
  // Due 10 ms after the last tick: the loop may have been idle until then.
  if (now - lastTick > PAUSE_REPORT_MS) emit({ t: 'paused', process: name, from: lastTick + 10, to: now });
  lastTick = now;
}, 10).unref();
const pick = <T>(items: readonly T[]) => items[Math.floor(Math.random() * items.length)]!;
const errorName = (e: unknown) => (e instanceof Error ? e.name : typeof e);

let stopping = false;
/** Set on 'shutdown': a granted hold no longer begins its critical section. */
let shuttingDown = false;
let shutdownDone: Promise<void> | undefined;
let loopsEnded = false;
/** Leases the loops hold now (from the grant until the release settled), and a wake-up for the shutdown waiting for none. */
let holding = 0;
let noneHeld: (() => void) | undefined;
/** Acquires between their call and their outcome. */
let acquiring = 0;
let go: () => void;
const going = new Promise<void>((resolve) => (go = resolve));
let started = 0;
let seq = 0;
process.on('message', (message) => {
  if (message === 'stop') stopping = true;
  if (message === 'go') go();
  if (message === 'shutdown' && !loopsEnded) shutdownDone ??= shutdown();
});

/**
 * The bug of redlock renewal before it dropped a lost lease's hold alone: a
 * lease renewal finds lost (its release may be on the wire) drops every hold
 * of its owner on every node, also a hold the same owner was granted since.
 */
function plantRenewalAbandonsAll(): void {
  const extend = RedlockBackend.prototype.extend;
  RedlockBackend.prototype.extend = async function (this: RedlockBackend, requests: readonly ExtendRequest[], round?: ExtendRound) {
    const left = await extend.call(this, requests, round);
    requests.forEach((r, k) => {
      if (left[k] === 0) void this.abandon(r.keys, r.owner, ALL_HOLDS).catch(() => undefined);
    });
    return left;
  };
}

/** Closes the redlock nodes' clients, if any. */
function quitNodes(): Promise<unknown> {
  return Promise.all((redlockNodes ?? []).map((node) => node.quit().catch(() => node.disconnect())));
}

/** A graceful shutdown while loops wait or acquire: see the header. */
async function shutdown(): Promise<void> {
  stopping = true;
  shuttingDown = true;
  while (holding > 0) await new Promise<void>((resolve) => (noneHeld = resolve));
  // close() in the same tick as the check: no lease can be granted in between.
  const at = Date.now();
  emit({ t: 'shutdown', process: name, at, acquiring });
  await locks.close();
  const closeMs = Date.now() - at;
  await quitNodes();
  await redis.quit();
  emit({ t: 'done', process: name, at: Date.now(), closeMs, quitMs: Date.now() - at - closeMs, operations: started });
}

/** The value of `promise`, or the error's name when it rejects. */
async function attempt<T>(promise: Promise<T>): Promise<{ value?: T; error?: string; message?: string }> {
  try {
    return { value: await promise };
  } catch (error) {
    return { error: errorName(error), message: String((error as Error)?.message ?? error).slice(0, 300) };
  }
}

async function operation(index: number): Promise<void> {
  const resource = config.ownerPerLoop ? config.resources[index % config.resources.length]! : pick(config.resources);
  const mode = Math.random() < config.writeShare ? 'write' : 'read';
  const id = `${name}:${++seq}`;
  const data = `data:{${resource}}`;
  const requestedAt = Date.now();
  let lease: Lease;
  try {
    const lock = locks.lock(resource);
    const options = {
      owner: config.ownerPerLoop ? `${name}.l${index}` : id,
      ...(config.fixedLeaseMs !== undefined && { leaseMs: config.fixedLeaseMs }),
    };
    acquiring++;
    lease = await (mode === 'write' ? lock.acquireWrite(options) : lock.acquireRead(options)).finally(() => acquiring--);
  } catch (error) {
    emit({
      t: 'error',
      id,
      process: name,
      resource,
      mode,
      at: Date.now(),
      name: errorName(error),
      typed: error instanceof RWLockError,
      message: String((error as Error)?.message ?? error).slice(0, 300),
    });
    return;
  }
  emit({ t: 'grant', id, process: name, resource, mode, owner: lease.token, fence: lease.fence, requestedAt, grantedAt: Date.now() });
  // A lease can be lost by the time it is granted (an acquire that waited out a failover in ioredis'
  // queue for longer than the lease): its signal is then already aborted and fires no event.
  // The lease's local deadline (the library's internal holding, in performance.now() time), so that
  // an overlap shows whether its holder was told after its own deadline (a stalled process).
  const localDeadline = () => {
    const h = (lease as unknown as { holding?: { expiresAt: number } }).holding;
    return h ? Math.round(performance.timeOrigin + h.expiresAt) : undefined;
  };
  const reportLost = () =>
    emit({
      t: 'lost',
      id,
      at: Date.now(),
      reason: String((lease.signal.reason as Error)?.message ?? '').slice(0, 200),
      deadline: localDeadline(),
    });
  if (lease.signal.aborted) reportLost();
  else lease.signal.addEventListener('abort', reportLost, { once: true });

  holding++;
  try {
    await criticalSection(id, mode, data, lease);
    await release(id, lease);
  } finally {
    if (--holding === 0) noneHeld?.();
  }
}

/** Releases `lease`, and again while its outcome is unknown. */
async function release(id: string, lease: Lease): Promise<void> {
  const releaseAt = Date.now();
  emit({ t: 'release-sent', id, at: releaseAt });
  let released = await attempt(lease.release());
  // Its outcome is unknown: calling release() again finishes it (or finds it done).
  for (let retries = 0; config.retryUnknownRelease && released.error === 'RedisUnavailableError' && retries < 5; retries++) {
    await sleep(100);
    released = await attempt(lease.release());
  }
  emit({ t: 'released', id, at: Date.now(), outcome: released.error ?? 'ok', ...(released.message && { message: released.message }) });
}

/** The work under the lock (none once the process shuts down): see the header. */
async function criticalSection(id: string, mode: 'read' | 'write', data: string, lease: Lease): Promise<void> {
  if (shuttingDown) {
    emit({ t: 'data', id, shutdown: true });
    return;
  }
  if (mode === 'write') {
    const building = await attempt(redis.set(`${data}:state`, `building:${id}`));
    const read = building.error ? building : await attempt(redis.get(`${data}:counter`));
    if (read.error) {
      emit({ t: 'data', id, dataError: read.error });
    } else {
      const seen = Number(read.value ?? 0);
      await sleep(holdMs());
      if (lease.signal.aborted && !config.ignoreLoss) {
        emit({ t: 'data', id, seen, skippedWrite: true });
      } else {
        const writeSentAt = Date.now();
        const wrote = await attempt(redis.set(`${data}:counter`, seen + 1));
        const wroteAt = Date.now();
        if (!wrote.error) await attempt(redis.set(`${data}:state`, 'ready'));
        emit(
          wrote.error
            ? { t: 'data', id, seen, dataError: wrote.error, writeSentAt, wroteAt }
            : { t: 'data', id, seen, wrote: true, writeSentAt, wroteAt },
        );
      }
    }
  } else {
    const read = await attempt(redis.mget(`${data}:state`, `${data}:counter`));
    await sleep(holdMs());
    emit(
      read.error
        ? { t: 'data', id, dataError: read.error }
        : { t: 'data', id, state: read.value![0] ?? null, seen: Number(read.value![1] ?? 0) },
    );
  }
}

async function loop(index: number): Promise<void> {
  while (!stopping && started < config.ops && Date.now() < deadline) {
    started++;
    const before = Date.now();
    await operation(index);
    // After a failure, do not hammer a sick server: every loop stays bounded in rate.
    if (Date.now() - before < 2) await sleep(config.pauseMs);
  }
}

// Every process starts its operations on the parent's 'go', once all are up:
// the CPU burst of starting processes would otherwise stall the first ones.
await redis.ping().catch(() => undefined);
emit({ t: 'start', process: name, pid: process.pid, at: Date.now() });
const startLimit = setTimeout(() => go(), 30_000);
await going;
clearTimeout(startLimit);
const deadline = Date.now() + config.durationMs;
// A hard stop: a hang is reported, never waited out.
const watchdog = setTimeout(() => {
  emit({ t: 'hang', process: name, at: Date.now() });
  process.exit(3);
}, config.durationMs + config.graceMs);
watchdog.unref();
await Promise.all(Array.from({ length: config.loops }, (_, i) => loop(i)));
loopsEnded = true;
if (shutdownDone) {
  await shutdownDone;
  process.exit(0);
}
const closeStarted = Date.now();
await locks.close();
await quitNodes();
await closeLockClientOf(lockRedis, redis);
emit({ t: 'done', process: name, at: Date.now(), closeMs: Date.now() - closeStarted, operations: started });
redis.disconnect();
process.exit(0);
