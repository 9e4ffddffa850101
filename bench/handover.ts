/**
 * `npm run bench:handover`: where the time of one hand-over goes. The (b)
 * baton workload (8 waiters, each on its own connection and LockClient,
 * holding 1 ms; a holder queues again only after another was granted), with
 * every grant's hand-over taken apart on one clock:
 *
 *   release called → its bytes on the holder's socket → the release script
 *   runs (the handed grant's fence is the server's clock then, mapped onto
 *   this process's clock with TIME) → the message comes in on the next
 *   holder's subscriber socket → its `acquire` resolves (the `acquired`
 *   event, just before the library returns the lease) → its code runs (the
 *   caller's `await` returns).
 *
 * Beside it, in the same rounds, the floor polling in a tight loop and on
 * setImmediate (bench/libs.ts): release called → the next holder's code
 * runs, and grants/s, whose ratio is the hand-over target's. Libraries take
 * turns, one slice each per round, so the machine's drift falls on all alike.
 *
 * The CPU is named in the first line of the output (os.cpus()).
 *
 * Options: --topology standalone|cluster (default standalone), --seconds N
 * per slice (default 2), --rounds N (default 3), --libs a,b (default
 * rwlock-write,floor-spin,floor-immediate; rwlock-base with --baseline
 * <checkout>), --waiters N (default 8).
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { Cluster, Redis } from 'ioredis';
import type { LockClient } from '../src/index.js';
import { isCluster, type RedisClient } from '../src/redis.js';
import { baselineLockClient, type Held, type LibName, loadBaseline, makeAdapter } from './libs.js';
import { holdFor, median, percentile } from './stats.js';
import { ready, startTopology, type TopologyKind } from './topology.js';

type Stream = NodeJS.WritableStream & {
  _write: (...args: unknown[]) => void;
  _writev?: (...args: unknown[]) => void;
  prependListener(event: 'data', listener: () => void): unknown;
};

/** The last time something was written to, and read from, a socket. */
class SocketClock {
  lastOut = 0;
  lastIn = 0;
  constructor(stream: Stream) {
    const out = () => void (this.lastOut = performance.now());
    const write = stream._write.bind(stream);
    stream._write = (...args) => {
      out();
      write(...args);
    };
    const writev = stream._writev?.bind(stream);
    if (writev) {
      stream._writev = (...args) => {
        out();
        writev(...args);
      };
    }
    stream.prependListener('data', () => void (this.lastIn = performance.now()));
  }
}

const streamOf = (c: Redis) => (c as unknown as { stream: Stream }).stream;

/** Every connection a waiter's LockClient may use, and the subscribers it makes (found through `duplicate`). */
class Waiter {
  readonly out: SocketClock[] = [];
  readonly subs: SocketClock[] = [];
  constructor(readonly redis: RedisClient) {
    const nodes: Redis[] = isCluster(redis) ? (redis as Cluster).nodes('master') : [redis as Redis];
    for (const node of nodes) {
      // A Cluster's node connections may still be connecting (their socket not made yet).
      if (streamOf(node)) this.out.push(new SocketClock(streamOf(node)));
      else node.once('connect', () => this.out.push(new SocketClock(streamOf(node))));
      const duplicate = node.duplicate.bind(node);
      node.duplicate = (...args: Parameters<Redis['duplicate']>) => {
        const sub = duplicate(...args);
        sub.once('connect', () => this.subs.push(new SocketClock(streamOf(sub))));
        return sub;
      };
    }
  }
  lastOut(): number {
    return Math.max(0, ...this.out.map((c) => c.lastOut));
  }
  /** The last time a subscriber socket read something. */
  subIn(): number {
    return Math.max(0, ...this.subs.map((c) => c.lastIn));
  }
}

interface Stages {
  callToWire: number[];
  wireToScript: number[];
  scriptToMessage: number[];
  messageToResolved: number[];
  resolvedToCode: number[];
  callToReply: number[];
  callToNextCode: number[];
  /** From a holder's code running to the next holder's (hold included). */
  cycle: number[];
  /** From a holder's code running to its release call: the hold (1 ms asked). */
  hold: number[];
}

const newStages = (): Stages => ({
  callToWire: [],
  wireToScript: [],
  scriptToMessage: [],
  messageToResolved: [],
  resolvedToCode: [],
  callToReply: [],
  callToNextCode: [],
  cycle: [],
  hold: [],
});

/** A thread's scheduler counters (/proc/<pid>/task/<tid>/schedstat): ns on a CPU, ns waiting for one, times scheduled in. */
function schedstat(pid: number, tid = pid): [number, number, number] {
  try {
    const [run, wait, slices] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').trim().split(/\s+/).map(Number);
    return [run!, wait!, slices!];
  } catch {
    return [Number.NaN, Number.NaN, Number.NaN];
  }
}

/** How long the servers' main threads and this process's waited for a CPU, summed over `pids`, between two readings. */
class SchedWatch {
  private readonly start: [number, number, number][];
  constructor(private readonly pids: readonly number[]) {
    this.start = pids.map((p) => schedstat(p));
  }
  /** [ns waiting for a CPU, times scheduled in], since construction. */
  stop(): [number, number] {
    const end = this.pids.map((p) => schedstat(p));
    let wait = 0;
    let slices = 0;
    end.forEach((e, i) => {
      wait += e[1] - this.start[i]![1];
      slices += e[2] - this.start[i]![2];
    });
    return [wait, slices];
  }
}

/** This process's clock (performance.now) minus the server's (TIME, in ms), from the sample with the shortest round trip. */
async function serverClockOffset(redis: RedisClient): Promise<number> {
  let best = { rtt: Infinity, offset: 0 };
  for (let i = 0; i < 50; i++) {
    const t0 = performance.now();
    const [s, us] = (await (redis as Redis).time()) as unknown as [string, string];
    const t1 = performance.now();
    const server = Number(s) * 1000 + Number(us) / 1000;
    if (t1 - t0 < best.rtt) best = { rtt: t1 - t0, offset: (t0 + t1) / 2 - server };
  }
  return best.offset;
}

async function slice(
  kind: TopologyKind,
  topology: Awaited<ReturnType<typeof startTopology>>,
  lib: LibName,
  waiters: number,
  seconds: number,
  tag: string,
  stages: Stages,
  serverPids: readonly number[],
): Promise<{ grants: number; seconds: number; server: [number, number]; client: [number, number] }> {
  const clients = Array.from({ length: waiters }, () => topology.client());
  await Promise.all(clients.map(ready));
  const offset = await serverClockOffset(clients[0]!);
  // The rwlock libraries on ioredis are taken apart stage by stage; others (node-redis too) through their adapter.
  const rw = lib === 'rwlock-write' || lib === 'rwlock-base';
  const watched = clients.map((c) => new Waiter(c));
  const locks: LockClient[] = [];
  const adapters = clients.map((c, i) => {
    if (!rw) return makeAdapter(lib, c, 1);
    const Ctor = lib === 'rwlock-base' ? baselineLockClient()! : LockClientOf();
    locks[i] = new Ctor(c);
    return undefined;
  });
  // Every library of a round on one slot (a Cluster's masters do not share the machine alike).
  const resource = `{handover:${tag}}:${lib}`;
  const resolvedAt = new Array<number>(waiters).fill(0);
  locks.forEach((l, i) => l.on('acquired', () => void (resolvedAt[i] = performance.now())));

  interface Grant {
    who: number;
    code: number;
    fence: number;
    callAt?: number;
    wireAt?: number;
    replyAt?: number;
    subIn: number;
    resolved: number;
  }
  const grants: Grant[] = [];
  let stopped = false;
  let grantWaiters: (() => void)[] = [];
  const acquire = async (i: number): Promise<{ held: Held; fence: number }> => {
    if (!rw) return { held: await adapters[i]!.acquire(resource, { mode: 'write' }), fence: 0 };
    const lease = await locks[i]!.lock(resource).acquireWrite({ waitMs: 10_000 });
    return { held: lease, fence: lease.fence };
  };
  const loop = async (i: number) => {
    while (!stopped) {
      const { held, fence } = await acquire(i);
      const code = performance.now();
      const g = grants.push({ who: i, code, fence, subIn: watched[i]!.subIn(), resolved: resolvedAt[i]! }) - 1;
      const w = grantWaiters;
      grantWaiters = [];
      for (const r of w) r();
      await holdFor(1);
      const grant = grants[g]!;
      grant.callAt = performance.now();
      const releasing = held.release();
      grant.wireAt = watched[i]!.lastOut();
      await releasing;
      grant.replyAt = performance.now();
      while (!stopped && grants.length <= g + 1) await new Promise<void>((r) => grantWaiters.push(r));
    }
  };
  const started = performance.now();
  const warmup = started + 300;
  const end = warmup + seconds * 1000;
  let server: SchedWatch | undefined;
  let client: SchedWatch | undefined;
  let sched: { server: [number, number]; client: [number, number] } = { server: [0, 0], client: [0, 0] };
  setTimeout(() => {
    server = new SchedWatch(serverPids);
    client = new SchedWatch([process.pid]);
  }, warmup - started);
  setTimeout(() => {
    sched = { server: server!.stop(), client: client!.stop() };
    stopped = true;
    for (const r of grantWaiters) r();
  }, end - started);
  const loops = Array.from({ length: waiters }, (_, i) => loop(i));
  await Promise.allSettled(loops);
  await Promise.all([...locks.map((l) => l.close()), ...adapters.map((a) => a?.close())]);
  for (const c of clients) c.disconnect();

  let n = 0;
  for (let k = 1; k < grants.length; k++) {
    const prev = grants[k - 1]!;
    const g = grants[k]!;
    if (g.code < warmup || g.code > end || prev.callAt === undefined || prev.who === g.who) continue;
    n++;
    stages.callToNextCode.push(g.code - prev.callAt);
    stages.cycle.push(g.code - prev.code);
    stages.hold.push(prev.callAt - prev.code);
    if (prev.replyAt !== undefined) stages.callToReply.push(prev.replyAt - prev.callAt);
    if (!rw) continue;
    const wire = prev.wireAt! >= prev.callAt ? prev.wireAt! : undefined;
    const script = g.fence / 1000 + offset;
    const msg = g.subIn >= prev.callAt ? g.subIn : undefined;
    const resolved = g.resolved >= prev.callAt ? g.resolved : undefined;
    if (wire !== undefined) stages.callToWire.push(wire - prev.callAt);
    if (wire !== undefined) stages.wireToScript.push(script - wire);
    if (msg !== undefined) stages.scriptToMessage.push(msg - script);
    if (msg !== undefined && resolved !== undefined) stages.messageToResolved.push(resolved - msg);
    if (resolved !== undefined) stages.resolvedToCode.push(g.code - resolved);
  }
  void kind;
  return { grants: n, seconds, ...sched };
}

let LockClientCtor: typeof LockClient | undefined;
const LockClientOf = () => LockClientCtor!;

const { values } = parseArgs({
  options: {
    topology: { type: 'string', default: 'standalone' },
    seconds: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '3' },
    libs: { type: 'string' },
    waiters: { type: 'string', default: '8' },
    baseline: { type: 'string' },
  },
});
LockClientCtor = (await import('../src/index.js')).LockClient;
if (values.baseline) await loadBaseline(values.baseline);
const libs = (values.libs ?? `rwlock-write,${values.baseline ? 'rwlock-base,' : ''}floor-spin,floor-immediate`).split(',') as LibName[];
const kind = values.topology as TopologyKind;
const rounds = Math.max(1, Number(values.rounds));
const seconds = Number(values.seconds);
const waiters = Math.max(2, Number(values.waiters));
const topology = await startTopology(kind);
const mean = (v: number[]) => (v.length === 0 ? null : v.reduce((a, b) => a + b, 0) / v.length);
const fmt = (ms: number | null) => (ms === null ? '–' : `${(ms * 1000).toFixed(0)} µs`);
try {
  const all = new Map(libs.map((l) => [l, { stages: newStages(), rates: [] as number[], server: [0, 0, 0], client: [0, 0, 0] }]));
  const serverPids = await Promise.all(
    (await topology.masters()).map(async (m) => Number(/process_id:(\d+)/.exec(await m.info('server'))?.[1])),
  );
  for (let round = 0; round < rounds; round++) {
    const order = [...libs.slice(round % libs.length), ...libs.slice(0, round % libs.length)];
    const tag = `${Date.now().toString(36)}${round}`;
    for (const lib of order) {
      const s = all.get(lib)!;
      const r = await slice(kind, topology, lib, waiters, seconds, tag, s.stages, serverPids);
      s.rates.push(r.grants / r.seconds);
      s.server = [s.server[0]! + r.server[0], s.server[1]! + r.server[1], s.server[2]! + r.grants];
      s.client = [s.client[0]! + r.client[0], s.client[1]! + r.client[1], s.client[2]! + r.grants];
      process.stderr.write(`round ${round + 1} ${lib}: ${(r.grants / r.seconds).toFixed(0)} handoffs/s\n`);
    }
  }
  const [first] = libs;
  console.log(
    `hand-over timeline on ${os.cpus()[0]?.model.trim()} (${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(1)}), ${kind}, ${waiters} waiters holding 1 ms, ${rounds} rounds of ${seconds} s, taking turns; medians (p90 in brackets)`,
  );
  console.log(
    `library | handoffs/s (median of rounds) | ${first} ÷ this, per round | release called → next holder runs, median (p90; mean) | release reply | hold, mean | grant to grant, mean`,
  );
  for (const [lib, s] of all) {
    const vs = lib === first ? '' : s.rates.map((r, i) => (all.get(first!)!.rates[i]! / r).toFixed(2)).join(' ');
    const c = s.stages.callToNextCode;
    console.log(
      `${lib} | ${median(s.rates)?.toFixed(0)} | ${vs} | ${fmt(median(c))} (${fmt(percentile(c, 90))}; ${fmt(mean(c))}) | ${fmt(median(s.stages.callToReply))} | ${fmt(mean(s.stages.hold))} | ${fmt(mean(s.stages.cycle))}`,
    );
  }
  // The hand-over target: against the faster of the two polling floors in each round.
  const floors = ['floor-spin', 'floor-immediate'].filter((l) => all.has(l as LibName)) as LibName[];
  if (floors.length > 0) {
    console.log('÷ the faster polling floor, per round (median)');
    for (const [lib, s] of all) {
      if (floors.includes(lib)) continue;
      const per = s.rates.map((r, i) => r / Math.max(...floors.map((f) => all.get(f)!.rates[i]!)));
      console.log(`${lib} | ${per.map((v) => v.toFixed(2)).join(' ')} (${median(per)?.toFixed(2)})`);
    }
  }
  console.log(
    "waiting for a CPU (schedstat), per hand-over: the server's main thread(s) | this process's main thread (times scheduled in, µs waited in all)",
  );
  for (const [lib, s] of all) {
    const per = ([wait, slices, grants]: number[]) => `${(slices! / grants!).toFixed(1)} times, ${(wait! / grants! / 1000).toFixed(0)} µs`;
    console.log(`${lib} | ${per(s.server)} | ${per(s.client)}`);
  }
  for (const [lib, s] of all) {
    if (!lib.startsWith('rwlock') || s.stages.callToWire.length === 0) continue;
    console.log(`${lib}, stage by stage (median, p90):`);
    for (const [name, label] of [
      ['callToWire', 'release called → on the wire'],
      ['wireToScript', 'on the wire → release script runs (server clock)'],
      ['scriptToMessage', "script runs → message read on the waiter's socket"],
      ['messageToResolved', 'message read → acquire resolves'],
      ['resolvedToCode', "acquire resolves → the caller's code runs"],
      ['callToNextCode', 'in all: release called → next holder runs'],
    ] as const) {
      const v = s.stages[name];
      console.log(`  ${label.padEnd(52)} ${fmt(median(v)).padStart(8)} ${fmt(percentile(v, 90)).padStart(8)}   (${v.length})`);
    }
  }
} finally {
  await topology.stop();
}
