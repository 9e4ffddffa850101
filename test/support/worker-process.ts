import { spawn } from 'node:child_process';
import { bundled } from './bundled.js';

/**
 * Runs `worker` (a .ts entry under test/workers, bundled) as a process of
 * its own, with `env` on top of this process's, and resolves with the last
 * line it prints, parsed as JSON: its result. Rejects with its stderr if it
 * fails (named `name` in the message); with `killAfterMs`, kills it then (a
 * worker that never ends would keep mocha from ending); with `signal`, kills
 * it when that aborts.
 */
export function runWorkerProcess<T>(
  worker: string,
  env: Record<string, string>,
  { killAfterMs, name = 'worker', signal }: { killAfterMs?: number; name?: string; signal?: AbortSignal } = {},
): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bundled(worker)], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      killSignal: 'SIGKILL',
      ...(signal ? { signal } : {}),
    });
    child.on('error', () => undefined); // an abort: 'exit' follows, and rejects
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const kill = killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    child.on('exit', (code, signal) => {
      clearTimeout(kill);
      if (code === 0) resolve(JSON.parse(out.trim().split('\n').pop()!) as T);
      else reject(new Error(`${name} exited ${code ?? signal}: ${err}`));
    });
  });
}
