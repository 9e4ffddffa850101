/**
 * `npm run bench:profile`: where the client's CPU goes in one uncontended
 * cycle on a new name. Runs one library's (a) loop, a new resource name per
 * cycle, 64 in flight (or --in-flight N), on its own Redis (loopback), under the V8 CPU
 * profiler (`node:inspector`), and prints the client µs per cycle by part:
 * the socket writes, ioredis (its commands and parser, its Cluster routing,
 * its script wrapper), slot hashing, the library's own code by function, GC.
 * Only the timed loop is profiled: no start-up, no warm-up.
 *
 * Options: --topology standalone|cluster (default cluster), --lib <name>
 * (default rwlock-write; see bench/libs.ts), --seconds N (default 8),
 * --part <one of the parts printed> (whose functions are listed; default
 * redis-rwlock),
 * --in-flight N (default 64; at 1 a cycle is two round trips, and the part
 * the socket writes take includes the server's own run on a small machine),
 * --save <file.cpuprofile> (the whole profile, for Chrome DevTools or
 * `npx speedscope`: callers and inlined frames the table sums away).
 * To compare a change, run it in both checkouts.
 */
import { writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { parseArgs } from 'node:util';
import { type LibName, makeAdapter } from './libs.js';
import { ready, startTopology, type TopologyKind } from './topology.js';
import { cycleLoop } from './workloads/uncontended.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The part of a cycle a function's self time counts to, by where it is defined. */
function partOf(functionName: string, url: string): string {
  if (functionName === '(garbage collector)') return 'GC';
  if (/ioredis\/built\/cluster\//.test(url)) return 'ioredis: Cluster routing';
  if (/ioredis\/built\/Script/.test(url)) return 'ioredis: script wrapper (defineCommand)';
  if (/cluster-key-slot/.test(url)) return 'slot hashing (cluster-key-slot)';
  if (/ioredis|redis-parser|standard-as-callback|denque/.test(url)) return 'ioredis: commands, replies';
  if (/^(writev|writeUtf8String|writeBuffer)$/.test(functionName) || /stream_base_commons|streams\/writable|^node:net$/.test(url))
    return 'socket writes';
  if (/\/src\//.test(url)) return 'redis-rwlock';
  if (/\/bench\//.test(url)) return 'the bench loop';
  return 'other (promises, timers, Node)';
}

const { values } = parseArgs({
  options: {
    topology: { type: 'string', default: 'cluster' },
    lib: { type: 'string', default: 'rwlock-write' },
    seconds: { type: 'string', default: '8' },
    'in-flight': { type: 'string', default: '64' },
    part: { type: 'string', default: 'redis-rwlock' },
    save: { type: 'string' },
  },
});
const kind = values.topology as TopologyKind;
const lib = values.lib as LibName;
const inFlight = Math.max(1, Number(values['in-flight']));
const topology = await startTopology(kind);
try {
  const redis = topology.client();
  await ready(redis);
  const adapter = makeAdapter(lib, redis, 1);
  const resources = Array.from({ length: inFlight }, (_, i) => `profile:${lib}:${i}`);
  await cycleLoop(adapter, lib, resources, 2_000, Number.MAX_SAFE_INTEGER, false, 'new'); // JIT, scripts, slot map

  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  const cpu = process.cpuUsage();
  const run = await cycleLoop(adapter, lib, resources, Number(values.seconds) * 1_000, Number.MAX_SAFE_INTEGER, false, 'new');
  const used = process.cpuUsage(cpu);
  const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: Profile };
  session.disconnect();
  await adapter.close();
  if (values.save !== undefined) await writeFile(values.save, JSON.stringify(profile));

  const byPart = new Map<string, number>();
  const byFunction = new Map<string, number>();
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  profile.samples.forEach((id, i) => {
    const { functionName, url } = nodes.get(id)!.callFrame;
    if (functionName === '(idle)' || functionName === '(program)') return;
    const us = profile.timeDeltas[i] ?? 0;
    const part = partOf(functionName, url);
    byPart.set(part, (byPart.get(part) ?? 0) + us);
    if (part === values.part) {
      const name = `${functionName || '(anonymous)'} (${url.replace(/.*\/(src|node_modules)\//, '$1/')})`;
      byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    }
  });
  const perCycle = (us: number) => `${(us / run.cycles).toFixed(2).padStart(6)} µs`;
  console.log(
    `${lib} on ${kind}, a new name per cycle, ${inFlight} in flight: ${Math.round(run.cycles / (run.elapsedMs / 1_000))} cycles/s, ` +
      `client CPU ${((used.user + used.system) / run.cycles).toFixed(1)} µs per cycle (process.cpuUsage)`,
  );
  console.log('client µs per cycle, by part (profiler samples):');
  for (const [part, us] of [...byPart].sort((a, b) => b[1] - a[1])) console.log(`  ${perCycle(us)}  ${part}`);
  console.log(`  ${perCycle([...byPart.values()].reduce((a, b) => a + b, 0))}  in all`);
  console.log(`${values.part}, by function:`);
  for (const [name, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 10)) console.log(`  ${perCycle(us)}  ${name}`);
} finally {
  await topology.stop();
}
