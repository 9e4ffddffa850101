/**
 * The history of a multi-process lock workload, and a checker that proves
 * from it, for every resource:
 *
 * - **exclusion**: no write hold overlaps any other hold (read or write) of
 *   the same resource;
 * - **fences**: write grants carry strictly increasing fences in grant order,
 *   and every grant's fence is larger than that of any grant that ended
 *   before it was requested;
 * - **no lost update**: walking the committed writes in fence order, each one
 *   read exactly the counter value its predecessors left (a non-atomic
 *   GET / SET counter+1 under the write lock), and the final counter is the
 *   number of committed writes.
 *
 * ## Time
 * Every process of the workload runs on this one host, so `Date.now()` reads
 * the same kernel clock in all of them, and times from different processes
 * are comparable. (Process-local monotonic clocks, `performance.now()`, are
 * not: each counts from its own process start.) A hold is recorded as the
 * interval [moment the acquire resolved, moment just before the release was
 * sent]. That interval lies inside the interval during which Redis really
 * granted the hold (Redis grants before the reply arrives, and releases after
 * the release is sent), so two recorded intervals that overlap prove that the
 * real holds overlapped: the checker never reports a false overlap. The
 * reverse is weaker only by the clock's 1 ms resolution, and the counter
 * check covers it independently of any clock: an overlap of two writers shows
 * up there as two writes that read the same counter value.
 *
 * The alternative, Redis `TIME` taken inside the critical section, costs an
 * extra round trip per operation and on a Cluster compares clocks of
 * different nodes (the same host clock here anyway); it proves no more.
 *
 * ## Stalled holders
 * A holder whose process stalls (CPU starvation, GC) past its lease may act
 * after Redis gave the lock to another: the lock kept its promise, which
 * holds while leases are live, and the holder's signal aborts as soon as its
 * process runs again. With a fixed lease the checker can show this from the
 * fences (the server's time at each grant) and lists such overlaps as
 * `expired-holder`, apart from violations. The server counts a lease in
 * whole ms: granted at n.x ms for L ms, it is over from ms n + L (the holder
 * counts it lost at its send time + L - 1 ms, never later; a busy event loop
 * may tell it later still), so a lease's end on the server is the fence's
 * whole ms plus L, not the fence plus L.
 *
 * An auto-renewed lease has no such end: its process renews it every third
 * of the lease. Each worker prints the pauses of its event loop (a 10 ms
 * ticker that ran more than {@link PAUSE_REPORT_MS} late), and with
 * `autoLeaseMs` the checker lists an overlap as `expired-holder` when the
 * earlier holder was told and its process was paused for at least half the
 * lease in the lease before the later grant (it missed the renewals that
 * would have kept it; a healthy process misses none).
 *
 * ## Faults
 * A test declares the windows in which it injected a fault. An overlap during
 * a `failover` window, in which the earlier holder's lease was reported lost,
 * is not hidden and not counted as a violation: it is listed separately as
 * `failover-window`. Redis replicates asynchronously, so a grant the master
 * acknowledged but had not yet sent to its replica is gone after the
 * failover, and a second process may be granted the same lock while the
 * first still believes it holds it, until its next renewal finds the lock
 * gone and aborts its lease's signal. That is the documented limit of a lock
 * on one Redis master; only fencing protects the guarded resource across it.
 * An overlap whose earlier holder was never told (no loss on its signal) is a
 * violation (`unreported-loss`).
 *
 * @module
 */
import type { WorkerTarget } from './targets.js';

/** What a worker process is told to do. */
export interface WorkerConfig {
  name: string;
  target: WorkerTarget;
  resources: string[];
  /** Stop after this many operations (over all loops of the process)... */
  ops: number;
  /** ...or after this long, whichever comes first. */
  durationMs: number;
  /** After durationMs + graceMs the worker reports a hang and exits. */
  graceMs: number;
  /** Concurrent loops in the process. */
  loops: number;
  writeShare: number;
  minHoldMs: number;
  maxHoldMs: number;
  /** The LockClient's lease (auto-renewed) and wait. */
  leaseMs: number;
  waitMs: number;
  /** Pause after an operation that failed at once. */
  pauseMs: number;
  /** Acquire with this fixed lease (not renewed) instead of the client's auto-renewed one. */
  fixedLeaseMs?: number;
  /** Write the counter even after the lease's signal said the lock was lost (a misbehaving holder). */
  ignoreLoss?: boolean;
  /** Call release() again (a few times) after it rejected with RedisUnavailableError, as the README advises. */
  retryUnknownRelease?: boolean;
  lockOptions?: Record<string, unknown>;
  /**
   * `redlock` mode: the LockClient runs on one ioredis client per address
   * here (each an independent server, or a fault proxy in front of one); the
   * data stays on `target`.
   */
  redlockNodes?: { host: string; port: number }[];
  /**
   * Each loop acquires one resource (the loop's index, modulo the
   * resources) as one explicit owner (`p3.l1`), so that owner acquires the
   * same lock again right after its release, while renewal may still run for
   * it. Default: each operation a random resource, as an owner of its own.
   */
  ownerPerLoop?: boolean;
  /**
   * Three holds in four end up to this many ms before the client's next renewal
   * round (its phase read from the `redis-rwlock:renew` tracing channel), so
   * the round starts while the release is on the wire and finds the lease
   * gone: with `ownerPerLoop`, the race of redlock's two-writer bug in most
   * cycles rather than a few. Holds can then run up to one renewal period
   * past `minHoldMs`.
   */
  releaseBeforeRenewalMs?: number;
  /**
   * A bug planted in the worker's copy of the library, for a row that the
   * checker must fail: `renewal-abandons-all` drops every hold of the owner
   * on every node when renewal finds one of its leases lost (not the lost
   * hold alone).
   */
  plant?: 'renewal-abandons-all';
  redisOptions?: Record<string, unknown>;
  clusterOptions?: Record<string, unknown>;
}

/** One line a worker prints. */
export type HistoryEvent =
  | { t: 'start'; process: string; pid: number; at: number }
  | {
      t: 'grant';
      id: string;
      process: string;
      resource: string;
      mode: 'read' | 'write';
      owner: string;
      fence: number;
      requestedAt: number;
      grantedAt: number;
    }
  | {
      t: 'data';
      id: string;
      seen?: number;
      wrote?: boolean;
      skippedWrite?: boolean;
      state?: string | null;
      dataError?: string;
      /** A write: when its counter SET was sent, and when its reply came. */
      writeSentAt?: number;
      wroteAt?: number;
      /** Granted after its process began a graceful shutdown: did nothing. */
      shutdown?: boolean;
    }
  | {
      t: 'lost';
      id: string;
      at: number;
      reason: string;
      /** The lease's local deadline when it was reported lost (epoch ms): a stalled holder is told after it. */
      deadline?: number;
    }
  | { t: 'release-sent'; id: string; at: number }
  | { t: 'released'; id: string; at: number; outcome: string; message?: string }
  | {
      t: 'error';
      id: string;
      process: string;
      resource: string;
      mode: 'read' | 'write';
      at: number;
      name: string;
      typed: boolean;
      message: string;
    }
  | { t: 'hang'; process: string; at: number }
  /** The process's event loop ran nothing from `from` to `to` (a stalled process: CPU starvation, GC). */
  | { t: 'paused'; process: string; from: number; to: number }
  /** A graceful shutdown: the process holds no lease, begins no critical section, and calls close() now, with `acquiring` acquires in flight. */
  | { t: 'shutdown'; process: string; at: number; acquiring: number }
  | { t: 'done'; process: string; at: number; closeMs: number; quitMs?: number; operations: number };

/** One granted hold, assembled from its events. */
export interface Hold {
  id: string;
  process: string;
  resource: string;
  mode: 'read' | 'write';
  owner: string;
  fence: number;
  requestedAt: number;
  grantedAt: number;
  releaseAt?: number;
  releasedAt?: number;
  /** 'ok', or the name of the error the release rejected with. */
  release?: string;
  releaseMessage?: string;
  lostAt?: number;
  lostReason?: string;
  /** The lease's local deadline when its loss was reported (epoch ms). */
  lostDeadline?: number;
  /** Counter value read (writes and reads). */
  seen?: number;
  /** The counter write succeeded. */
  wrote?: boolean;
  /** The lease was lost before the counter write, which was skipped. */
  skippedWrite?: boolean;
  /** The state a reader saw. */
  state?: string | null;
  dataError?: string;
  /** A write: when its counter SET was sent, and when its reply came. */
  writeSentAt?: number;
  wroteAt?: number;
  /** Granted after its process began a graceful shutdown: did nothing. */
  shutdown?: boolean;
}

export interface AcquireFailure {
  id: string;
  process: string;
  resource: string;
  mode: 'read' | 'write';
  at: number;
  name: string;
  typed: boolean;
  message: string;
}

export interface History {
  holds: Hold[];
  failures: AcquireFailure[];
  /** Processes that were killed, with the time of the kill: their holds end there. */
  deaths: Map<string, number>;
  /**
   * Processes that shut down gracefully, with the time they called close()
   * (no lease held, no critical section begun after): their holds end there.
   */
  shutdowns: Map<string, { at: number; acquiring: number }>;
  /** Processes that reported a hang. */
  hangs: string[];
  /** Each process's event-loop pauses longer than {@link PAUSE_REPORT_MS}. */
  pauses: Map<string, { from: number; to: number }[]>;
  /** Processes that finished, with the time close() took. */
  done: Map<string, { at: number; closeMs: number; operations: number }>;
}

/** A fault a test injected, for the checker and the report. */
export interface FaultWindow {
  kind: 'failover' | 'restart' | 'kill' | 'other';
  start: number;
  end: number;
  /** Data may be lost: a counter that went back is then not a violation. */
  dataLoss?: boolean;
  /**
   * Lock state may be lost (a failover, a restart without persistence): an
   * overlap whose earlier holder was reported lost is listed apart, as
   * `failover-window`, not as a violation.
   */
  stateLoss?: boolean;
}

export type ViolationKind = 'overlap' | 'unreported-loss' | 'fence' | 'lost-update' | 'counter' | 'untyped-error' | 'hang';

export interface Finding {
  kind: ViolationKind | 'failover-window' | 'data-loss' | 'expired-holder';
  resource?: string;
  detail: string;
}

export interface CheckResult {
  /** Acquires attempted: holds granted plus acquires that failed. */
  operations: number;
  grants: number;
  writes: number;
  committedWrites: number;
  failuresByName: Record<string, number>;
  /** Leases whose signal aborted (the library reported them lost). */
  leasesLost: number;
  violations: Finding[];
  /** Overlaps explained by a failover (earlier grant lost and reported lost); see the module doc. */
  failoverWindow: Finding[];
  /** Counter mismatches explained by a fault that loses data. */
  dataLoss: Finding[];
  /**
   * Overlaps with a holder whose fixed lease had already run out on the
   * server when the other was granted, and which was told (its loss was
   * reported, late): its process was stalled past its lease (see the module doc).
   */
  expiredHolder: Finding[];
}

export interface CheckOptions {
  faults?: readonly FaultWindow[];
  /** Final counter value per resource, read after the run (undefined: not checked). */
  counters?: ReadonlyMap<string, number>;
  /** Margin added after each fault window's end, in ms (e.g. the lease: losses surface up to a lease later). */
  faultMarginMs?: number;
  /** The workload's fixed (not renewed) lease, if it used one: lets the checker tell expired holders apart. */
  fixedLeaseMs?: number;
  /**
   * The workload's auto-renewed lease: lets the checker tell holders whose
   * process was paused past their renewals apart (see "Stalled holders").
   */
  autoLeaseMs?: number;
}

/** A worker prints an event-loop pause longer than this, in ms. */
export const PAUSE_REPORT_MS = 50;

/** How long `process` was paused within [from, to], in ms. */
export function pausedMs(history: History, process: string, from: number, to: number): number {
  const pauses = history.pauses.get(process) ?? [];
  return pauses.reduce((sum, p) => sum + Math.max(0, Math.min(to, p.to) - Math.max(from, p.from)), 0);
}

/** Assembles the events of every worker into a {@link History}. */
export function buildHistory(events: readonly HistoryEvent[], deaths: ReadonlyMap<string, number> = new Map()): History {
  const holds = new Map<string, Hold>();
  const failures: AcquireFailure[] = [];
  const hangs: string[] = [];
  const shutdowns = new Map<string, { at: number; acquiring: number }>();
  const done = new Map<string, { at: number; closeMs: number; operations: number }>();
  const pauses = new Map<string, { from: number; to: number }[]>();
  for (const e of events) {
    switch (e.t) {
      case 'grant': {
        const { t: _t, ...hold } = e;
        holds.set(e.id, hold);
        break;
      }
      case 'data': {
        const { t: _t, id, ...data } = e;
        Object.assign(holds.get(id) ?? {}, data);
        break;
      }
      case 'lost': {
        const hold = holds.get(e.id);
        if (hold && hold.lostAt === undefined) Object.assign(hold, { lostAt: e.at, lostReason: e.reason, lostDeadline: e.deadline });
        break;
      }
      case 'release-sent':
        Object.assign(holds.get(e.id) ?? {}, { releaseAt: e.at });
        break;
      case 'released':
        Object.assign(holds.get(e.id) ?? {}, { releasedAt: e.at, release: e.outcome, ...(e.message && { releaseMessage: e.message }) });
        break;
      case 'error': {
        const { t: _t, ...failure } = e;
        failures.push(failure);
        break;
      }
      case 'hang':
        hangs.push(e.process);
        break;
      case 'paused':
        pauses.set(e.process, [...(pauses.get(e.process) ?? []), { from: e.from, to: e.to }]);
        break;
      case 'shutdown':
        shutdowns.set(e.process, { at: e.at, acquiring: e.acquiring });
        break;
      case 'done':
        done.set(e.process, { at: e.at, closeMs: e.closeMs, operations: e.operations });
        break;
      case 'start':
        break;
    }
  }
  return { holds: [...holds.values()], failures, deaths: new Map(deaths), shutdowns, hangs, pauses, done };
}

/**
 * The end of the interval during which a hold's process may act as holder:
 * just before its release was sent, when it learnt of the loss, when the
 * process was killed, or when it called close() to shut down (it acts on no
 * lock after that, and close() releases what is left), whichever came first.
 */
export function holdEnd(hold: Hold, history: History): number {
  return Math.min(
    hold.releaseAt ?? Infinity,
    hold.lostAt ?? Infinity,
    history.deaths.get(hold.process) ?? Infinity,
    history.shutdowns.get(hold.process)?.at ?? Infinity,
  );
}

/**
 * The writes (in fence order) whose counter SET may have landed after their
 * lease was gone and a later writer held the lock: sent while the lease held
 * (before its loss was reported: the worker reads the lease's signal, which
 * notices a passed deadline, just before sending), answered only after the
 * loss was reported and after the next writer's grant. The SET is not fenced:
 * held up in the network, or sent again by the data client (ioredis resends a
 * command whose connection closed, so a SET that ran may run again, late), it
 * lands whenever it does, the documented limit of a lease (only fencing
 * protects the data past it). A counter read of what such a write left, or
 * from before it landed, is listed with the expired holders, not as a
 * violation; a write sent after its loss was reported (a holder that ignores
 * the signal) is not excused.
 */
function lateWrites(inFenceOrder: readonly Hold[]): Hold[] {
  return inFenceOrder.filter((q, i) => {
    if (q.seen === undefined || q.lostAt === undefined || q.writeSentAt === undefined || q.wroteAt === undefined) return false;
    if (q.writeSentAt >= q.lostAt || q.wroteAt <= q.lostAt) return false; // sent in the ms of its loss: not excused
    const next = inFenceOrder[i + 1];
    return next !== undefined && next.grantedAt < q.wroteAt;
  });
}

/**
 * Whether write `h` read the counter of late write `q` as `q` left it before
 * or after its SET landed: every write between them in fence order (and `h`
 * itself, for a read from before) was granted while that SET was outstanding.
 */
function readWhileOutstanding(q: Hold, h: Hold, inFenceOrder: readonly Hold[]): boolean {
  const between = inFenceOrder.filter((w) => w.fence > q.fence && w.fence < h.fence);
  if (between.some((w) => w.grantedAt >= q.wroteAt!)) return false;
  if (h.seen === q.seen! + 1) return true;
  return h.seen === q.seen && h.grantedAt < q.wroteAt!;
}

function lateDetail(q: Hold): string {
  return (
    `${q.id} (fence ${q.fence}, read ${q.seen}) sent its counter write at ${q.writeSentAt} under its lease, ` +
    `was told the lease was lost at ${q.lostAt}, and had the write's reply at ${q.wroteAt}, after a later writer's grant: an unfenced write landing late`
  );
}

/** Checks `history`; see the module doc for what is proved. */
export function checkHistory(history: History, options: CheckOptions = {}): CheckResult {
  const faults = options.faults ?? [];
  const margin = options.faultMarginMs ?? 0;
  const violations: Finding[] = [];
  const failoverWindow: Finding[] = [];
  const dataLoss: Finding[] = [];
  const expiredHolder: Finding[] = [];
  const inFault = (at: number, pred: (f: FaultWindow) => boolean) => faults.some((f) => pred(f) && at >= f.start && at <= f.end + margin);

  const byResource = new Map<string, Hold[]>();
  for (const hold of history.holds) {
    const list = byResource.get(hold.resource);
    if (list) list.push(hold);
    else byResource.set(hold.resource, [hold]);
  }

  for (const [resource, holds] of byResource) {
    const spans = holds.map((h) => ({ h, start: h.grantedAt, end: holdEnd(h, history) })).sort((a, b) => a.start - b.start);

    // Exclusion: each write against every hold that starts before it ends.
    for (let i = 0; i < spans.length; i++) {
      for (let j = i + 1; j < spans.length && spans[j]!.start < spans[i]!.end; j++) {
        const a = spans[i]!;
        const b = spans[j]!;
        if (a.h.mode === 'read' && b.h.mode === 'read') continue;
        if (!(b.start < a.end && a.start < b.end)) continue;
        const detail =
          `${a.h.mode} ${a.h.id} [${a.start}, ${a.end}] (fence ${a.h.fence}) overlaps ${b.h.mode} ${b.h.id} ` +
          `[${b.start}, ${b.end}] (fence ${b.h.fence}) by ${Math.min(a.end, b.end) - b.start} ms`;
        const failover = inFault(b.start, (f) => f.stateLoss === true);
        // Fences are the server's clock in us at the grant (fence = max(last + 1, now)), and a fixed
        // lease is over from the grant's whole ms plus leaseMs (see "Stalled holders"): the later
        // grant came after the earlier lease had run out.
        const [first, second] = a.h.fence < b.h.fence ? [a.h, b.h] : [b.h, a.h];
        const told = first.lostAt !== undefined || first.release === 'LockNotHeldError';
        const leaseOver = options.fixedLeaseMs === undefined ? Infinity : Math.floor(first.fence / 1000) + options.fixedLeaseMs;
        const auto = options.autoLeaseMs;
        const paused = auto === undefined ? 0 : pausedMs(history, first.process, second.fence / 1000 - auto, second.fence / 1000);
        if (told && second.fence / 1000 >= leaseOver) {
          expiredHolder.push({
            kind: 'expired-holder',
            resource,
            detail: `${detail}; ${first.id}'s lease had run out on the server ${(second.fence / 1000 - leaseOver).toFixed(1)} ms before ${second.id} was granted`,
          });
        } else if (told && auto !== undefined && paused >= auto / 2) {
          expiredHolder.push({
            kind: 'expired-holder',
            resource,
            detail: `${detail}; ${first.process} was paused ${paused} ms in the ${auto} ms lease before ${second.id} was granted`,
          });
        } else if (failover && (a.h.lostAt !== undefined || b.h.lostAt !== undefined)) {
          failoverWindow.push({
            kind: 'failover-window',
            resource,
            detail: `${detail}; reported lost: ${[a, b]
              .filter((s) => s.h.lostAt !== undefined)
              .map((s) => s.h.id)
              .join(', ')}`,
          });
        } else if (failover) {
          violations.push({ kind: 'unreported-loss', resource, detail: `${detail}; neither lease was reported lost` });
        } else {
          violations.push({ kind: 'overlap', resource, detail });
        }
      }
    }

    // Fences: strictly increasing along the write grants' order...
    const writes = spans.filter((s) => s.h.mode === 'write');
    for (let i = 1; i < writes.length; i++) {
      const a = writes[i - 1]!;
      const b = writes[i]!;
      if (a.h.fence >= b.h.fence && !(b.start < a.end)) {
        violations.push({
          kind: 'fence',
          resource,
          detail: `write ${b.h.id} (fence ${b.h.fence}) was granted after write ${a.h.id} (fence ${a.h.fence})`,
        });
      }
    }
    // ...and every grant above every grant that ended before it was requested.
    const byEnd = [...spans].sort((a, b) => a.end - b.end);
    const byRequest = [...spans].sort((a, b) => a.h.requestedAt - b.h.requestedAt);
    let k = 0;
    let maxFence = -Infinity;
    let maxId = '';
    for (const s of byRequest) {
      while (k < byEnd.length && byEnd[k]!.end < s.h.requestedAt) {
        if (byEnd[k]!.h.fence > maxFence) {
          maxFence = byEnd[k]!.h.fence;
          maxId = byEnd[k]!.h.id;
        }
        k++;
      }
      if (s.h.fence <= maxFence) {
        violations.push({
          kind: 'fence',
          resource,
          detail: `${s.h.mode} ${s.h.id} (fence ${s.h.fence}) requested after ${maxId} (fence ${maxFence}) had ended`,
        });
      }
    }

    // No lost update: committed writes in fence order each read what the previous ones left.
    let expected: number | undefined = 0;
    let committed = 0;
    const inFenceOrder = [...writes].map((s) => s.h).sort((a, b) => a.fence - b.fence);
    const late = lateWrites(inFenceOrder);
    for (const h of inFenceOrder) {
      if (h.seen === undefined) {
        // The counter GET or SET may or may not have run.
        if (h.dataError || history.deaths.has(h.process)) expected = undefined;
        continue;
      }
      // Its lease was lost and it wrote nothing: its read may have come after the loss, once later
      // holders had written (a read held up past the lease), so it says nothing of the chain.
      if (h.skippedWrite) continue;
      if (expected !== undefined && h.seen !== expected) {
        const finding: Finding = {
          kind: 'lost-update',
          resource,
          detail: `write ${h.id} (fence ${h.fence}) read counter ${h.seen}, expected ${expected}`,
        };
        // A read of what a late write left, or from before it landed (see lateWrites).
        const landed = late.find((q) => q.fence < h.fence && readWhileOutstanding(q, h, inFenceOrder));
        if (inFault(h.grantedAt, (f) => f.dataLoss === true)) dataLoss.push({ ...finding, kind: 'data-loss' });
        else if (landed) expiredHolder.push({ ...finding, kind: 'expired-holder', detail: `${finding.detail}; ${lateDetail(landed)}` });
        else violations.push(finding);
      }
      if (h.wrote) {
        committed++;
        expected = h.seen + 1;
      } else if (h.dataError) {
        expected = undefined;
      } else {
        expected = h.seen;
      }
    }
    const final = options.counters?.get(resource);
    if (final !== undefined && expected !== undefined && final !== expected) {
      const finding: Finding = {
        kind: 'counter',
        resource,
        detail: `counter is ${final}, the committed writes leave ${expected} (${committed} committed)`,
      };
      const landed = late.find((q) => final === q.seen! + 1);
      if (faults.some((f) => f.dataLoss)) dataLoss.push({ ...finding, kind: 'data-loss' });
      else if (landed) expiredHolder.push({ ...finding, kind: 'expired-holder', detail: `${finding.detail}; ${lateDetail(landed)}` });
      else violations.push(finding);
    }
  }

  for (const f of history.failures) {
    if (!f.typed)
      violations.push({
        kind: 'untyped-error',
        resource: f.resource,
        detail: `${f.mode} acquire ${f.id} failed with ${f.name}: ${f.message}`,
      });
  }
  for (const p of history.hangs) violations.push({ kind: 'hang', detail: `process ${p} did not finish in time` });

  const failuresByName: Record<string, number> = {};
  for (const f of history.failures) failuresByName[f.name] = (failuresByName[f.name] ?? 0) + 1;
  const writes = history.holds.filter((h) => h.mode === 'write');
  return {
    operations: history.holds.length + history.failures.length,
    grants: history.holds.length,
    writes: writes.length,
    committedWrites: writes.filter((h) => h.wrote).length,
    failuresByName,
    leasesLost: history.holds.filter((h) => h.lostAt !== undefined).length,
    violations,
    failoverWindow,
    dataLoss,
    expiredHolder,
  };
}

/**
 * Time from `at` until every one of `resources` was granted again (to a
 * process that was not killed), in ms; Infinity if one never was.
 */
export function recoveryMs(history: History, resources: readonly string[], at: number): number {
  let worst = 0;
  for (const resource of resources) {
    const granted = history.holds.filter((h) => h.resource === resource && h.grantedAt >= at && !history.deaths.has(h.process));
    const first = Math.min(...granted.map((h) => h.grantedAt));
    worst = Math.max(worst, first - at);
  }
  return worst;
}

/**
 * The longest time without a grant on `resource` within [from, to] (counting
 * from `from` to the first grant, between grants, and from the last to `to`).
 */
export function maxGapMs(history: History, resource: string, from: number, to: number): number {
  const times = history.holds.filter((h) => h.resource === resource && h.grantedAt >= from && h.grantedAt <= to).map((h) => h.grantedAt);
  times.sort((a, b) => a - b);
  let last = from;
  let gap = 0;
  for (const t of [...times, to]) {
    gap = Math.max(gap, t - last);
    last = t;
  }
  return gap;
}

/**
 * The longest time a lock stood free in the history, by every process's
 * account, while a process that asked for it before then still waited: per
 * release that succeeded, the time from its end to the next grant on its
 * resource to an earlier request, less the time another hold of the
 * resource covered (a writer that came later and went first is not a stuck
 * lock) and the time inside `pauses` (a stalled network, when nothing can
 * move). A hold the server counted twice (a resent acquire) keeps its lock
 * taken, held by nobody the history knows, for the rest of its lease.
 */
export function longestHandoffMs(history: History, pauses: readonly FaultWindow[] = []): number {
  const byResource = new Map<string, { start: number; end: number }[]>();
  for (const h of history.holds) {
    const end = h.releasedAt ?? h.lostAt ?? h.releaseAt;
    if (end === undefined) continue;
    let list = byResource.get(h.resource);
    if (!list) byResource.set(h.resource, (list = []));
    list.push({ start: h.grantedAt, end });
  }
  let longest = 0;
  for (const h of history.holds) {
    if (h.release !== 'ok' || h.releasedAt === undefined) continue;
    const r = h.releasedAt;
    let next = Infinity;
    for (const w of history.holds) {
      if (w.resource === h.resource && w.grantedAt >= r && w.grantedAt < next && w.requestedAt < r) next = w.grantedAt;
    }
    if (next === Infinity) continue;
    const covered = [...(byResource.get(h.resource) ?? []), ...pauses];
    longest = Math.max(longest, next - r - coveredMs(covered, r, next));
  }
  return longest;
}

/** How much of [from, to] the union of `spans` covers. */
function coveredMs(spans: readonly { start: number; end: number }[], from: number, to: number): number {
  const clipped = spans
    .map((s) => ({ start: Math.max(from, s.start), end: Math.min(to, s.end) }))
    .filter((s) => s.end > s.start)
    .sort((a, b) => a.start - b.start);
  let total = 0;
  let reached = from;
  for (const s of clipped) {
    if (s.end <= reached) continue;
    total += s.end - Math.max(s.start, reached);
    reached = s.end;
  }
  return total;
}

/** One row of the fault report table. */
export interface ReportRow {
  fault: string;
  topology: string;
  operations: number;
  violations: number;
  failoverWindow: number;
  recoveryMs: number | undefined;
  leasesLost: number;
  notes?: string;
}

const rows: ReportRow[] = [];

/** Prints one row of the fault table (and keeps it for {@link printReport}). */
export function report(row: ReportRow): void {
  rows.push(row);
  const recovery = row.recoveryMs === undefined ? '-' : `${Math.round(row.recoveryMs)} ms`;
  console.log(
    `      | ${row.fault} [${row.topology}] | ops ${row.operations} | violations ${row.violations} | failover-window ${row.failoverWindow} | recovery ${recovery} | lost ${row.leasesLost}${row.notes ? ` | ${row.notes}` : ''}`,
  );
}

/** The whole table, as Markdown. */
export function printReport(): void {
  if (rows.length === 0) return;
  const lines = [
    '| fault | topology | operations | violations | failover-window overlaps | time to recover | leases reported lost | notes |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.fault} | ${r.topology} | ${r.operations} | ${r.violations} | ${r.failoverWindow} | ${r.recoveryMs === undefined ? '-' : `${Math.round(r.recoveryMs)} ms`} | ${r.leasesLost} | ${r.notes ?? ''} |`,
    ),
  ];
  console.log(`\n${lines.join('\n')}\n`);
}
