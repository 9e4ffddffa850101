/**
 * One `redis-server` child process on a loopback port, for tests.
 *
 * The server runs with its configuration on the command line (no config
 * file), no persistence, in its own temp dir under `os.tmpdir()`, and logs to
 * `redis.log` in that dir. Every server is registered so that it is killed
 * when this process exits, however it exits (see `registry.ts`).
 *
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { adminCommand, sleep, withAdminConnection } from './admin.js';
import { findFreePort, LOOPBACK_HOST, releasePort, reservePort } from './ports.js';
import {
  OWNER_FILE,
  reapStaleServersOnce,
  TEMP_DIR_PREFIX,
  type TrackedServer,
  track,
  trackClient,
  untrack,
  untrackClient,
} from './registry.js';
import { makeTestCertificates, type TestCertificates, type TlsEndpoint, tlsServerArgs } from './tls.js';

/** Default time allowed for a server to answer PING after it was spawned. */
export const DEFAULT_START_TIMEOUT_MS = 10_000;

/** Default grace period between SIGTERM and SIGKILL when a server is stopped. */
export const DEFAULT_STOP_TIMEOUT_MS = 5_000;

/** How often a server started on a port found free is retried on another port when that port was taken meanwhile. */
const PORT_RETRIES = 5;

const LOG_FILE = 'redis.log';

/** Signals after which {@link RedisServerHandle.kill} waits for the process to exit. */
const TERMINATING_SIGNALS: ReadonlySet<NodeJS.Signals> = new Set(['SIGKILL', 'SIGTERM', 'SIGINT', 'SIGQUIT', 'SIGHUP', 'SIGABRT']);

/** Options for {@link startRedisServer}. */
export interface RedisServerOptions {
  /**
   * Port to listen on (127.0.0.1 only). By default a free port is chosen, and
   * another one is tried if that port is taken before the server binds it.
   */
  port?: number;
  /**
   * Extra `redis-server` arguments, appended after the harness's own, e.g.
   * `['--maxmemory', '10mb']`. A later argument overrides an earlier one.
   */
  args?: readonly string[];
  /**
   * The `redis-server` binary.
   * @defaultValue `process.env.REDIS_SERVER_BIN`, else `redis-server` on PATH
   */
  bin?: string;
  /**
   * Also listen with TLS, on a second port ({@link RedisServerHandle.tls}),
   * with a CA and certificate made for this server by `openssl` in its temp
   * dir. The plain port stays open: the harness and `client()` use it.
   * @defaultValue false
   */
  tls?: boolean;
  /**
   * ACL users besides `default` (which stays passwordless, for the harness):
   * written to an ACL file in the server's temp dir, so no password is in
   * the server's command line, and kept across restarts.
   */
  users?: readonly AclUser[];
  /**
   * How long to wait for the server to answer PING with PONG.
   * @defaultValue 10000
   */
  startTimeoutMs?: number;
  /**
   * Grace period between SIGTERM and SIGKILL in {@link RedisServerHandle.stop}
   * and {@link RedisServerHandle.restart}.
   * @defaultValue 5000
   */
  stopTimeoutMs?: number;
}

/** An ACL user of a test server, e.g. `{ name: 'app', password: 'pw', rules: ['~app:*', '&app:*', '+@all'] }`. */
export interface AclUser {
  /** The user name. */
  readonly name: string;
  /** Its password (written to the ACL file, never to the command line). */
  readonly password: string;
  /** ACL rules after `on >password`, as `ACL SETUSER` takes them. */
  readonly rules: readonly string[];
}

/** Options for the `flush()` method of the handles. */
export interface FlushOptions {
  /**
   * Also run `SCRIPT FLUSH`, so the next EVALSHA of every script answers NOSCRIPT.
   * @defaultValue false
   */
  scripts?: boolean;
}

/**
 * A running (or killed, and restartable) `redis-server` child process.
 *
 * Dispose it with `await using server = await startRedisServer()` or call
 * {@link RedisServerHandle.stop}.
 */
export interface RedisServerHandle extends AsyncDisposable {
  /** Always `'127.0.0.1'`. */
  readonly host: string;
  /** The server's port; stays the same across {@link RedisServerHandle.restart}. */
  readonly port: number;
  /** Pid of the most recently started `redis-server` process (it changes on restart). */
  readonly pid: number;
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string;
  /** With `tls: true`: the TLS port, its `rediss://` URL and the certificates (give clients `tls: { ca }`). */
  readonly tls: TlsEndpoint | undefined;
  /** The server's private temp dir (its `--dir`); removed by {@link RedisServerHandle.stop}. */
  readonly dir: string;
  /** True while the process is running (false after kill or stop). */
  readonly running: boolean;
  /**
   * A new ioredis `Redis` client connected to this server. Clients made here
   * that are still open when the server is stopped are disconnected then, so a
   * forgotten client cannot keep reconnecting (and keep the process alive).
   * They are left alone by `kill()` and `restart()`, so tests can watch them
   * reconnect.
   *
   * @param options - any ioredis options; `host` and `port` are always this server's
   */
  client(options?: RedisOptions): Redis;
  /**
   * Stops the server for good: disconnects the clients made by
   * {@link RedisServerHandle.client}, sends SIGTERM, SIGKILL after the grace
   * period, waits for the process to exit and removes the temp dir.
   * Idempotent; concurrent calls share one stop.
   */
  stop(): Promise<void>;
  /**
   * Sends `signal` to the server's pid. For terminating signals (SIGKILL,
   * SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGABRT) resolves once the process has
   * exited; the temp dir is kept so {@link RedisServerHandle.restart} can start
   * the server again. Does nothing if the process is not running.
   *
   * @param signal - defaults to `'SIGKILL'` (a crash: no shutdown, no goodbye to clients)
   */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /**
   * Freezes the server with SIGSTOP: connections stay open but nothing is
   * answered, as with a hung host or a long GC pause. Undo with {@link RedisServerHandle.resume}.
   */
  pause(): Promise<void>;
  /** Resumes a server frozen by {@link RedisServerHandle.pause} (SIGCONT). */
  resume(): Promise<void>;
  /**
   * Starts the server again on the same port and dir, stopping it first
   * (SIGTERM, then SIGKILL) if it is still running; resolves when it answers
   * PING. Data is not persisted, so a restarted standalone server is empty; a
   * Cluster node keeps its node id and rejoins from its `nodes-<port>.conf`.
   */
  restart(): Promise<void>;
  /** `FLUSHALL` (and `SCRIPT FLUSH` with `{ scripts: true }`). */
  flush(options?: FlushOptions): Promise<void>;
  /** The server's log output so far (also after stop; useful in failure messages). */
  logs(): string;
}

/** Thrown when a `redis-server` process does not start or does not answer PING in time. */
export class RedisServerStartError extends Error {
  /** The port the server was started on. */
  readonly port: number;
  /** The server's log output (stdout and stderr). */
  readonly log: string;

  /**
   * @param message - what went wrong (the log is appended)
   * @param port - the port the server was started on
   * @param log - the server's log output
   * @param options - `cause`
   */
  constructor(message: string, port: number, log: string, options?: ErrorOptions) {
    super(
      log.trim() === '' ? `${message} (the server wrote no log output)` : `${message}\n--- redis-server log ---\n${tail(log)}`,
      options,
    );
    this.name = 'RedisServerStartError';
    this.port = port;
    this.log = log;
  }
}

/**
 * Starts a standalone `redis-server` on a free loopback port and resolves once
 * it answers PING with PONG.
 *
 * @example
 * ```ts
 * import { startRedisServer } from 'redis-rwlock/testing';
 * await using server = await startRedisServer();
 * const redis = server.client();
 * await redis.set('k', 'v');
 * ```
 *
 * @param options - see {@link RedisServerOptions}
 * @throws {@link RedisServerStartError} when the server exits early or does not
 *   answer in time (the message includes its log output); an `Error` when the
 *   binary cannot be run
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServerHandle> {
  return launchRedisServer(options, { busPort: false, harnessArgs: [] }, (init) => new RedisServerProcess(init));
}

/** How {@link launchRedisServer} should build the server. @internal */
export interface LaunchSpec {
  /** The chosen port also needs its cluster bus port (port + 10000) free. */
  readonly busPort: boolean;
  /** Arguments added after the common ones, before the user's `args`. */
  readonly harnessArgs: readonly string[] | ((port: number) => readonly string[]);
  /** With `tls`: certificates shared by several servers (a Cluster's nodes); else each server makes its own. */
  readonly certificates?: TestCertificates;
  /** A Cluster node: its bus and replication use TLS too. */
  readonly clusterNode?: boolean;
}

/** Everything a {@link RedisServerProcess} is built from. @internal */
export interface ServerInit {
  readonly port: number;
  readonly dir: string;
  readonly bin: string;
  readonly args: readonly string[];
  readonly startTimeoutMs: number;
  readonly stopTimeoutMs: number;
  readonly tls?: TlsEndpoint | undefined;
}

/**
 * Picks a port, creates the temp dir, spawns the server and waits for PONG;
 * retries on another port if an automatically chosen one was taken meanwhile.
 * @internal
 */
export async function launchRedisServer<T extends RedisServerProcess>(
  options: RedisServerOptions,
  spec: LaunchSpec,
  create: (init: ServerInit) => T,
): Promise<T> {
  reapStaleServersOnce();
  const fixedPort = options.port;
  if (fixedPort !== undefined && (!Number.isInteger(fixedPort) || fixedPort < 1 || fixedPort > 65_535)) {
    throw new RangeError(`startRedisServer: port must be an integer in 1-65535, got ${fixedPort}`);
  }
  const bin = options.bin ?? process.env.REDIS_SERVER_BIN ?? 'redis-server';
  for (let attempt = 1; ; attempt++) {
    let port: number;
    if (fixedPort !== undefined) {
      port = fixedPort;
      reservePort(port, spec.busPort);
    } else {
      port = await findFreePort({ busPort: spec.busPort });
    }
    const dir = await mkdtemp(path.join(os.tmpdir(), `${TEMP_DIR_PREFIX}${process.pid}-`));
    const harnessArgs = typeof spec.harnessArgs === 'function' ? spec.harnessArgs(port) : spec.harnessArgs;
    const extraArgs: string[] = [];
    let tls: TlsEndpoint | undefined;
    if (options.tls) {
      const tlsPort = await findFreePort();
      const certificates = spec.certificates ?? makeTestCertificates(path.join(dir, 'tls'));
      tls = { ...certificates, port: tlsPort, url: `rediss://${LOOPBACK_HOST}:${tlsPort}` };
      extraArgs.push(...tlsServerArgs(tlsPort, certificates, spec.clusterNode === true));
    }
    if (options.users && options.users.length > 0) {
      // The default user stays as it is (on, nopass, everything), for the harness.
      const lines = [
        'user default on nopass ~* &* +@all',
        ...options.users.map((u) => `user ${u.name} on >${u.password} ${u.rules.join(' ')}`),
      ];
      writeFileSync(path.join(dir, 'users.acl'), `${lines.join('\n')}\n`, { mode: 0o600 });
      extraArgs.push('--aclfile', path.join(dir, 'users.acl'));
    }
    const server = create({
      port,
      dir,
      bin,
      args: [...baseArgs(port, dir), ...harnessArgs, ...extraArgs, ...(options.args ?? [])],
      startTimeoutMs: options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS,
      stopTimeoutMs: options.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS,
      tls,
    });
    try {
      await server.boot();
      return server;
    } catch (err) {
      await server.stop();
      const portTaken = err instanceof RedisServerStartError && /address already in use/i.test(err.log);
      if (portTaken && fixedPort === undefined && attempt < PORT_RETRIES) continue;
      throw err;
    }
  }
}

/** The arguments every harness server gets. */
function baseArgs(port: number, dir: string): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    LOOPBACK_HOST,
    '--save',
    '',
    '--appendonly',
    'no',
    '--protected-mode',
    'no',
    '--dir',
    dir,
    '--daemonize',
    'no',
    '--logfile',
    '',
  ];
}

/**
 * The implementation behind {@link RedisServerHandle}; Cluster nodes extend it.
 * @internal
 */
export class RedisServerProcess implements RedisServerHandle {
  readonly host = LOOPBACK_HOST;
  readonly port: number;
  readonly dir: string;
  readonly url: string;
  readonly tls: TlsEndpoint | undefined;
  readonly #bin: string;
  readonly #args: readonly string[];
  readonly #startTimeoutMs: number;
  readonly #stopTimeoutMs: number;
  readonly #clients = new Set<Redis>();
  readonly #tracked: TrackedServer;
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #running = false;
  #pid = 0;
  #stopping: Promise<void> | undefined;
  #finalLog: string | undefined;

  constructor(init: ServerInit) {
    this.port = init.port;
    this.dir = init.dir;
    this.url = `redis://${LOOPBACK_HOST}:${init.port}`;
    this.tls = init.tls;
    this.#bin = init.bin;
    this.#args = init.args;
    this.#startTimeoutMs = init.startTimeoutMs;
    this.#stopTimeoutMs = init.stopTimeoutMs;
    const self = this;
    this.#tracked = {
      get pid() {
        return self.#running ? self.#pid : undefined;
      },
      dir: init.dir,
      port: init.port,
      stop: () => self.stop(),
    };
    track(this.#tracked);
  }

  get pid(): number {
    return this.#pid;
  }

  get running(): boolean {
    return this.#running;
  }

  /** Spawns the process and waits until it answers PING. @internal */
  async boot(): Promise<void> {
    const logFd = openSync(path.join(this.dir, LOG_FILE), 'a');
    let child: ChildProcess;
    try {
      // Output goes to a file, not a pipe: no handle keeps this process alive, nothing to drain.
      child = spawn(this.#bin, this.#args, { cwd: this.dir, stdio: ['ignore', logFd, logFd] });
    } finally {
      closeSync(logFd);
    }
    this.#child = child;
    let exitInfo: string | undefined;
    let spawnError: Error | undefined;
    this.#exited = new Promise<void>((resolve) => {
      child.once('error', (err) => {
        spawnError = err;
        exitInfo ??= `could not be run (${err.message})`;
        if (child.pid === undefined) resolve();
      });
      child.once('exit', (code, signal) => {
        exitInfo = signal ? `was killed by ${signal}` : `exited with code ${code}`;
        if (this.#child === child) this.#running = false;
        resolve();
      });
    });
    if (child.pid === undefined) {
      await this.#exited;
      throw new Error(
        `redis-rwlock/testing: cannot run the redis-server binary "${this.#bin}" (${spawnError?.message ?? 'no pid'}). ` +
          'Install Redis >= 7 (scripts/ensure-redis.sh does it on Debian) or set REDIS_SERVER_BIN to the binary.',
        { cause: spawnError },
      );
    }
    // A forgotten server must not keep the process alive; the exit hook kills it.
    child.unref();
    this.#pid = child.pid;
    this.#running = true;
    writeFileSync(path.join(this.dir, OWNER_FILE), JSON.stringify({ ownerPid: process.pid, serverPid: child.pid, port: this.port }));

    const deadline = Date.now() + this.#startTimeoutMs;
    for (;;) {
      if (exitInfo !== undefined) {
        await this.#exited;
        throw new RedisServerStartError(
          `redis-server on ${LOOPBACK_HOST}:${this.port} ${exitInfo} before it answered PING.`,
          this.port,
          this.logs(),
        );
      }
      try {
        if ((await adminCommand(this.port, 'PING', [], 1_000)) === 'PONG') return;
      } catch {
        // not listening yet (or still loading)
      }
      if (Date.now() > deadline) {
        throw new RedisServerStartError(
          `redis-server on ${LOOPBACK_HOST}:${this.port} (pid ${child.pid}) did not answer PING within ${this.#startTimeoutMs} ms.`,
          this.port,
          this.logs(),
        );
      }
      await sleep(20);
    }
  }

  client(options: RedisOptions = {}): Redis {
    this.#assertNotStopped('client');
    const client = new Redis({ ...options, host: LOOPBACK_HOST, port: this.port });
    this.#clients.add(client);
    trackClient(client);
    client.once('end', () => {
      this.#clients.delete(client);
      untrackClient(client);
    });
    return client;
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      for (const client of this.#clients) client.disconnect();
      this.#clients.clear();
      await this.#terminate();
      this.#finalLog = this.logs();
      rmSync(this.dir, { recursive: true, force: true });
      untrack(this.#tracked);
      releasePort(this.port);
      if (this.tls) releasePort(this.tls.port);
    })();
    return this.#stopping;
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    this.#assertNotStopped('kill');
    const child = this.#child;
    if (!child || !this.#running) return;
    if (signal === 'SIGKILL' || signal === 'SIGTERM') send(child, 'SIGCONT'); // a paused server must see it at once
    send(child, signal);
    if (TERMINATING_SIGNALS.has(signal)) await this.#waitForExit(child);
  }

  pause(): Promise<void> {
    return this.kill('SIGSTOP');
  }

  resume(): Promise<void> {
    return this.kill('SIGCONT');
  }

  async restart(): Promise<void> {
    this.#assertNotStopped('restart');
    await this.#terminate();
    await this.boot();
  }

  async flush(options: FlushOptions = {}): Promise<void> {
    await withAdminConnection(this.port, async (conn) => {
      await conn.flushall();
      if (options.scripts) await conn.script('FLUSH');
    });
  }

  logs(): string {
    if (this.#finalLog !== undefined) return this.#finalLog;
    try {
      return readFileSync(path.join(this.dir, LOG_FILE), 'utf8');
    } catch {
      return '';
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  /** SIGTERM, SIGKILL after the grace period, resolves when the process has exited. */
  async #terminate(): Promise<void> {
    const child = this.#child;
    if (!child || !this.#running) return;
    send(child, 'SIGCONT');
    send(child, 'SIGTERM');
    const timer = setTimeout(() => send(child, 'SIGKILL'), this.#stopTimeoutMs);
    try {
      await this.#waitForExit(child);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits for `child` to exit, holding a reference so this process stays alive meanwhile. */
  async #waitForExit(child: ChildProcess): Promise<void> {
    child.ref();
    try {
      await this.#exited;
    } finally {
      child.unref();
    }
  }

  #assertNotStopped(method: string): void {
    if (this.#stopping) throw new Error(`redis-server on port ${this.port} has been stopped; ${method}() is not possible any more`);
  }
}

/**
 * Sends `signal` to a server process that has not exited yet (the caller
 * checks), by its pid: Deno's `ChildProcess.kill()` sends only the first
 * signal of a child's life and makes every later call a no-op (it sets
 * `killed` and returns), so `SIGCONT` then `SIGTERM` never stopped a server
 * there. Node and Bun send every signal either way.
 */
function send(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(child.pid, signal);
  } catch {
    // exited meanwhile (ESRCH)
  }
}

/** The last lines of a log, so error messages stay readable. */
function tail(log: string, lines = 60): string {
  const all = log.trimEnd().split('\n');
  return (all.length > lines ? [`... (${all.length - lines} earlier lines)`, ...all.slice(-lines)] : all).join('\n');
}
