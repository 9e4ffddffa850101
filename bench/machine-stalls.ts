/**
 * Watches for moments the machine runs nothing of ours: a worker thread (its
 * own heap, so the main thread's GC does not pause it) sets a 1 ms timer again
 * and again and notes every gap longer than a threshold. On a shared VM the
 * host takes the CPUs away now and then (here: ~13 gaps over 4 ms in 10 s with
 * the machine idle, the longest 14 ms); a race waiter whose wait spans two of
 * them waits twice as long, in whatever order the lock is handed on.
 */
import { Worker } from 'node:worker_threads';

export interface MachineStalls {
  /** Gaps longer than the threshold inside the window. */
  readonly count: number;
  readonly longestMs: number | null;
}

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const gaps = [];
let last = performance.now();
const tick = () => {
  const now = performance.now();
  if (now - last > workerData.thresholdMs) gaps.push([performance.timeOrigin + last, now - last]);
  last = now;
  timer = setTimeout(tick, 1);
};
let timer = setTimeout(tick, 1);
parentPort.once('message', () => {
  clearTimeout(timer);
  parentPort.postMessage(gaps);
});
`;

/** Starts watching; `stop(from, to)` ends it and counts the gaps that overlap [from, to] (performance.now() times). */
export function watchMachineStalls(thresholdMs = 4): { stop(from: number, to: number): Promise<MachineStalls> } {
  const worker = new Worker(WORKER, { eval: true, workerData: { thresholdMs } });
  worker.unref();
  return {
    async stop(from, to) {
      const gaps = await new Promise<[number, number][]>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
        worker.postMessage('stop');
      });
      await worker.terminate();
      const origin = performance.timeOrigin;
      const inWindow = gaps.filter(([at, ms]) => at - origin + ms >= from && at - origin <= to).map(([, ms]) => ms);
      return { count: inWindow.length, longestMs: inWindow.length > 0 ? Math.max(...inWindow) : null };
    },
  };
}
