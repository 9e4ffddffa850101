/**
 * `npm run bench:turnaround`: where the time of one call goes at 1 in flight.
 * Runs each library's uncontended loop on a new name, one cycle at a time,
 * on one server (loopback), and times every call on the client's socket:
 *
 * - the client's turn: from a reply coming in to the next call going out
 *   (the reply decoded, the caller's code, the next call built and written);
 * - the round trip: from a call going out to its reply coming in (the
 *   server's read, its run of the command, its reply, both kernels' work).
 *
 * A cycle is two calls, so at 1 in flight it takes two of each, and the
 * difference between two libraries splits into the client's part and the
 * server's. The libraries take turns, one slice each per round (--rounds),
 * so the machine's drift falls on all of them alike; each is compared with the
 * first by the median of its per-round ratios.
 *
 * Options: --libs a,b,... (default floor,ref-hash-args,rwlock-write; see
 * bench/libs.ts; not the autopipelining ones: their calls wait for the end
 * of the tick by design), --cycles N per slice (default 10000), --rounds N
 * (default 3).
 */
import type { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { AUTOPIPELINED_LIBS, type LibName, makeAdapter } from './libs.js';
import { median } from './stats.js';
import { ready, startTopology } from './topology.js';
import { cycleLoop } from './workloads/uncontended.js';

/** Every call's client turn and round trip on one socket, in ms, taken between `start()` and `stop()`. */
class SocketTimes {
  readonly turns: number[] = [];
  readonly roundTrips: number[] = [];
  private on = false;
  private lastIn = 0;
  private lastOut = 0;

  constructor(stream: Writable & { _write: Writable['_write']; _writev?: Writable['_writev'] }) {
    // The stream's own write functions: what the client writes, after any cork, goes through one of them.
    const wentOut = () => {
      const t = performance.now();
      if (this.on && this.lastIn > this.lastOut) this.turns.push(t - this.lastIn);
      this.lastOut = t;
    };
    const write = stream._write.bind(stream);
    stream._write = (...args) => {
      wentOut();
      write(...args);
    };
    const writev = stream._writev?.bind(stream);
    if (writev) {
      stream._writev = (...args) => {
        wentOut();
        writev(...args);
      };
    }
    stream.prependListener('data', () => {
      const t = performance.now();
      if (this.on && this.lastOut > this.lastIn) this.roundTrips.push(t - this.lastOut);
      this.lastIn = t;
    });
  }

  /** Takes the calls from here on (the gap since the last slice is no turn). */
  start(): void {
    this.lastIn = this.lastOut = 0;
    this.on = true;
  }

  stop(): void {
    this.on = false;
  }
}

const { values } = parseArgs({
  options: {
    libs: { type: 'string', default: 'floor,ref-hash-args,rwlock-write' },
    cycles: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '3' },
  },
});
const libs = values.libs.split(',') as LibName[];
for (const lib of libs) {
  if (AUTOPIPELINED_LIBS.includes(lib)) throw new Error(`${lib}: an autopipelining client writes at the end of the tick; leave it out`);
}
const cycles = Math.max(100, Number(values.cycles));
const rounds = Math.max(1, Number(values.rounds));

const topology = await startTopology('standalone');
try {
  const contestants = await Promise.all(
    libs.map(async (lib) => {
      const redis = topology.client();
      await ready(redis);
      const adapter = makeAdapter(lib, redis, 1);
      const times = new SocketTimes((redis as unknown as { stream: ConstructorParameters<typeof SocketTimes>[0] }).stream);
      return { lib, adapter, times, cycles: 0, elapsedMs: 0, rates: [] as number[] };
    }),
  );
  for (const c of contestants) await cycleLoop(c.adapter, c.lib, [`turn:${c.lib}`], 60_000, 2_000, false, 'new'); // JIT, scripts
  for (let round = 0; round < rounds; round++) {
    for (const c of contestants) {
      c.times.start();
      const run = await cycleLoop(c.adapter, c.lib, [`turn:${c.lib}:${round}`], 60_000, cycles, false, 'new');
      c.times.stop();
      c.cycles += run.cycles;
      c.elapsedMs += run.elapsedMs;
      c.rates.push(run.cycles / run.elapsedMs);
    }
  }
  const mean = (ms: number[]) => ms.reduce((a, b) => a + b, 0) / ms.length;
  const us = (ms: number) => `${(ms * 1_000).toFixed(1)} µs`;
  const [first] = contestants;
  console.log(`1 in flight, a new name per cycle, one server; ${rounds} rounds of ${cycles} cycles each, taking turns`);
  console.log(
    'library | cycles/s | vs first, median of per-round ratios | per call: client turn, mean (median) | round trip, mean (median)',
  );
  for (const c of contestants) {
    const rate = c.cycles / (c.elapsedMs / 1_000);
    // Rounds, not totals: a loaded spell that falls on one library's slice moves the median little.
    const vs = c === first ? '' : `${(median(c.rates.map((r, i) => r / first!.rates[i]!)) ?? Number.NaN).toFixed(2)}x`;
    const split = (ms: number[]) => `${us(mean(ms))} (${us(median(ms) ?? Number.NaN)})`;
    console.log(`${c.lib} | ${Math.round(rate)} | ${vs} | ${split(c.times.turns)} | ${split(c.times.roundTrips)}`);
  }
  for (const c of contestants) await c.adapter.close();
} finally {
  await topology.stop();
}
