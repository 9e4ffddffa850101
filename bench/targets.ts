/**
 * The bench's targets (bench/README.md, "Targets"), evaluated on one topology's results. Ratios are
 * medians of per-run ratios (both sides measured in the same run).
 */

import type { TopologyResults } from './results.js';
import type { TopologyKind } from './topology.js';
import type { ContendedResult } from './workloads/contended.js';
import type { CycleResult } from './workloads/uncontended.js';

export interface Target {
  readonly id: string;
  readonly topology: TopologyKind;
  readonly what: string;
  /** The measured figure (a ratio, ms, count or bytes). */
  readonly value: number | null;
  /** How the figure is compared, e.g. ">= 0.9". */
  readonly bound: string;
  readonly pass: boolean | null;
  readonly unit: string;
  /** Context: e.g. why a target cannot be met, with the figures that show it. */
  readonly note?: string;
}

const atLeast = (v: number | null, b: number) => (v === null ? null : v >= b);
const atMost = (v: number | null, b: number) => (v === null ? null : v <= b);

/** How many cycle times the longest race wait may last: twice a full round of every waiter in turn. */
export const RACE_WAIT_CYCLES_PER_WAITER = 2;
/**
 * Leases one renewal call renews at least, on average: calls stop after 250 µs
 * of server time, 24 leases in a full run on 2 cores; one
 * call per lease is what a lock without batching sends.
 */
export const RENEWAL_LEASES_PER_CALL = 8;
/** The longest command a library may run on the server, in ms. */
export const LONGEST_COMMAND_MS = 1;
/** How much later a neighbour's p99 GET may answer while leases renew than with none held, in ms. */
export const NEIGHBOUR_P99_EXTRA_MS = 1;
/**
 * Uncontended cycles/s on a new name, write and read, at every concurrency
 * at least this many times the floor's, and redis-semaphore's.
 */
export const NEW_NAME_VS_FLOOR = 0.95;
export const NEW_NAME_VS_SEMAPHORE = 1.1;
/** At 64 in flight, the names-reused bound vs redis-semaphore stands: it is the higher one. */
export const NEW_NAME_VS_SEMAPHORE_AT_64 = 1.15;
/**
 * The rows judged against the fenced floor (a fenced grant in one script, the
 * floor's release; bench/libs.ts) rather than the bare `SET NX PX` (issue
 * 39): one call in flight without autopipelining, and every autopipelining
 * row past one in flight. With autopipelining a fenced grant's script costs
 * more than a pipelined SET NX PX, so no lock with a fence passes 0.95x of
 * the bare floor there (the fenced floor itself: 0.71x at 16, 0.83x at 64);
 * at one in flight the fenced floor keeps pace with the bare one, so the row
 * stays one a change can pass. Elsewhere the bare floor stays the anchor.
 */
export const AGAINST_FENCED_FLOOR = (inFlight: number, autopipelining: boolean): boolean =>
  autopipelining ? inFlight > 1 : inFlight === 1;
/**
 * How many times the floor's server µs an uncontended cycle on a new name may
 * take, at every concurrency (the aim is 2x).
 */
export const SERVER_USEC_VS_FLOOR = 2.5;
/**
 * The client CPU (user + sys, process.cpuUsage) of an uncontended cycle on a
 * new name at most this many times the bare floor's, at 16 and 64 in flight
 * without autopipelining, where many calls share the process.
 */
export const CLIENT_CPU_VS_FLOOR = 1.2;
/**
 * The server µs of an uncontended cycle on a new name at most this many
 * times the fenced floor's (a lock with the same guarantee of a fence): in
 * the commands each client sent, at every concurrency, and in the anatomy's
 * pipelined calls (acquire and release against the fenced grant and the
 * floor's release), where no round trip or batching moves it.
 */
export const SERVER_USEC_VS_FENCED_FLOOR = 1.3;
/** Bytes a reader may cost per byte of its own data (owner token twice, count, deadline) once the encoding is counted. */
export const MEMORY_OVERHEAD_PER_DATA_BYTE = 1.5;

/** The CPU both sides of an uncontended ratio used per cycle, and the ratio a CPU-bound machine would allow; '' when unknown. */
function cpuNote(floor: CycleResult | undefined, mine: CycleResult | undefined, label = 'floor'): string {
  if (!floor || !mine) return '';
  const total = (m: CycleResult) => m.clientCpuUsPerCycle + m.serverCpuUsPerCycle;
  return (
    `CPU per cycle, client + all Redis processes: ${label} ${floor.clientCpuUsPerCycle.toFixed(1)} + ${floor.serverCpuUsPerCycle.toFixed(1)} µs, ` +
    `rwlock ${mine.clientCpuUsPerCycle.toFixed(1)} + ${mine.serverCpuUsPerCycle.toFixed(1)} µs: on a CPU-bound machine at most ${(total(floor) / total(mine)).toFixed(2)}x`
  );
}

/**
 * Why a row is judged against the fenced floor, in one line, with the ratio to
 * the bare floor beside it; `at` names the case (`uncontended.<pattern>.<n>`).
 */
function fencedNote(ratio: (key: string) => number | null, at: string, lib: string, ap: '' | '-ap'): string {
  const bare = ratio(`${at}.${lib}/floor${ap}`);
  const own = ratio(`${at}.fenced-floor${ap}/floor${ap}`);
  const x = (v: number | null) => (v === null ? '?' : `${v.toFixed(2)}x`);
  return (
    "against the fenced floor, the cheapest lock with a fence (the server's clock read in the grant's script), which a bare SET NX PX does not give; " +
    `vs the bare floor ${x(bare)}, the fenced floor itself ${x(own)}; `
  );
}

/**
 * One call in flight against the bare lock (`SET NX PX`, the
 * compare-and-delete release), write and read on ioredis, write on
 * node-redis; and the baton hand-over against the faster polling floor on
 * either client.
 */
export const ONE_IN_FLIGHT_VS_BARE_FLOOR = 0.9;
export const HANDOVER_VS_POLLING = 0.9;

export function evaluateTargets(kind: TopologyKind, r: TopologyResults, waiters: number, cpu = 'an unnamed CPU'): Target[] {
  const out: Target[] = [];
  const add = (id: string, what: string, value: number | null, bound: string, pass: boolean | null, unit = 'x', note?: string) =>
    out.push({ id, topology: kind, what, value, bound, pass, unit, ...(note ? { note } : {}) });
  const ratio = (key: string) => r.ratios[key] ?? null;

  if (r.uncontended) {
    const inFlight = [...new Set(r.uncontended.median.map((m) => m.inFlight))].sort((a, b) => a - b);
    const top = Math.max(...inFlight);
    const us = (what: string) => r.anatomy?.find((a) => a.what.startsWith(what))?.usecPerCall;
    for (const pattern of ['new', 'reused'] as const) {
      // A new name per cycle, the headline, at every concurrency; names reused keep their own bounds, at the top one.
      for (const n of pattern === 'new' ? inFlight : [top]) {
        const at = (lib: string) => r.uncontended!.median.find((m) => m.lib === lib && m.pattern === pattern && m.inFlight === n);
        if (!at('floor')) continue;
        const floorBound = pattern === 'new' ? NEW_NAME_VS_FLOOR : kind === 'cluster' ? 0.9 : 0.95;
        const semaphoreBound =
          pattern === 'new' ? (n === 64 ? NEW_NAME_VS_SEMAPHORE_AT_64 : NEW_NAME_VS_SEMAPHORE) : kind === 'standalone' ? 1.2 : 1.0;
        const names = pattern === 'new' ? 'a new name per cycle' : 'names reused';
        const id = pattern === 'new' ? `new-${n}` : pattern;
        const fenced = pattern === 'new' && AGAINST_FENCED_FLOOR(n, false);
        for (const mode of ['write', 'read'] as const) {
          const v = ratio(`uncontended.${pattern}.${n}.rwlock-${mode}/${fenced ? 'fenced-floor' : 'floor'}`);
          let note = fenced
            ? fencedNote(ratio, `uncontended.${pattern}.${n}`, `rwlock-${mode}`, '') +
              cpuNote(at('fenced-floor'), at(`rwlock-${mode}`), 'fenced floor')
            : cpuNote(at('floor'), at(`rwlock-${mode}`));
          // What does not change with the concurrency, once, at the top one.
          const acquire = us(`redis-rwlock acquire ${mode}`);
          const release = us(`redis-rwlock release ${mode}`);
          const set = us('floor acquire');
          const del = us('floor release');
          const commands = us(`reference: the write grant's commands`);
          if (n === top && acquire !== undefined && release !== undefined && set !== undefined && del !== undefined) {
            note += `${note ? '; ' : ''}server µs per cycle: floor ${set.toFixed(1)} + ${del.toFixed(1)}, rwlock ${acquire.toFixed(1)} + ${release.toFixed(1)}`;
            if (commands !== undefined && mode === 'write') note += ` (the grant's commands alone, no logic: ${commands.toFixed(1)})`;
          }
          const refs = (['ref-string', 'ref-hash', 'ref-hash-args'] as const).map((lib) =>
            ratio(`uncontended.${pattern}.${n}.${lib}/floor`),
          );
          if (n === top && mode === 'write' && refs.every((v) => v !== null)) {
            const [string, hash, args] = refs.map((v) => v!.toFixed(2));
            note += `${note ? '; ' : ''}bare scripts, no library: ${string}x on a string key, ${hash}x on the hash, ${args}x with redis-rwlock's keys and arguments`;
          }
          const natives = (['ref-set-time', 'ref-multi'] as const).map((lib) => ratio(`uncontended.${pattern}.${n}.${lib}/floor`));
          if (mode === 'write' && natives.every((v) => v !== null)) {
            const [setTime, multi] = natives.map((v) => v!.toFixed(2));
            note += `${note ? '; ' : ''}a fenced grant with no script: ${setTime}x (SET NX PX + TIME, pipelined), ${multi}x (in MULTI)`;
          }
          add(
            `a-${mode}-floor-${id}`,
            `uncontended ${mode} cycles/s at ${n} in flight, ${names}, vs ${fenced ? 'fenced floor' : 'floor'}`,
            v,
            `>= ${floorBound}`,
            atLeast(v, floorBound),
            'x',
            note || undefined,
          );
          const sem = ratio(`uncontended.${pattern}.${n}.rwlock-${mode}/semaphore`);
          add(
            `a-${mode}-semaphore-${id}`,
            `uncontended ${mode} cycles/s at ${n} in flight, ${names}, vs redis-semaphore Mutex`,
            sem,
            `>= ${semaphoreBound}`,
            atLeast(sem, semaphoreBound),
          );
        }
      }
    }
    // One call in flight against the bare lock itself (the row above may be judged against the fenced floor).
    const one = (lib: string) => r.uncontended!.median.find((m) => m.lib === lib && m.pattern === 'new' && m.inFlight === 1);
    if (one('floor')) {
      for (const [lib, label] of [
        ['rwlock-write', 'write'],
        ['rwlock-read', 'read'],
        ['rwlock-node-redis', 'write on node-redis 5'],
        ['rwlock-node-redis-read', 'read on node-redis 5'],
      ] as const) {
        if (!one(lib)) continue;
        const v = ratio(`uncontended.new.1.${lib}/floor`);
        add(
          `a-one-in-flight-${lib.replace('rwlock-', '')}`,
          `uncontended ${label} cycles/s at 1 in flight, a new name per cycle, vs the bare floor (SET NX PX)`,
          v,
          `>= ${ONE_IN_FLIGHT_VS_BARE_FLOOR}`,
          atLeast(v, ONE_IN_FLIGHT_VS_BARE_FLOOR),
          'x',
          `on ${cpu}; ${cpuNote(one('floor'), one(lib))}`,
        );
      }
    }
    // The same bounds for an application client with enableAutoPipelining, against a floor and a Mutex on one too.
    for (const n of inFlight) {
      const at = (lib: string) => r.uncontended!.median.find((m) => m.lib === lib && m.pattern === 'new' && m.inFlight === n);
      if (!at('floor-ap')) continue;
      const semaphoreBound = n === 64 ? NEW_NAME_VS_SEMAPHORE_AT_64 : NEW_NAME_VS_SEMAPHORE;
      const fenced = AGAINST_FENCED_FLOOR(n, true);
      for (const mode of ['write', 'read'] as const) {
        const v = ratio(`uncontended.new.${n}.rwlock-${mode}-ap/${fenced ? 'fenced-floor-ap' : 'floor-ap'}`);
        const note = fenced
          ? fencedNote(ratio, `uncontended.new.${n}`, `rwlock-${mode}-ap`, '-ap') +
            cpuNote(at('fenced-floor-ap'), at(`rwlock-${mode}-ap`), 'fenced floor')
          : cpuNote(at('floor-ap'), at(`rwlock-${mode}-ap`));
        add(
          `a-${mode}-floor-ap-new-${n}`,
          `uncontended ${mode} cycles/s at ${n} in flight, a new name per cycle, autopipelining, vs ${fenced ? 'fenced floor' : 'floor'} autopipelining`,
          v,
          `>= ${NEW_NAME_VS_FLOOR}`,
          atLeast(v, NEW_NAME_VS_FLOOR),
          'x',
          note || undefined,
        );
        const sem = ratio(`uncontended.new.${n}.rwlock-${mode}-ap/semaphore-ap`);
        add(
          `a-${mode}-semaphore-ap-new-${n}`,
          `uncontended ${mode} cycles/s at ${n} in flight, a new name per cycle, autopipelining, vs redis-semaphore Mutex autopipelining`,
          sem,
          `>= ${semaphoreBound}`,
          atLeast(sem, semaphoreBound),
        );
      }
    }
    // What a cycle costs the server, in the µs INFO commandstats gives the commands the client sent.
    const newAt = (lib: string, n: number) => r.uncontended!.median.find((m) => m.lib === lib && m.pattern === 'new' && m.inFlight === n);
    if (inFlight.some((n) => newAt('floor', n))) {
      for (const mode of ['write', 'read'] as const) {
        const lib = `rwlock-${mode}`;
        const byN = inFlight.map((n) => ({ n, v: ratio(`uncontended.new.${n}.${lib}/floor.serverUsec`) }));
        const known = byN.filter((b): b is { n: number; v: number } => b.v !== null);
        const worst = known.length === byN.length && known.length > 0 ? Math.max(...known.map((b) => b.v)) : null;
        // Results files from before the figure have no serverCommands.
        const names = (m: { serverCommands?: readonly string[] } | undefined) => m?.serverCommands?.join(' + ') || '?';
        const floor = newAt('floor', inFlight[0]!);
        const mine = newAt(lib, inFlight[0]!);
        const perN = byN.map(({ n, v }) => {
          const f = newAt('floor', n)?.serverUsecPerCycle;
          const m = newAt(lib, n)?.serverUsecPerCycle;
          // Beside the bare floor, the fenced one: the server's price of a fence, which no lock with one avoids.
          const fenced = newAt('fenced-floor', n)?.serverUsecPerCycle;
          const vsFenced = ratio(`uncontended.new.${n}.${lib}/fenced-floor.serverUsec`);
          const beside = fenced == null ? '' : `; vs fenced floor ${vsFenced?.toFixed(2) ?? '?'}x, ${fenced.toFixed(1)} µs`;
          return `${n}: ${v?.toFixed(2) ?? '?'}x (floor ${f?.toFixed(1) ?? '?'} µs, rwlock ${m?.toFixed(1) ?? '?'} µs${beside})`;
        });
        add(
          `a-${mode}-server-usec`,
          `uncontended ${mode}: server µs per cycle vs floor, a new name per cycle, worst of ${inFlight.join(', ')} in flight`,
          worst,
          `<= ${SERVER_USEC_VS_FLOOR}`,
          atMost(worst, SERVER_USEC_VS_FLOOR),
          'x',
          `${perN.join(', ')}; commands summed: floor ${names(floor)}, rwlock ${names(mine)}; the aim is 2x`,
        );
      }
    }
    // The client's CPU per cycle, where many calls share the process.
    for (const n of inFlight.filter((n) => n > 1)) {
      if (!newAt('floor', n)) continue;
      for (const mode of ['write', 'read'] as const) {
        const v = ratio(`uncontended.new.${n}.rwlock-${mode}/floor.clientCpu`);
        const mine = newAt(`rwlock-${mode}`, n);
        const floor = newAt('floor', n)!;
        add(
          `a-${mode}-client-cpu-${n}`,
          `uncontended ${mode}: client CPU µs per cycle vs floor, a new name per cycle, ${n} in flight`,
          v,
          `<= ${CLIENT_CPU_VS_FLOOR}`,
          atMost(v, CLIENT_CPU_VS_FLOOR),
          'x',
          `on ${cpu}; floor ${floor.clientCpuUsPerCycle.toFixed(1)} µs at ${floor.writesPerCycle?.toFixed(2) ?? '?'} socket writes per cycle, ` +
            `rwlock ${mine?.clientCpuUsPerCycle.toFixed(1) ?? '?'} µs at ${mine?.writesPerCycle?.toFixed(2) ?? '?'}`,
        );
      }
    }
    // The server's µs per cycle against the fenced floor's: as the clients sent them, and pipelined (anatomy).
    if (inFlight.some((n) => newAt('fenced-floor', n))) {
      for (const mode of ['write', 'read'] as const) {
        const lib = `rwlock-${mode}`;
        const byN = inFlight.map((n) => ({ n, v: ratio(`uncontended.new.${n}.${lib}/fenced-floor.serverUsec`) }));
        const known = byN.filter((b): b is { n: number; v: number } => b.v !== null);
        const worst = known.length === byN.length && known.length > 0 ? Math.max(...known.map((b) => b.v)) : null;
        add(
          `a-${mode}-server-usec-fenced`,
          `uncontended ${mode}: server µs per cycle vs fenced floor, a new name per cycle, worst of ${inFlight.join(', ')} in flight`,
          worst,
          `<= ${SERVER_USEC_VS_FENCED_FLOOR}`,
          atMost(worst, SERVER_USEC_VS_FENCED_FLOOR),
          'x',
          `on ${cpu}; ${byN
            .map(
              ({ n, v }) =>
                `${n}: ${v?.toFixed(2) ?? '?'}x (fenced floor ${newAt('fenced-floor', n)?.serverUsecPerCycle?.toFixed(1) ?? '?'} µs, rwlock ${newAt(lib, n)?.serverUsecPerCycle?.toFixed(1) ?? '?'} µs)`,
            )
            .join(', ')}`,
        );
      }
    }
    for (const lib of ['rwlock-write', 'rwlock-read'] as const) {
      const m = r.uncontended.median.filter((x) => x.lib === lib);
      const scripts = Math.max(...m.map((x) => x.scriptsPerCycle));
      const sent = Math.max(...m.map((x) => x.sentPerCycle));
      const redirects = m.reduce((a, x) => a + x.redirects, 0);
      add(
        `one-call-${lib}`,
        `${lib.replace('rwlock-', '')} acquire+release: script calls per cycle (server), worst concurrency`,
        scripts,
        '= 2',
        Math.abs(scripts - 2) < 0.005,
        'calls',
      );
      add(
        `one-rtt-${lib}`,
        `${lib.replace('rwlock-', '')} acquire+release: commands sent per cycle (client), worst concurrency`,
        sent,
        '= 2',
        Math.abs(sent - 2) < 0.005,
        'cmds',
      );
      add(
        `redirects-${lib}`,
        `${lib.replace('rwlock-', '')}: MOVED/ASK redirects after warm-up`,
        redirects,
        '= 0',
        redirects === 0,
        'replies',
      );
    }
  }
  // The anatomy's pipelined calls: the server's own work for a cycle, no round trip or batching in it.
  const perCall = (what: string) => r.anatomy?.find((a) => a.what.startsWith(what))?.usecPerCall;
  // Results from before the fenced floor's own release row: the floor's, on the floor's key.
  const fencedCycle = [perCall('fenced floor acquire'), perCall('fenced floor release') ?? perCall('floor release')];
  const holderCycle = [perCall('string-holder layout acquire'), perCall('string-holder layout release')];
  const stringHolder = holderCycle.every((v) => v !== undefined) ? holderCycle : undefined;
  const keptCycle = [perCall('string-holder layout, its key kept while'), perCall('string-holder layout, its key kept:')];
  const keptHolder = keptCycle.every((v) => v !== undefined) ? keptCycle : undefined;
  const fewerKeysCycle = [
    perCall('redis-rwlock acquire write, free lock, sent only'),
    perCall('redis-rwlock release write, only holder, sent only'),
  ];
  const fewerKeys = fewerKeysCycle.every((v) => v !== undefined) ? fewerKeysCycle : undefined;
  if (fencedCycle.every((v) => v !== undefined)) {
    const fenced = fencedCycle[0]! + fencedCycle[1]!;
    for (const mode of ['write', 'read'] as const) {
      const acquire = perCall(`redis-rwlock acquire ${mode}`);
      const release = perCall(`redis-rwlock release ${mode}`);
      if (acquire === undefined || release === undefined) continue;
      const v = (acquire + release) / fenced;
      add(
        `anatomy-${mode}-vs-fenced`,
        `${mode} cycle, pipelined: server µs (acquire + release) vs fenced floor (its grant + release)`,
        v,
        `<= ${SERVER_USEC_VS_FENCED_FLOOR}`,
        atMost(v, SERVER_USEC_VS_FENCED_FLOOR),
        'x',
        `on ${cpu}; rwlock ${acquire.toFixed(2)} + ${release.toFixed(2)} µs, fenced floor ${fencedCycle[0]!.toFixed(2)} + ${fencedCycle[1]!.toFixed(2)} µs` +
          (stringHolder !== undefined && mode === 'write'
            ? `; a sole holder in a string key (a layout change, not made): ${stringHolder[0]!.toFixed(2)} + ${stringHolder[1]!.toFixed(2)} µs, ${((stringHolder[0]! + stringHolder[1]!) / fenced).toFixed(2)}x`
            : '') +
          (keptHolder !== undefined && mode === 'write'
            ? `; the same with its key kept while the lock has any state (no EXISTS): ${keptHolder[0]!.toFixed(2)} + ${keptHolder[1]!.toFixed(2)} µs, ${((keptHolder[0]! + keptHolder[1]!) / fenced).toFixed(2)}x`
            : '') +
          (fewerKeys !== undefined && mode === 'write'
            ? `; these scripts sent only the keys and arguments their common case reads (2 keys and 2 arguments, then 1 key; a protocol change, not made): ${fewerKeys[0]!.toFixed(2)} + ${fewerKeys[1]!.toFixed(2)} µs, ${((fewerKeys[0]! + fewerKeys[1]!) / fenced).toFixed(2)}x`
            : ''),
      );
    }
  }
  if (r.renewal?.extend) {
    const e = r.renewal.extend;
    add(
      'one-call-extend',
      'extend: script calls per lease.extend()',
      e.scriptsPerExtend,
      '= 1',
      Math.abs(e.scriptsPerExtend - 1) < 0.005,
      'calls',
    );
    add(
      'one-rtt-extend',
      'extend: commands sent per lease.extend()',
      e.sentPerExtend,
      '= 1',
      Math.abs(e.sentPerExtend - 1) < 0.005,
      'cmds',
    );
  }
  if (r.contended) {
    const baton = r.contended.median.find((m) => m.lib === 'rwlock-write' && m.variant === 'baton');
    for (const peer of ['semaphore', 'redlock'] as const) {
      const v = ratio(`baton.rwlock-write/${peer}`);
      const peerResult = r.contended.median.find((m) => m.lib === peer && m.variant === 'baton');
      const ceiling = baton?.ceilingPerSec ?? null;
      const ceilingRatio = ceiling !== null && peerResult?.handoffsPerSec ? ceiling / peerResult.handoffsPerSec : null;
      const note =
        ceilingRatio === null
          ? undefined
          : `${peer} ${peerResult!.handoffsPerSec.toFixed(0)}/s; a zero-delay handoff would give at most ${ceiling!.toFixed(0)}/s ` +
            `(hold ${baton!.holdActualMs!.toFixed(2)} ms + release ${baton!.releaseMs!.toFixed(2)} ms) = ${ceilingRatio.toFixed(1)}x` +
            (ceilingRatio < 10 ? ': 10x cannot be reached with this hold time' : '');
      add(
        `b-baton-${peer}`,
        `baton handoffs/s vs ${peer === 'semaphore' ? 'redis-semaphore' : 'redlock'} (default settings)`,
        v,
        '>= 10',
        atLeast(v, 10),
        'x',
        note,
      );
    }
    // A handoff as fast as a client that polls with no sleep, without its commands: the faster
    // of a tight loop and a loop on setImmediate, in each run.
    const polling = ratio('baton.rwlock-write/floor-polling');
    const pollingNodeRedis = ratio('baton.rwlock-node-redis/floor-polling');
    const batonNodeRedis = r.contended.median.find((m) => m.lib === 'rwlock-node-redis' && m.variant === 'baton');
    const { median, runs } = r.contended;
    const batonOf = (lib: string) => median.find((m) => m.lib === lib && m.variant === 'baton');
    const floors = (['floor-immediate', 'floor-spin'] as const).filter((lib) => batonOf(lib));
    const fasterIn = (lib: string) =>
      runs.filter((run) => {
        const v = (l: string) => run.find((m) => m.lib === l && m.variant === 'baton')?.handoffsPerSec ?? -1;
        return floors.every((other) => v(lib) >= v(other));
      }).length;
    const perGrant = (m: ContendedResult | undefined) => m?.commandsPerGrant?.toFixed(1) ?? '?';
    add(
      'b-baton-polling',
      'baton handoffs/s vs the faster floor polling with no sleep (tight loop, or on setImmediate)',
      polling,
      `>= ${HANDOVER_VS_POLLING}`,
      atLeast(polling, HANDOVER_VS_POLLING),
      'x',
      floors.length > 0
        ? `on ${cpu}; ${floors
            .map(
              (lib) =>
                `${lib} ${batonOf(lib)!.handoffsPerSec.toFixed(0)}/s at ${perGrant(batonOf(lib))} commands per grant, the faster in ${fasterIn(lib)} of ${runs.length} run(s)`,
            )
            .join('; ')}; redis-rwlock ${baton?.handoffsPerSec.toFixed(0) ?? '?'}/s at ${perGrant(baton)} commands per grant`
        : undefined,
    );
    if (batonNodeRedis) {
      add(
        'b-baton-polling-node-redis',
        'baton handoffs/s on node-redis 5 vs the faster floor polling with no sleep (on ioredis)',
        pollingNodeRedis,
        `>= ${HANDOVER_VS_POLLING}`,
        atLeast(pollingNodeRedis, HANDOVER_VS_POLLING),
        'x',
        `on ${cpu}; redis-rwlock on node-redis ${batonNodeRedis.handoffsPerSec.toFixed(0)}/s (its commands are not counted: the count is ioredis')`,
      );
    }
    add(
      'b-baton-commands',
      'baton: commands sent per grant',
      baton?.commandsPerGrant ?? null,
      '<= 4',
      atMost(baton?.commandsPerGrant ?? null, 4),
      'cmds',
    );
    add(
      'b-handoff-p50',
      'baton handoff p50 (release reply to next grant)',
      baton?.handoffP50Ms ?? null,
      '<= 0.2',
      atMost(baton?.handoffP50Ms ?? null, 0.2),
      'ms',
    );
    add('b-handoff-p99', 'baton handoff p99', baton?.handoffP99Ms ?? null, '<= 1', atMost(baton?.handoffP99Ms ?? null, 1), 'ms');
    const race = ratio('race.rwlock-write/floor');
    add('b-race-floor', 'race grants/s vs floor', race, '>= 0.9', atLeast(race, 0.9));
    // Whether a long wait came from the order (a waiter passed over) or from slow turns (the machine).
    const raceNote = (m: ContendedResult) =>
      `at most ${m.mostGrantsDuringAWait?.toFixed(0) ?? '?'} grants to others during one wait (strict turns: ${waiters - 1}); ` +
      `the machine ran nothing of ours ${m.machineStalls.toFixed(0)} times for over 4 ms, at most ${m.longestMachineStallMs?.toFixed(1) ?? '0'} ms`;
    const cycles = ratio('race.rwlock-write.longestWaitCycles');
    const bound = RACE_WAIT_CYCLES_PER_WAITER * waiters;
    const raceRw = r.contended.median.find((m) => m.lib === 'rwlock-write' && m.variant === 'race');
    add(
      'b-race-longest',
      'race longest wait, in cycle times (1 s / grants per s)',
      cycles,
      `<= ${bound}`,
      atMost(cycles, bound),
      'cycles',
      raceRw
        ? `longest wait ${raceRw.longestWaitMs?.toFixed(1)} ms at ${raceRw.grantsPerSec.toFixed(0)} grants/s; ${(100 * (raceRw.previousHolderShare ?? 0)).toFixed(0)} % of grants to the previous holder; ${raceNote(raceRw)}`
        : undefined,
    );
    // Redlock mode on three servers hands over nearly as fast as the hash mode on one.
    const redlock = r.contended.median.find((m) => m.lib === 'rwlock-redlock' && m.variant === 'baton');
    if (redlock) {
      const v = ratio('baton.rwlock-redlock/rwlock-write');
      add(
        'b-redlock-baton',
        "baton handoffs/s, mode 'redlock' on 3 servers vs the hash mode on one",
        v,
        '>= 0.8',
        atLeast(v, 0.8),
        'x',
        `redlock mode ${redlock.handoffsPerSec.toFixed(0)}/s at ${redlock.commandsPerGrant?.toFixed(1) ?? '?'} commands per grant`,
      );
      add(
        'b-redlock-p50',
        "baton handoff p50, mode 'redlock' on 3 servers",
        redlock.handoffP50Ms,
        '<= 0.5',
        atMost(redlock.handoffP50Ms, 0.5),
        'ms',
      );
    }
    // The same two race targets with fair: true (strict arrival order), for comparison.
    const fair = r.contended.median.find((m) => m.lib === 'rwlock-fair' && m.variant === 'race');
    if (fair) {
      const fairRatio = ratio('race.rwlock-fair/floor');
      add('b-race-floor-fair', 'race grants/s vs floor, with fair: true', fairRatio, '>= 0.9', atLeast(fairRatio, 0.9));
      const fairCycles = ratio('race.rwlock-fair.longestWaitCycles');
      add(
        'b-race-longest-fair',
        'race longest wait in cycle times, with fair: true',
        fairCycles,
        `<= ${bound}`,
        atMost(fairCycles, bound),
        'cycles',
        `longest wait ${fair.longestWaitMs?.toFixed(1)} ms at ${fair.grantsPerSec.toFixed(0)} grants/s; ${raceNote(fair)}`,
      );
    }
    const violations = r.contended.runs.flat().reduce((a, m) => a + m.violations, 0);
    add(
      'b-exclusion',
      'grants while another waiter held the lock (every library, every run)',
      violations,
      '= 0',
      violations === 0,
      'grants',
    );
  }
  if (r.scale) {
    const counts = r.scale.median.map((m) => m.liveReaders);
    const v = ratio(`scale.${Math.max(...counts)}/${Math.min(...counts)}`);
    add('d-scale', `read cycles/s with ${Math.max(...counts)} live readers vs ${Math.min(...counts)}`, v, '>= 0.7', atLeast(v, 0.7));
  }
  if (r.renewal?.rwlock) {
    const e = r.renewal.rwlock;
    const perCall = e.scriptCallsPerPeriod > 0 ? e.leases / e.scriptCallsPerPeriod : null;
    add(
      'e-renewal',
      `renewal of ${e.leases} leases: leases per script call`,
      perCall,
      `>= ${RENEWAL_LEASES_PER_CALL}`,
      atLeast(perCall, RENEWAL_LEASES_PER_CALL),
      'leases',
      `${e.scriptCallsPerPeriod.toFixed(0)} calls per period, ${e.scriptCallsPerPeriodPerMasterMax.toFixed(0)} on the busiest master`,
    );
    const longest = e.longestCommandUsec === null ? 0 : e.longestCommandUsec / 1000;
    add(
      'e-longest',
      `renewal of ${e.leases} leases: longest command on any master (SLOWLOG at 1 ms; 0: none listed)`,
      longest,
      `<= ${LONGEST_COMMAND_MS}`,
      atMost(longest, LONGEST_COMMAND_MS),
      'ms',
      e.longestCommand ?? undefined,
    );
    add('e-renewal-lost', 'leases lost while renewing', e.lost, '= 0', e.lost === 0, 'leases');
  }
  if (r.neighbour) {
    const none = r.neighbour.find((n) => n.holder === 'none');
    const mine = r.neighbour.find((n) => n.holder === 'rwlock');
    const base = r.neighbour.find((n) => n.holder === 'rwlock-base');
    if (none && mine) {
      const extra = mine.p99Ms - none.p99Ms;
      const p = (n: typeof none) => `p50 ${n.p50Ms.toFixed(3)} ms, p99 ${n.p99Ms.toFixed(3)} ms`;
      add(
        'g-neighbour-p99',
        `a neighbour's GET p99 with ${mine.leases} leases renewing vs none held, ms later`,
        extra,
        `<= ${NEIGHBOUR_P99_EXTRA_MS}`,
        atMost(extra, NEIGHBOUR_P99_EXTRA_MS),
        'ms',
        `none held: ${p(none)}; renewing: ${p(mine)} (${(mine.p99Ms / none.p99Ms).toFixed(2)}x)` +
          (base ? `; the baseline checkout renewing: ${p(base)} (${(base.p99Ms / none.p99Ms).toFixed(2)}x)` : ''),
      );
      const longest = mine.longestCommandUsec === null ? 0 : mine.longestCommandUsec / 1000;
      add(
        'g-longest',
        `longest library command while ${mine.leases} leases renew (SLOWLOG at 1 ms; 0: none listed)`,
        longest,
        `<= ${LONGEST_COMMAND_MS}`,
        atMost(longest, LONGEST_COMMAND_MS),
        'ms',
        `${mine.slowScripts} of ${mine.scriptCalls} script calls listed, ${mine.machineStalls} machine stall(s) over 4 ms meanwhile` +
          (base
            ? `; the baseline checkout: ${base.slowScripts} of ${base.scriptCalls}, the longest ${((base.longestCommandUsec ?? 0) / 1000).toFixed(1)} ms`
            : '') +
          (mine.longestCommand ? `; the longest: ${mine.longestCommand}` : ''),
      );
    }
  }
  if (r.memory) {
    const m = r.memory;
    const perReader = m.bytesPerExtraReader;
    const bound = MEMORY_OVERHEAD_PER_DATA_BYTE * m.dataBytesPerExtraReader;
    add(
      'f-reader',
      `bytes per extra reader (its data: ${m.dataBytesPerExtraReader.toFixed(0)} B)`,
      perReader,
      `<= ${bound.toFixed(0)}`,
      atMost(perReader, bound),
      'B',
    );
    // Its data with the encoding's share, plus the fixed cost of a key (as much as the floor's whole key) per key it uses.
    const wBound = MEMORY_OVERHEAD_PER_DATA_BYTE * m.write.dataBytes + m.write.keys.length * m.floor.bytes;
    add(
      'f-write',
      `bytes of a write-held lock (its data: ${m.write.dataBytes} B; floor key: ${m.floor.bytes} B)`,
      m.write.bytes,
      `<= ${wBound.toFixed(0)}`,
      atMost(m.write.bytes, wBound),
      'B',
    );
    add('f-left', 'keys left after every lease was released', m.keysLeftAfterRelease, '= 0', m.keysLeftAfterRelease === 0, 'keys');
  }
  return out;
}
