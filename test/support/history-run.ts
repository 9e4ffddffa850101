/**
 * Runs the history workload: several worker processes
 * (test/workers/history-worker.ts), each with its own clients, whose events
 * are collected as they are printed, so the history of a process killed with
 * SIGKILL is kept up to its death.
 *
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { bundled } from './bundled.js';
import { buildHistory, type History, type HistoryEvent, type WorkerConfig } from './history.js';

/** A line GLIDE's core logger writes (`<time> ERROR logger_core: ...`, with colour codes). */
const GLIDE_CORE_LOG = /^\S*\s*\S*\s*(ERROR|WARN)\S*\s+\S*logger_core/;

const WORKER = fileURLToPath(new URL('../workers/history-worker.ts', import.meta.url));

export type WorkloadOptions = Partial<Omit<WorkerConfig, 'name' | 'target'>>;

export const WORKLOAD_DEFAULTS: Omit<WorkerConfig, 'name' | 'target'> = {
  resources: ['alpha', 'beta', 'gamma'],
  ops: 400,
  durationMs: 10_000,
  graceMs: 20_000,
  loops: 3,
  writeShare: 0.4,
  minHoldMs: 0,
  maxHoldMs: 6,
  leaseMs: 2_000,
  waitMs: 20_000,
  pauseMs: 50,
};

export interface WorkerHandle {
  readonly name: string;
  readonly child: ChildProcess;
  readonly events: HistoryEvent[];
  /** Resolves with the exit code (or the signal's name) when the process has ended. */
  readonly exited: Promise<number | string>;
  stderr(): string;
}

/**
 * A running workload of several processes.
 *
 * Its failures reach the test as one rejected promise, never as an uncaught
 * exception beside it: a worker that cannot be spawned, prints a line that is
 * not a history event, or exits with an error (unless killed on purpose)
 * fails the workload, which rejects every pending and later `waitFor`,
 * `launch` and `finish` with that first error.
 */
export class Workload {
  readonly workers: WorkerHandle[] = [];
  readonly deaths = new Map<string, number>();
  private readonly listeners = new Set<(event: HistoryEvent, worker: WorkerHandle) => void>();
  private readonly failureListeners = new Set<(error: Error) => void>();
  private failure: Error | undefined;
  private stopping = false;

  constructor(
    private readonly target: WorkerConfig['target'],
    private readonly defaults: WorkloadOptions = {},
  ) {}

  /** Starts `count` processes with the given options (on top of the workload's). */
  start(count: number, options: WorkloadOptions = {}, prefix = 'p'): WorkerHandle[] {
    const started: WorkerHandle[] = [];
    for (let i = 0; i < count; i++) {
      const name = `${prefix}${this.workers.length}`;
      const config: WorkerConfig = { ...WORKLOAD_DEFAULTS, ...this.defaults, ...options, name, target: this.target };
      const child = spawn(process.execPath, [bundled(WORKER)], {
        env: { ...process.env, HISTORY_CONFIG: JSON.stringify(config) },
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      });
      const events: HistoryEvent[] = [];
      let err = '';
      let partial = '';
      const handle: WorkerHandle = {
        name,
        child,
        events,
        exited: new Promise((resolve) => {
          child.on('exit', (code, signal) => resolve(code ?? signal ?? -1));
          child.on('error', (error) => {
            this.fail(new Error(`worker ${name} could not be run: ${error.message}`, { cause: error }));
            if (child.pid === undefined) resolve('spawn-error'); // never started: no 'exit' follows
          });
        }),
        stderr: () => err,
      };
      void handle.exited.then((code) => {
        if (code !== 0 && !this.deaths.has(name) && !this.stopping) this.fail(new Error(`worker ${name} exited with ${code}: ${err}`));
      });
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop()!;
        for (const line of lines) {
          if (!line.trim()) continue;
          let event: HistoryEvent;
          try {
            event = JSON.parse(line) as HistoryEvent;
          } catch {
            // GLIDE's native core logs to stdout too (errors only, test/support/glide-clients.ts): kept with stderr.
            if (GLIDE_CORE_LOG.test(line)) err = `${err}${line}\n`.slice(-20_000);
            else this.fail(new Error(`worker ${name} printed a line that is not a history event: ${line.slice(0, 200)}`));
            continue;
          }
          events.push(event);
          for (const listener of this.listeners) listener(event, handle);
        }
      });
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (err = (err + chunk).slice(-20_000)));
      this.workers.push(handle);
      started.push(handle);
    }
    return started;
  }

  /**
   * Resolves with the first event (and its worker) for which `pred` holds;
   * rejects after `timeoutMs`, when `pred` throws, or as soon as the workload
   * fails.
   */
  waitFor(
    pred: (event: HistoryEvent, worker: WorkerHandle) => boolean,
    timeoutMs: number,
  ): Promise<{ event: HistoryEvent; worker: WorkerHandle }> {
    return new Promise((resolve, reject) => {
      if (this.failure) {
        reject(this.failure);
        return;
      }
      const settle = (outcome: () => void) => {
        clearTimeout(timer);
        this.listeners.delete(listener);
        this.failureListeners.delete(onFailure);
        outcome();
      };
      const timer = setTimeout(() => settle(() => reject(new Error(`no matching workload event within ${timeoutMs} ms`))), timeoutMs);
      const onFailure = (error: Error) => settle(() => reject(error));
      const listener = (event: HistoryEvent, worker: WorkerHandle) => {
        let matched: boolean;
        try {
          matched = pred(event, worker);
        } catch (error) {
          settle(() => reject(error));
          return;
        }
        if (matched) settle(() => resolve({ event, worker }));
      };
      this.listeners.add(listener);
      this.failureListeners.add(onFailure);
    });
  }

  /** Records the workload's first failure and rejects every pending `waitFor` with it. */
  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    for (const listener of [...this.failureListeners]) listener(error);
  }

  /**
   * Starts `count` processes (see {@link start}), waits until every one of
   * them is connected, then lets them all begin at once.
   */
  async launch(count: number, options: WorkloadOptions = {}, prefix = 'p', timeoutMs = 60_000): Promise<WorkerHandle[]> {
    const workers = this.start(count, options, prefix);
    const ready = (w: WorkerHandle) => w.events.some((e) => e.t === 'start');
    const deadline = Date.now() + timeoutMs;
    while (!workers.every(ready)) {
      if (this.failure) throw this.failure;
      const dead = workers.find((w) => w.child.exitCode !== null);
      if (dead) throw new Error(`worker ${dead.name} exited before starting: ${dead.stderr()}`);
      if (Date.now() > deadline) throw new Error(`workers did not start within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    for (const w of workers) w.child.send('go', () => undefined);
    return workers;
  }

  /** SIGKILLs a worker; its holds end at the time of the kill. */
  async kill(worker: WorkerHandle): Promise<number> {
    const at = Date.now();
    this.deaths.set(worker.name, at);
    worker.child.kill('SIGKILL');
    await worker.exited;
    return at;
  }

  /**
   * Shuts a worker down gracefully in the middle of its work (its
   * LockClient's close(), then its Redis client's quit(); see the worker's
   * 'shutdown'); resolves with its exit code once it has exited.
   */
  shutdown(worker: WorkerHandle): Promise<number | string> {
    worker.child.send('shutdown', () => undefined);
    return worker.exited;
  }

  /** Asks every live worker to stop starting operations (they then finish, close and exit). */
  stop(): void {
    this.stopping = true;
    for (const w of this.workers) if (w.child.connected) w.child.send('stop', () => undefined);
  }

  /**
   * Waits for every worker to exit, at most `timeoutMs` (then kills the rest
   * and rejects: a hang is a failure). Rejects if a worker that was not
   * killed on purpose exited with a non-zero code.
   */
  async finish(timeoutMs: number): Promise<History> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    const all = Promise.all(this.workers.map((w) => w.exited));
    const outcome = await Promise.race([all, timedOut]);
    clearTimeout(timer);
    if (this.failure) throw this.failure;
    if (outcome === 'timeout') {
      const stuck = this.workers.filter((w) => w.child.exitCode === null && w.child.signalCode === null);
      for (const w of stuck) w.child.kill('SIGKILL');
      throw new Error(`workers ${stuck.map((w) => w.name).join(', ')} did not finish within ${timeoutMs} ms`);
    }
    for (const [i, code] of outcome.entries()) {
      const w = this.workers[i]!;
      if (code !== 0 && !this.deaths.has(w.name)) throw new Error(`worker ${w.name} exited with ${code}: ${w.stderr()}`);
    }
    return this.history();
  }

  /** The history so far. */
  history(): History {
    return buildHistory(
      this.workers.flatMap((w) => w.events),
      this.deaths,
    );
  }

  /** Kills every worker still running (for after-hooks). */
  killAll(): void {
    this.stopping = true;
    for (const w of this.workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  }
}
