/** The Markdown report of a bench run. */
import { fencedPeerOf, LIB_LABEL, type LibName, peerOf } from './libs.js';
import type { BenchResults, TopologyResults } from './results.js';

function fmt(n: number | null | undefined, digits = 2): string {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '–';
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString('en-US');
  if (Math.abs(n) >= 100) return n.toFixed(0);
  return n.toFixed(digits);
}

const pct = (n: number | null | undefined) => (typeof n === 'number' ? `${(n * 100).toFixed(0)} %` : '–');
const x = (n: number | null | undefined) => (typeof n === 'number' ? `${fmt(n)}x` : '–');
const label = (lib: LibName) => LIB_LABEL[lib];

function table(header: string[], rows: string[][]): string {
  return [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

export function renderMarkdown(results: BenchResults): string {
  const m = results.machine;
  const out: string[] = [];
  out.push(`# redis-rwlock benchmark (${results.config.name} run${m.server ? `, ${m.server}` : ''})`);
  out.push('');
  out.push(`- date: ${results.date}`);
  out.push(
    `- machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; load average at start ${m.loadAverageAtStart.map((l) => l.toFixed(2)).join(' ')}`,
  );
  out.push(
    `- node ${m.node}, ${m.server ?? `redis-server ${m.redis}`}, ioredis ${m.ioredis}; ${Object.entries(results.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  out.push(
    `- command: \`${results.command}\`; ${results.config.runs} run(s) per figure, each figure the median of the runs, each ratio the median of per-run ratios; took ${fmt(results.seconds, 0)} s`,
  );
  out.push('');
  out.push('## Targets');
  out.push('');
  out.push(
    table(
      ['target', 'topology', 'measured', 'bound', 'result', 'note'],
      results.targets.map((t) => [
        t.what,
        t.topology,
        t.unit === 'x' ? x(t.value) : `${fmt(t.value)} ${t.unit}`,
        t.unit === 'x' ? t.bound : `${t.bound} ${t.unit}`,
        t.pass === null ? 'n/a' : t.pass ? 'PASS' : '**MISS**',
        t.note ?? '',
      ]),
    ),
  );
  for (const [kind, r] of Object.entries(results.topologies) as [string, TopologyResults][]) {
    out.push('');
    out.push(`## ${kind}`);
    out.push(...renderTopology(r, `${m.cpu}, ${m.cores} cores`));
  }
  out.push('');
  return out.join('\n');
}

/** Every command the server ran per cycle, in all and by name: `8.0 (del 1.0, evalsha 2.0, ...)`. */
function commandMix(perCycle: Readonly<Record<string, number>> | undefined): string {
  const entries = Object.entries(perCycle ?? {}).filter(([, n]) => n >= 0.005);
  if (entries.length === 0) return '–';
  const total = entries.reduce((a, [, n]) => a + n, 0);
  return `${fmt(total, 1)} (${entries.map(([name, n]) => `${name} ${fmt(n, 1)}`).join(', ')})`;
}

function renderTopology(r: TopologyResults, cpu: string): string[] {
  const out: string[] = [];
  const ratios = r.ratios;
  if (r.uncontended) {
    out.push('', `### (a) uncontended acquire+release cycles, distinct resources: a new name every cycle, and names reused (${cpu})`, '');
    out.push(
      table(
        [
          'library',
          'names',
          'in flight',
          'cycles/s',
          'p50 ms',
          'p99 ms',
          'vs floor',
          'vs fenced floor',
          'vs semaphore',
          'scripts/cycle',
          'sent/cycle',
          'round trips/cycle',
          'server commands/cycle',
          'server µs/script',
          'server µs/cycle',
          'CPU µs/cycle: node + redis',
        ],
        r.uncontended.median.map((c) => [
          label(c.lib),
          c.pattern,
          String(c.inFlight),
          fmt(c.cyclesPerSec),
          fmt(c.p50Ms, 3),
          fmt(c.p99Ms, 3),
          ...[peerOf(c.lib, 'floor'), fencedPeerOf(c.lib), peerOf(c.lib, 'semaphore')].map((base) => {
            // An autopipelining lock against the floor, fenced floor or Mutex that autopipelines too.
            const key = `uncontended.${c.pattern}.${c.inFlight}.${c.lib}/${base}`;
            return key in ratios ? x(ratios[key]) : ''; // only the rows compared with the peers
          }),
          fmt(c.scriptsPerCycle),
          fmt(c.sentPerCycle),
          fmt(c.writesPerCycle),
          commandMix(c.serverCommandsPerCycle),
          fmt(c.serverUsecPerScript, 1),
          fmt(c.serverUsecPerCycle, 1),
          `${fmt(c.clientCpuUsPerCycle, 1)} + ${fmt(c.serverCpuUsPerCycle, 1)} = ${fmt(c.clientCpuUsPerCycle + c.serverCpuUsPerCycle, 1)}`,
        ]),
      ),
    );
  }
  if (r.contended) {
    out.push('', '### (b) contended handoff, one write lock, waiters on separate connections', '');
    out.push(
      table(
        [
          'library',
          'variant',
          'grants/s',
          'handoffs/s',
          'handoff p50 ms',
          'handoff p99 ms',
          'to previous holder',
          'wait p50 ms',
          'longest wait ms',
          'most grants during a wait',
          'machine stalls > 4 ms (longest ms)',
          'gave up',
          'commands/grant',
          'hold ms',
          'release ms',
          'rwlock vs this',
        ],
        r.contended.median.map((c) => [
          label(c.lib),
          c.variant,
          fmt(c.grantsPerSec),
          fmt(c.handoffsPerSec),
          fmt(c.handoffP50Ms, 3),
          fmt(c.handoffP99Ms, 3),
          pct(c.previousHolderShare),
          fmt(c.waitP50Ms),
          fmt(c.longestWaitMs),
          fmt(c.mostGrantsDuringAWait, 0),
          `${fmt(c.machineStalls, 0)} (${fmt(c.longestMachineStallMs, 1)})`,
          fmt(c.gaveUp, 0),
          fmt(c.commandsPerGrant, 1),
          fmt(c.holdActualMs, 3),
          fmt(c.releaseMs, 3),
          c.lib.startsWith('rwlock') ? '' : x(ratios[`${c.variant}.rwlock-write/${c.lib}`]),
        ]),
      ),
    );
  }
  if (r.readers) {
    out.push('', '### (c) readers sharing one resource, a writer every interval', '');
    out.push(
      table(
        [
          'writer',
          'reads/s',
          'read p50 ms',
          'read p99 ms',
          'writer grants',
          'writer wait p50 ms',
          'writer wait p99 ms',
          'writer wait max ms',
        ],
        r.readers.median.map((c) => [
          c.withWriter ? 'yes' : 'no',
          fmt(c.readsPerSec),
          fmt(c.readP50Ms, 3),
          fmt(c.readP99Ms, 3),
          fmt(c.writerGrants, 0),
          fmt(c.writerWaitP50Ms),
          fmt(c.writerWaitP99Ms),
          fmt(c.writerWaitMaxMs),
        ]),
      ),
    );
    out.push('', `Read throughput with the writer vs without: ${x(ratios['readers.withWriter/withoutWriter'])}`);
  }
  if (r.scale) {
    const base = Math.min(...r.scale.median.map((m) => m.liveReaders));
    out.push('', '### (d) read cycles on a resource with N live readers', '');
    out.push(
      table(
        ['live readers', 'cycles/s', 'p50 ms', 'p99 ms', 'server µs/script', `vs ${base} reader(s)`],
        r.scale.median.map((c) => [
          String(c.liveReaders),
          fmt(c.cyclesPerSec),
          fmt(c.p50Ms, 3),
          fmt(c.p99Ms, 3),
          fmt(c.serverUsecPerScript, 1),
          x(ratios[`scale.${c.liveReaders}/${base}`]),
        ]),
      ),
    );
  }
  if (r.renewal) {
    out.push('', '### (e) renewal of held leases (medians over the observed periods)', '');
    const rows = [r.renewal.rwlock, r.renewal.semaphore].filter((v) => v !== undefined);
    out.push(
      table(
        [
          'library',
          'leases',
          'period ms',
          'script calls/period',
          'busiest master',
          'sent/period',
          'server commands/period (incl. inside scripts)',
          'longest command µs',
          'lost',
        ],
        rows.map((c) => [
          c.lib === 'rwlock' ? 'redis-rwlock (batched)' : 'redis-semaphore Mutex (one refresh each)',
          fmt(c.leases, 0),
          fmt(c.periodMs, 0),
          fmt(c.scriptCallsPerPeriod, 1),
          fmt(c.scriptCallsPerPeriodPerMasterMax, 1),
          fmt(c.sentPerPeriod, 1),
          fmt(c.serverCommandsPerPeriod, 0),
          c.longestCommandUsec === null ? '< 1000' : `${fmt(c.longestCommandUsec, 0)} (${c.longestCommand})`,
          fmt(c.lost, 0),
        ]),
      ),
    );
    const e = r.renewal.extend;
    if (e)
      out.push(
        '',
        `Explicit \`lease.extend()\`: ${fmt(e.scriptsPerExtend)} script calls and ${fmt(e.sentPerExtend)} commands sent per extend, ${e.redirects} redirects (${e.extends} extends).`,
      );
  }
  if (r.neighbour) {
    out.push(
      '',
      "### (g) a neighbour's latency: a GET loop on another connection, with no lock held and while leases renew (p50/p99 as a client sending a GET every median interval sees them)",
      '',
    );
    const label = { none: 'no lock held', rwlock: 'redis-rwlock renewing', 'rwlock-base': 'the baseline checkout renewing' } as const;
    out.push(
      table(
        [
          'holder',
          'leases',
          'lease ms',
          'GETs',
          'p50 ms',
          'p99 ms',
          'max ms',
          'script calls',
          'over 1 ms',
          'longest command µs',
          'machine stalls',
          'lost',
        ],
        r.neighbour.map((n) => [
          label[n.holder],
          fmt(n.leases, 0),
          n.holder === 'none' ? '–' : fmt(n.leaseMs, 0),
          fmt(n.gets, 0),
          fmt(n.p50Ms, 3),
          fmt(n.p99Ms, 3),
          fmt(n.maxMs, 3),
          fmt(n.scriptCalls, 0),
          fmt(n.slowScripts, 0),
          n.longestCommandUsec === null ? '< 1000' : `${fmt(n.longestCommandUsec, 0)} (${n.longestCommand})`,
          fmt(n.machineStalls, 0),
          fmt(n.lost, 0),
        ]),
      ),
    );
  }
  if (r.anatomy) {
    out.push('', `### (anatomy) server µs per call of one uncontended cycle (INFO commandstats, pipelined on one connection; ${cpu})`, '');
    out.push(
      table(
        ['call', 'µs per call'],
        r.anatomy.map((a) => [a.what, fmt(a.usecPerCall)]),
      ),
    );
  }
  if (r.memory) {
    const mem = r.memory;
    out.push('', '### (f) memory (MEMORY USAGE ... SAMPLES 0)', '');
    out.push(
      table(
        ['lock', 'keys (encoding: bytes)', 'bytes', 'data bytes'],
        [mem.floor, mem.write, mem.oneReader, mem.manyReaders].map((l) => [
          l.what,
          l.keys.map((k) => `${k.key.split(':')[0]} ${k.encoding}: ${k.bytes}`).join(', '),
          fmt(l.bytes, 0),
          fmt(l.dataBytes, 0),
        ]),
      ),
    );
    out.push(
      '',
      `Per extra reader: ${fmt(mem.bytesPerExtraReader, 1)} bytes (its data: ${fmt(mem.dataBytesPerExtraReader, 1)} bytes). Keys left after every release: ${mem.keysLeftAfterRelease}.`,
    );
  }
  return out;
}

/** The locks of the summary's uncontended table, with their short labels. */
const SUMMARY_LOCKS: readonly (readonly [LibName, string])[] = [
  ['rwlock-write', 'write'],
  ['rwlock-read', 'read'],
  ['rwlock-node-redis', 'write, node-redis 5'],
  ['rwlock-write-ap', 'write, autopipelining'],
  ['rwlock-read-ap', 'read, autopipelining'],
];

/**
 * The summary bench/README.md shows of a full run (between its
 * `bench:latest` markers): the run and its machine, then one table per
 * question a user asks (uncontended cycles against the anchors, the
 * contended hand-over, renewal and memory). Every figure is one of the
 * full report's; a column added here shows in the README at the next run.
 */
export function renderSummary(results: BenchResults): string {
  const m = results.machine;
  const met = results.targets.filter((t) => t.pass === true).length;
  const judged = results.targets.filter((t) => t.pass !== null).length;
  const out: string[] = [
    `- run: ${results.date}, \`${results.command}\`, ${results.config.runs} run(s) per figure, ${fmt(results.seconds, 0)} s`,
    `- machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; load average at start ${m.loadAverageAtStart.map((l) => l.toFixed(2)).join(' ')}`,
    `- node ${m.node}, ${m.server ?? `Redis ${m.redis}`}, ioredis ${m.ioredis}; ${Object.entries(results.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
    `- targets met: ${met} of ${judged} ([each, with its figures](results/latest.md#targets))`,
  ];
  const topologies = Object.entries(results.topologies) as [string, TopologyResults][];

  const cycles: string[][] = [];
  for (const [kind, r] of topologies) {
    for (const [lib, name] of SUMMARY_LOCKS) {
      for (const c of r.uncontended?.median.filter((c) => c.lib === lib && c.pattern === 'new') ?? []) {
        const vs = (base: LibName) => x(r.ratios[`uncontended.new.${c.inFlight}.${lib}/${base}`]);
        cycles.push([
          kind,
          name,
          String(c.inFlight),
          fmt(c.cyclesPerSec),
          vs(peerOf(lib, 'floor')),
          vs(fencedPeerOf(lib)),
          vs(peerOf(lib, 'semaphore')),
        ]);
      }
    }
  }
  if (cycles.length > 0) {
    out.push('', '### Uncontended cycles on a new name', '');
    out.push(table(['topology', 'lock', 'in flight', 'cycles/s', 'vs bare floor', 'vs fenced floor', 'vs redis-semaphore'], cycles));
  }

  const handoffs: string[][] = [];
  for (const [kind, r] of topologies) {
    for (const variant of ['baton', 'race'] as const) {
      const c = r.contended?.median.find((c) => c.lib === 'rwlock-write' && c.variant === variant);
      if (!c) continue;
      const vs = (base: string) => x(r.ratios[`${variant}.rwlock-write/${base}`]);
      const polling =
        variant === 'baton'
          ? r.ratios['baton.rwlock-write/floor-polling']
          : Math.min(...['floor-spin', 'floor-immediate'].map((f) => r.ratios[`race.rwlock-write/${f}`] ?? Number.POSITIVE_INFINITY));
      handoffs.push([
        kind,
        variant,
        fmt(c.grantsPerSec),
        fmt(c.handoffP50Ms, 3),
        fmt(c.handoffP99Ms, 3),
        fmt(c.commandsPerGrant, 1),
        vs('floor'),
        x(Number.isFinite(polling) ? polling : null),
        vs('semaphore'),
        vs('redlock'),
      ]);
    }
  }
  if (handoffs.length > 0) {
    const { waiters, holdMs } = results.config.contended;
    out.push('', `### One write lock, ${waiters} waiters, ${holdMs} ms holds`, '');
    out.push(
      table(
        [
          'topology',
          'case',
          'grants/s',
          'hand-over p50 ms',
          'p99 ms',
          'commands per grant',
          'vs bare floor',
          'vs polling with no sleep',
          'vs redis-semaphore',
          'vs redlock',
        ],
        handoffs,
      ),
    );
  }

  const held: string[][] = [];
  for (const [kind, r] of topologies) {
    const e = r.renewal?.rwlock;
    const none = r.neighbour?.find((n) => n.holder === 'none');
    const renewing = r.neighbour?.find((n) => n.holder === 'rwlock');
    if (!e && !r.memory) continue;
    held.push([
      kind,
      e ? fmt(e.leases, 0) : '–',
      e && e.scriptCallsPerPeriod > 0 ? fmt(e.leases / e.scriptCallsPerPeriod, 0) : '–',
      e ? (e.longestCommandUsec === null ? '< 1' : fmt(e.longestCommandUsec / 1000)) : '–',
      e ? fmt(e.lost, 0) : '–',
      none && renewing ? `${fmt(none.p99Ms)} → ${fmt(renewing.p99Ms)} (${fmt(renewing.leases, 0)} leases)` : '–',
      r.memory ? fmt(r.memory.write.bytes, 0) : '–',
      r.memory ? fmt(r.memory.bytesPerExtraReader, 0) : '–',
    ]);
  }
  if (held.length > 0) {
    out.push('', '### Renewal and memory', '');
    out.push(
      table(
        [
          'topology',
          'leases renewed',
          'leases per call',
          'longest renewal call ms',
          'lost',
          "a neighbour's GET p99 ms, none held → renewing",
          'bytes, write-held lock',
          'bytes per further reader',
        ],
        held,
      ),
    );
  }
  return out.join('\n');
}
