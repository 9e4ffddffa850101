/**
 * Module-level registry of every `redis-server` process this process started,
 * and the last-resort clean-up that keeps them from outliving it.
 *
 * - `process.on('exit')`: SIGKILL every registered pid and remove its temp dir,
 *   synchronously (nothing asynchronous can run in an exit handler).
 * - SIGINT / SIGTERM (listened to only while servers are registered): the same,
 *   then exit with 128 + the signal number, unless another listener for that
 *   signal exists. Then the process handles the signal itself, and stopping
 *   its servers and exiting are left to it, so it can shut down in order
 *   (let its clients release what they hold, then stop the servers); the
 *   exit hook still kills whatever it leaves running.
 * - Processes that died by SIGKILL cannot clean up; {@link reapStaleServers}
 *   (run once before the first server starts) kills servers whose owning
 *   process is gone, after checking on Linux that the pid really is that
 *   server (its working directory is the server's temp dir).
 *
 * The registry lives on `globalThis` under a `Symbol.for` key, so an ESM and a
 * CJS copy of this module loaded into one process share it.
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** What the registry needs to know about a started server. @internal */
export interface TrackedServer {
  /** Current pid, or undefined while no process is running. */
  readonly pid: number | undefined;
  /** The server's private temp dir (removed on clean-up). */
  readonly dir: string;
  /** Port, for diagnostics. */
  readonly port: number;
  /** Stops the server gracefully (SIGTERM, then SIGKILL), removes its dir. */
  stop(): Promise<void>;
}

/** A started server as reported by {@link runningServers}. */
export interface RunningServerInfo {
  /** Loopback port of the server. */
  readonly port: number;
  /** Pid of the `redis-server` process, or undefined if it is currently killed (and may be restarted). */
  readonly pid: number | undefined;
  /** The server's temp dir. */
  readonly dir: string;
}

/** Prefix of every temp dir the harness creates under `os.tmpdir()`: `redis-rwlock-<owner pid>-XXXXXX`. */
export const TEMP_DIR_PREFIX = 'redis-rwlock-';

/** Name of the file in each temp dir that records the owner pid and server pid. */
export const OWNER_FILE = 'owner.json';

/** A client the harness handed out (`client()` of a server or a Cluster): ended by {@link stopAllServers}. @internal */
export interface TrackedClient {
  disconnect(): void;
}

interface RegistryState {
  readonly servers: Set<TrackedServer>;
  /** Absent in a registry made by an older copy of this module sharing the process. */
  clients?: Set<TrackedClient>;
  /** The installed signal listener (shared, so any copy of this module can remove it). */
  signalListener: ((signal: NodeJS.Signals) => void) | undefined;
  exitHookInstalled: boolean;
  reaped: boolean;
}

const KEY = Symbol.for('redis-rwlock.testing.registry');
const globalStore = globalThis as typeof globalThis & { [KEY]?: RegistryState };
const state: RegistryState = (globalStore[KEY] ??= {
  servers: new Set(),
  clients: new Set(),
  signalListener: undefined,
  exitHookInstalled: false,
  reaped: false,
});

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/** Adds a server to the registry and makes sure the clean-up hooks are in place. @internal */
export function track(server: TrackedServer): void {
  state.servers.add(server);
  installExitHook();
  installSignalHooks();
}

/** Records a client handed out by a server or Cluster handle, until it ends. @internal */
export function trackClient(client: TrackedClient): void {
  (state.clients ??= new Set()).add(client);
}

/** Forgets a client that ended. @internal */
export function untrackClient(client: TrackedClient): void {
  state.clients?.delete(client);
}

/** Removes a server that has been stopped for good. @internal */
export function untrack(server: TrackedServer): void {
  state.servers.delete(server);
  if (state.servers.size === 0) removeSignalHooks();
}

/**
 * Lists the servers started by this process (through any of the `start*`
 * functions) that have not been stopped yet.
 */
export function runningServers(): RunningServerInfo[] {
  return [...state.servers].map((s) => ({ port: s.port, pid: s.pid, dir: s.dir }));
}

/**
 * Stops every server this process started and has not stopped yet (standalone
 * servers, Cluster nodes, independent masters), in parallel, after ending
 * every client their `client()` methods handed out (which would otherwise
 * try to reconnect, or refresh a Cluster's slots, for ever). Meant for a
 * root `afterAll` hook. Never rejects; failures to stop are reported on stderr
 * and the process is SIGKILLed instead.
 */
export async function stopAllServers(): Promise<void> {
  for (const client of state.clients ?? []) client.disconnect();
  state.clients?.clear();
  const servers = [...state.servers];
  await Promise.all(
    servers.map(async (s) => {
      try {
        await s.stop();
      } catch (err) {
        process.stderr.write(`redis-rwlock/testing: stopping redis-server on port ${s.port} failed: ${String(err)}\n`);
        killAndRemove(s);
        untrack(s);
      }
    }),
  );
}

/**
 * Kills `redis-server` processes and removes temp dirs left behind by earlier
 * processes that died without cleaning up (e.g. a test run killed with SIGKILL).
 *
 * Only dirs named `redis-rwlock-<pid>-*` under `os.tmpdir()` whose owner pid is
 * no longer alive are touched. A recorded server pid is killed only when its
 * identity can be verified (Linux: `/proc/<pid>/cwd` is that dir, since
 * `redis-server` changes into its `--dir`). Runs once per process on its own
 * before the first server starts; calling it again is harmless.
 *
 * @returns the number of stale server processes killed
 */
export function reapStaleServers(): number {
  state.reaped = true;
  let killed = 0;
  const tmp = os.tmpdir();
  let entries: string[];
  try {
    entries = readdirSync(tmp);
  } catch {
    return 0;
  }
  for (const name of entries) {
    const match = /^redis-rwlock-(\d+)-/.exec(name);
    if (!match) continue;
    const ownerPid = Number(match[1]);
    if (ownerPid === process.pid || isAlive(ownerPid)) continue;
    const dir = path.join(tmp, name);
    try {
      const serverPid = readServerPid(dir);
      if (serverPid !== undefined && isAlive(serverPid)) {
        if (!isServerInDir(serverPid, dir)) continue; // cannot verify: leave it alone
        process.kill(serverPid, 'SIGKILL');
        killed++;
      }
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // Another process may be reaping the same dir; not our concern.
    }
  }
  return killed;
}

/** Runs {@link reapStaleServers} once per process. @internal */
export function reapStaleServersOnce(): void {
  if (!state.reaped) reapStaleServers();
}

function readServerPid(dir: string): number | undefined {
  const file = path.join(dir, OWNER_FILE);
  if (!existsSync(file)) return undefined;
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as { serverPid?: unknown };
  return typeof parsed.serverPid === 'number' ? parsed.serverPid : undefined;
}

function isServerInDir(pid: number, dir: string): boolean {
  try {
    return readlinkSync(`/proc/${pid}/cwd`) === dir;
  } catch {
    return false;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function killAndRemove(server: TrackedServer): void {
  const pid = server.pid;
  if (pid !== undefined) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  try {
    rmSync(server.dir, { recursive: true, force: true });
  } catch {
    // best effort
  }
}

function killAllSync(): void {
  for (const server of state.servers) killAndRemove(server);
  state.servers.clear();
}

function installExitHook(): void {
  if (state.exitHookInstalled) return;
  state.exitHookInstalled = true;
  process.on('exit', killAllSync);
}

function onSignal(signal: NodeJS.Signals): void {
  // Someone else listens for this signal: they decide whether and how to shut
  // down, and the exit hook remains the last resort.
  if (process.listenerCount(signal) > 1) return;
  killAllSync();
  removeSignalHooks();
  process.exit(128 + (os.constants.signals[signal] ?? 0));
}

function installSignalHooks(): void {
  if (state.signalListener) return;
  state.signalListener = onSignal;
  for (const signal of SIGNALS) process.on(signal, onSignal);
}

function removeSignalHooks(): void {
  const listener = state.signalListener;
  if (!listener) return;
  state.signalListener = undefined;
  for (const signal of SIGNALS) process.off(signal, listener);
}
