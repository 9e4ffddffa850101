/**
 * `npm run bench` / `npm run bench:smoke`: starts its own Redis servers (a
 * standalone server and a 6-node Cluster, loopback only), measures every
 * workload for every library side by side, and writes
 * bench/results/<name>.json and .md (and, after a full run of everything,
 * its summary in bench/README.md).
 *
 * Options:
 *   --smoke                 tiny counts (CI); writes bench/results/smoke.*
 *   --topology a[,b]        standalone, cluster
 *   --only w[,w]            uncontended, contended, readers, scale, renewal, neighbour, memory, anatomy
 *   --libs l[,l]            restrict the libraries (see bench/libs.ts)
 *   --runs N                runs per figure
 *   --in-flight n[,n]       (a) uncontended at these concurrencies only (default 1,16,64)
 *   --leases N              leases held in (e) renewal and (g) neighbour
 *   --baseline <checkout>   also measure rwlock-write (and rwlock-redlock,
 *                           contended) from another checkout, side by side
 *                           in the same run
 *   --out path/prefix       where to write the .json and .md
 *   --render file.json      no measurement: re-evaluate the targets of a
 *                           results file and rewrite its .md (and the README
 *                           summary, for latest.json)
 *
 * `TEST_SERVER=valkey` runs it on valkey-server (test/setup/server.ts) and
 * writes bench/results/valkey-<name>.*, as `redis8` and `valkey9` do on the
 * servers scripts/build-servers.sh builds; each result's header names the server.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { stopAllServers } from '../src/testing/index.js';
import { testServer } from '../test/setup/server.js';
import { type BenchConfig, FULL, SMOKE } from './config.js';
import { BASELINE_LIBS, EXCLUSIVE_LIBS, hasBaseline, type LibName, loadBaseline, REDLOCK_LIBS, UNCONTENDED_LIBS } from './libs.js';
import { renderMarkdown, renderSummary } from './report.js';
import { type BenchResults, type Machine, medianRatios, perRunRatios, type TopologyResults } from './results.js';
import { medianRecord } from './stats.js';
import { evaluateTargets } from './targets.js';
import { startTopology, type Topology, type TopologyKind } from './topology.js';
import { measureAnatomy } from './workloads/anatomy.js';
import { type ContendedResult, measureContended } from './workloads/contended.js';
import { measureMemory } from './workloads/memory.js';
import { measureNeighbour } from './workloads/neighbour.js';
import { measureReaders, type ReadersResult } from './workloads/readers.js';
import { measureExtend, measureRwlockRenewal, measureSemaphoreRenewal } from './workloads/renewal.js';
import { measureScale, type ScaleResult } from './workloads/scale.js';
import { type CycleResult, uncontendedRun } from './workloads/uncontended.js';

const WORKLOADS = ['uncontended', 'contended', 'readers', 'scale', 'renewal', 'neighbour', 'memory', 'anatomy'] as const;
type Workload = (typeof WORKLOADS)[number];

const benchDir = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(benchDir, '..');

function list<T extends string>(value: string | undefined, allowed: readonly T[], what: string): T[] | undefined {
  if (value === undefined) return undefined;
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items) if (!allowed.includes(item as T)) throw new Error(`--${what}: unknown "${item}" (use ${allowed.join(', ')})`);
  return items as T[];
}

function log(message: string): void {
  process.stderr.write(`${message}\n`);
}

function packageVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(root, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function rotate<T>(items: readonly T[], by: number): T[] {
  const k = by % Math.max(1, items.length);
  return [...items.slice(k), ...items.slice(0, k)];
}

async function machine(topology: Topology | undefined): Promise<Machine> {
  let redis = 'unknown';
  let server: string | undefined;
  if (topology) {
    const [m] = await topology.masters();
    const info = await m!.info('server');
    redis = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
    const valkey = /valkey_version:(\S+)/.exec(info)?.[1];
    server = valkey ? `Valkey ${valkey}` : `Redis ${redis}`;
  }
  return {
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
    cores: os.cpus().length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    redis,
    ...(server ? { server } : {}),
    ioredis: packageVersion('ioredis'),
    loadAverageAtStart: os.loadavg(),
  };
}

const short = (n: number | null | undefined, d = 1) => (typeof n === 'number' ? n.toFixed(d) : '–');

async function runTopology(
  topology: Topology,
  config: BenchConfig,
  only: readonly Workload[],
  libs: readonly LibName[],
): Promise<TopologyResults> {
  const started = performance.now();
  const results: TopologyResults = { ratios: {}, seconds: 0 };
  const runs: { uncontended?: CycleResult[]; contended?: ContendedResult[]; readers?: ReadersResult[]; scale?: ScaleResult[] }[] = [];
  const stamp = Date.now().toString(36);
  const tagOf = (run: number) => `${stamp}${run}`;
  const want = (w: Workload) => only.includes(w);

  if (want('anatomy')) {
    log(`[${topology.kind}] server µs per call (anatomy)`);
    results.anatomy = await measureAnatomy(topology, config, tagOf(0));
    for (const a of results.anatomy) log(`  ${a.usecPerCall.toFixed(2).padStart(6)} µs  ${a.what}`);
  }
  if (want('memory')) {
    log(`[${topology.kind}] (f) memory`);
    results.memory = await measureMemory(topology, config, tagOf(0));
  }
  for (let run = 0; run < config.runs; run++) {
    const tag = tagOf(run);
    const record: (typeof runs)[number] = {};
    runs.push(record);
    const order = rotate(libs, run);
    if (want('uncontended')) {
      log(`[${topology.kind}] run ${run + 1}/${config.runs}: (a) uncontended`);
      record.uncontended = await uncontendedRun(topology, config, tag, order);
      for (const c of record.uncontended)
        log(
          `  ${c.lib.padEnd(14)} ${c.pattern.padEnd(6)} x${String(c.inFlight).padEnd(3)} ${short(c.cyclesPerSec, 0).padStart(7)} cycles/s  p50 ${short(c.p50Ms, 3)} ms  p99 ${short(c.p99Ms, 3)} ms  ${short(c.sentPerCycle, 2)} cmds/cycle`,
        );
    }
    if (want('contended')) {
      record.contended = [];
      for (const variant of ['baton', 'race'] as const) {
        const fits = (l: LibName) => EXCLUSIVE_LIBS.includes(l) && (!REDLOCK_LIBS.includes(l) || topology.kind === 'standalone');
        for (const lib of order.filter(fits)) {
          log(`[${topology.kind}] run ${run + 1}/${config.runs}: (b) ${variant} ${lib}`);
          const c = await measureContended(topology, config, lib, variant, tag);
          record.contended.push(c);
          log(
            `  ${short(c.grantsPerSec, 0)} grants/s, ${short(c.handoffsPerSec, 0)} handoffs/s, handoff p50 ${short(c.handoffP50Ms, 3)} p99 ${short(c.handoffP99Ms, 3)} ms, previous holder ${short((c.previousHolderShare ?? NaN) * 100, 0)} %, longest wait ${short(c.longestWaitMs)} ms (${short(c.mostGrantsDuringAWait, 0)} grants meanwhile), machine stalls ${c.machineStalls} (longest ${short(c.longestMachineStallMs)} ms), ${short(c.commandsPerGrant)} cmds/grant`,
          );
        }
      }
    }
    if (want('readers')) {
      record.readers = [];
      for (const withWriter of run % 2 === 0 ? [true, false] : [false, true]) {
        log(`[${topology.kind}] run ${run + 1}/${config.runs}: (c) readers ${withWriter ? 'with' : 'without'} writer`);
        const c = await measureReaders(topology, config, withWriter, tag);
        record.readers.push(c);
        log(
          `  ${short(c.readsPerSec, 0)} reads/s, writer grants ${c.writerGrants}, writer wait p99 ${short(c.writerWaitP99Ms)} ms, max ${short(c.writerWaitMaxMs)} ms`,
        );
      }
    }
    if (want('scale')) {
      record.scale = [];
      for (const n of rotate(config.scale.liveReaders, run)) {
        log(`[${topology.kind}] run ${run + 1}/${config.runs}: (d) ${n} live readers`);
        const c = await measureScale(topology, config, n, tag);
        record.scale.push(c);
        log(
          `  ${short(c.cyclesPerSec, 0)} cycles/s, server ${short(c.serverUsecPerScript)} µs/script (checked ${c.checkedReaders} readers)`,
        );
      }
    }
  }
  const merge = <T extends object>(
    key: 'uncontended' | 'contended' | 'readers' | 'scale',
    id: (t: T) => string,
    sortBy: (a: T, b: T) => number,
  ) => {
    const all = runs.map((r) => (r[key] ?? []) as unknown as T[]);
    if (all.every((a) => a.length === 0)) return undefined;
    const ids = [...new Set(all.flat().map(id))];
    const median = ids.map((i) => medianRecord(all.flat().filter((t) => id(t) === i))).sort(sortBy);
    return { runs: all, median };
  };
  const libIndex = (lib: LibName) => [...UNCONTENDED_LIBS, ...EXCLUSIVE_LIBS].indexOf(lib);
  results.uncontended = merge<CycleResult>(
    'uncontended',
    (c) => `${c.pattern}:${c.lib}@${c.inFlight}`,
    (a, b) => a.pattern.localeCompare(b.pattern) || a.inFlight - b.inFlight || libIndex(a.lib) - libIndex(b.lib),
  );
  results.contended = merge<ContendedResult>(
    'contended',
    (c) => `${c.lib}@${c.variant}`,
    (a, b) => a.variant.localeCompare(b.variant) || libIndex(a.lib) - libIndex(b.lib),
  );
  results.readers = merge<ReadersResult>(
    'readers',
    (c) => String(c.withWriter),
    (a, b) => Number(b.withWriter) - Number(a.withWriter),
  );
  results.scale = merge<ScaleResult>(
    'scale',
    (c) => String(c.liveReaders),
    (a, b) => a.liveReaders - b.liveReaders,
  );
  for (const key of ['uncontended', 'contended', 'readers', 'scale'] as const) if (results[key] === undefined) delete results[key];
  results.ratios = medianRatios(runs.map(perRunRatios));

  if (want('renewal')) {
    const tag = tagOf(config.runs);
    results.renewal = {};
    log(`[${topology.kind}] (e) renewal: redis-rwlock, ${config.renewal.leases} leases`);
    results.renewal.rwlock = await measureRwlockRenewal(topology, config, tag);
    log(
      `  ${short(results.renewal.rwlock.scriptCallsPerPeriod)} script calls/period (busiest master ${short(results.renewal.rwlock.scriptCallsPerPeriodPerMasterMax)}), longest command ${results.renewal.rwlock.longestCommandUsec ?? '<1000'} µs`,
    );
    if (libs.some((l) => l.startsWith('semaphore'))) {
      log(`[${topology.kind}] (e) renewal: redis-semaphore, ${config.renewal.leases} mutexes`);
      results.renewal.semaphore = await measureSemaphoreRenewal(topology, config, tag);
      log(`  ${short(results.renewal.semaphore.scriptCallsPerPeriod)} script calls/period`);
    }
    results.renewal.extend = await measureExtend(topology, config, tag);
  }
  if (want('neighbour')) {
    log(`[${topology.kind}] (g) a neighbour's GET loop: no lock held, then ${config.neighbour.leases} leases renewing`);
    results.neighbour = await measureNeighbour(topology, config, tagOf(config.runs + 1));
    for (const n of results.neighbour) {
      log(
        `  ${n.holder.padEnd(11)} p50 ${short(n.p50Ms, 3)} ms, p99 ${short(n.p99Ms, 3)} ms, longest command ${n.longestCommandUsec ?? '<1000'} µs`,
      );
    }
  }
  results.seconds = (performance.now() - started) / 1000;
  return results;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      smoke: { type: 'boolean', default: false },
      topology: { type: 'string' },
      only: { type: 'string' },
      libs: { type: 'string' },
      runs: { type: 'string' },
      leases: { type: 'string' },
      out: { type: 'string' },
      render: { type: 'string' },
      baseline: { type: 'string' },
      'in-flight': { type: 'string' },
    },
  });
  if (values.render !== undefined) return render(values.render);
  const base = values.smoke ? SMOKE : FULL;
  const topologies = list<TopologyKind>(values.topology, ['standalone', 'cluster'], 'topology') ?? base.topologies;
  const leases = values.leases === undefined ? undefined : Math.max(1, Number(values.leases));
  const config: BenchConfig = {
    ...base,
    topologies,
    runs: values.runs ? Math.max(1, Number(values.runs)) : base.runs,
    uncontended: {
      ...base.uncontended,
      inFlight:
        values['in-flight'] === undefined ? base.uncontended.inFlight : values['in-flight'].split(',').map((n) => Math.max(1, Number(n))),
    },
    renewal: { ...base.renewal, leases: leases ?? base.renewal.leases },
    neighbour: { ...base.neighbour, leases: leases ?? base.neighbour.leases },
  };
  const only = list<Workload>(values.only, WORKLOADS, 'only') ?? [...WORKLOADS];
  if (values.baseline !== undefined) await loadBaseline(values.baseline);
  const allLibs = [...new Set([...UNCONTENDED_LIBS, ...EXCLUSIVE_LIBS])].filter((l) => !BASELINE_LIBS.includes(l) || hasBaseline());
  const libs = list<LibName>(values.libs, allLibs, 'libs') ?? allLibs;
  // TEST_SERVER picks the server (test/setup/server.ts); only a run on Redis writes latest.* and the README.
  const server = testServer();
  const complete =
    server === 'redis' &&
    values.only === undefined &&
    values.libs === undefined &&
    values.leases === undefined &&
    values['in-flight'] === undefined &&
    config.name === 'full' &&
    topologies.length === 2 &&
    values.baseline === undefined;
  const outPrefix =
    values.out ??
    path.join(
      benchDir,
      'results',
      `${server === 'redis' ? '' : `${server}-`}${config.name === 'full' && complete ? 'latest' : config.name === 'full' ? 'partial' : 'smoke'}`,
    );
  const command = `${server === 'redis' ? '' : `TEST_SERVER=${server} `}npm run ${config.name === 'smoke' ? 'bench:smoke' : 'bench'}${
    process.argv.length > 2
      ? ` -- ${process.argv
          .slice(2)
          .filter((a) => a !== '--smoke')
          .join(' ')}`
      : ''
  }`.replace(/ -- $/, '');

  // Every loop is bounded by its own count and duration; this is the last resort.
  const watchdogMs = config.name === 'smoke' ? 120_000 : 30 * 60_000;
  const watchdog = setTimeout(() => {
    log(`bench: still running after ${watchdogMs / 1000} s; giving up`);
    void stopAllServers().finally(() => process.exit(2));
  }, watchdogMs);
  watchdog.unref();

  const started = performance.now();
  const results: BenchResults['topologies'] = {};
  let machineInfo: Machine | undefined;
  for (const kind of topologies) {
    log(`[${kind}] starting servers`);
    const topology = await startTopology(kind);
    try {
      machineInfo ??= await machine(topology);
      results[kind] = await runTopology(topology, config, only, libs);
    } finally {
      await topology.stop();
    }
  }
  const targets = (Object.entries(results) as [TopologyKind, TopologyResults][]).flatMap(([kind, r]) =>
    evaluateTargets(kind, r, config.contended.waiters, machineInfo && `${machineInfo.cpu}, ${machineInfo.cores} cores`),
  );
  const bench: BenchResults = {
    date: new Date().toISOString(),
    command,
    machine: machineInfo ?? (await machine(undefined)),
    config,
    versions: {
      'redis-semaphore': packageVersion('redis-semaphore'),
      '@sesamecare-oss/redlock': packageVersion('@sesamecare-oss/redlock'),
    },
    topologies: results,
    targets,
    seconds: (performance.now() - started) / 1000,
  };
  mkdirSync(path.dirname(outPrefix), { recursive: true });
  writeFileSync(`${outPrefix}.json`, `${JSON.stringify(bench, null, 2)}\n`);
  const markdown = renderMarkdown(bench);
  writeFileSync(`${outPrefix}.md`, markdown);
  if (complete) updateReadme(bench);
  log('');
  log(markdown.slice(0, markdown.indexOf('\n## ', markdown.indexOf('## Targets') + 3)));
  log(`bench: wrote ${path.relative(root, outPrefix)}.json and .md in ${bench.seconds.toFixed(0)} s`);

  // Correctness, not speed, fails a run: a double grant or a leaked key is a bug whatever the counts.
  const broken = targets.filter((t) => (t.id === 'b-exclusion' || t.id === 'f-left') && t.pass === false);
  for (const t of broken) log(`bench: FAILED ${t.what} on ${t.topology}: ${t.value}`);
  return broken.length > 0 ? 1 : 0;
}

/** Re-evaluates the targets of a results file and rewrites its Markdown (and the README summary for latest.json). */
function render(file: string): number {
  const saved = JSON.parse(readFileSync(file, 'utf8')) as BenchResults;
  const targets = (Object.entries(saved.topologies) as [TopologyKind, TopologyResults][]).flatMap(([kind, r]) =>
    evaluateTargets(kind, r, saved.config.contended.waiters, `${saved.machine.cpu}, ${saved.machine.cores} cores`),
  );
  const bench: BenchResults = { ...saved, targets };
  writeFileSync(file, `${JSON.stringify(bench, null, 2)}\n`);
  const markdown = renderMarkdown(bench);
  writeFileSync(file.replace(/\.json$/, '.md'), markdown);
  if (path.resolve(file) === path.join(benchDir, 'results', 'latest.json')) updateReadme(bench);
  log(`bench: rewrote ${file.replace(/\.json$/, '.md')}`);
  return 0;
}

const README_START = '<!-- bench:latest:start -->';
const README_END = '<!-- bench:latest:end -->';

/** Rewrites the summary of the latest run in bench/README.md, between its markers; the full tables are results/latest.md. */
function updateReadme(bench: BenchResults): void {
  const file = path.join(benchDir, 'README.md');
  const text = readFileSync(file, 'utf8');
  const a = text.indexOf(README_START);
  const b = text.indexOf(README_END);
  if (a < 0 || b < a) {
    log(`bench: bench/README.md has no ${README_START} ... ${README_END} pair; its summary was not rewritten`);
    return;
  }
  writeFileSync(file, `${text.slice(0, a + README_START.length)}\n${renderSummary(bench)}\n${text.slice(b)}`);
}

main().then(
  async (code) => {
    await stopAllServers();
    process.exit(code);
  },
  async (error: unknown) => {
    log(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    await stopAllServers();
    process.exit(1);
  },
);
