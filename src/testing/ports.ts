/**
 * Free loopback ports for test servers.
 *
 * Ports are probed by binding a throw-away TCP server on 127.0.0.1. Candidates
 * are drawn at random from below the kernel's ephemeral range, so a port handed
 * out here is not also picked as the source port of some outgoing connection in
 * the moment between the probe and `redis-server` binding it. A Redis Cluster
 * node also needs its cluster bus port (port + 10000), so `busPort: true` probes
 * both. Ports handed out by this process stay reserved until released, so
 * concurrent calls never return the same port twice.
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';

/** The only address the harness ever binds or connects to. */
export const LOOPBACK_HOST = '127.0.0.1';

/** Offset of a Redis Cluster node's bus port from its client port (Redis's fixed default). */
export const CLUSTER_BUS_PORT_OFFSET = 10_000;

/** Well-known Redis ports that are never handed out (a system Redis or Sentinel may own them). */
const NEVER = new Set([6379, 16379, 26379]);

/** Lowest candidate port: clear of the privileged range and of most well-known services. */
const LOWEST = 10_000;

/** Ports handed out by this process and not yet released. */
const reserved = new Set<number>();

/** Options for {@link findFreePort} and {@link findFreePorts}. */
export interface FindFreePortOptions {
  /**
   * Also require port + 10000 (the Redis Cluster bus port) to be free.
   * @defaultValue false
   */
  busPort?: boolean;
  /** Ports that must not be returned, in addition to those already reserved by this process. */
  exclude?: Iterable<number>;
  /**
   * How many random candidates to probe before giving up.
   * @defaultValue 200
   */
  attempts?: number;
}

/**
 * Resolves `true` when a TCP server can bind `port` on 127.0.0.1 right now.
 *
 * The answer can be stale by the time the caller binds the port; the server
 * starters retry with another port when that happens.
 *
 * @param port - the port to probe (1-65535)
 */
export function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.unref();
    probe.once('error', () => resolve(false));
    probe.listen({ port, host: LOOPBACK_HOST, exclusive: true }, () => {
      probe.close(() => resolve(true));
    });
  });
}

/**
 * Finds one free loopback port and reserves it for this process.
 *
 * Never returns 6379, 16379 or 26379, nor a port already reserved by this process.
 *
 * @param options - see {@link FindFreePortOptions}
 * @returns a port whose (and, with `busPort`, whose bus port's) bind probe succeeded
 * @throws Error when no free port was found within `attempts` probes
 */
export async function findFreePort(options: FindFreePortOptions = {}): Promise<number> {
  const [port] = await findFreePorts(1, options);
  return port!;
}

/**
 * Finds `count` distinct free loopback ports and reserves them for this process.
 *
 * @param count - how many ports
 * @param options - see {@link FindFreePortOptions}; with `busPort`, no returned
 *   port is another returned port's bus port
 * @throws Error when not enough free ports were found within `attempts` probes each
 */
export async function findFreePorts(count: number, options: FindFreePortOptions = {}): Promise<number[]> {
  if (!Number.isInteger(count) || count < 0) throw new RangeError(`findFreePorts: count must be a non-negative integer, got ${count}`);
  const busPort = options.busPort ?? false;
  const attempts = options.attempts ?? 200;
  const exclude = new Set(options.exclude ?? []);
  const [low, high] = candidateRange(busPort);
  const found: number[] = [];
  try {
    for (let i = 0; i < count; i++) {
      let port: number | undefined;
      for (let attempt = 0; attempt < attempts && port === undefined; attempt++) {
        const candidate = low + Math.floor(Math.random() * (high - low + 1));
        if (!usable(candidate, busPort, exclude)) continue;
        // Reserve before the async probe, so concurrent callers skip this candidate.
        claim(candidate, busPort);
        const free = (await isPortFree(candidate)) && (!busPort || (await isPortFree(candidate + CLUSTER_BUS_PORT_OFFSET)));
        if (free) port = candidate;
        else release(candidate, busPort);
      }
      if (port === undefined) {
        throw new Error(
          `findFreePorts: no free loopback port${busPort ? ' with a free bus port (port + 10000)' : ''} found in ${low}-${high} after ${attempts} attempts`,
        );
      }
      found.push(port);
    }
    return found;
  } catch (err) {
    for (const port of found) release(port, busPort);
    throw err;
  }
}

/**
 * Gives a port (and its bus port, if it was reserved with one) back, so this
 * process may hand it out again. Called by the server handles when they stop for good.
 * @internal
 */
export function releasePort(port: number): void {
  release(port, reserved.has(port + CLUSTER_BUS_PORT_OFFSET));
}

/**
 * Marks a caller-chosen port as in use by this process.
 * @internal
 */
export function reservePort(port: number, busPort = false): void {
  claim(port, busPort);
}

function usable(port: number, busPort: boolean, exclude: ReadonlySet<number>): boolean {
  const ports = busPort ? [port, port + CLUSTER_BUS_PORT_OFFSET] : [port];
  return ports.every((p) => p <= 65_535 && !NEVER.has(p) && !reserved.has(p) && !exclude.has(p));
}

function claim(port: number, busPort: boolean): void {
  reserved.add(port);
  if (busPort) reserved.add(port + CLUSTER_BUS_PORT_OFFSET);
}

function release(port: number, busPort: boolean): void {
  reserved.delete(port);
  if (busPort) reserved.delete(port + CLUSTER_BUS_PORT_OFFSET);
}

/**
 * The candidate range: from {@link LOWEST} up to just below the ephemeral range
 * (read from /proc on Linux, 32768 elsewhere), with room for the bus port when
 * asked. Falls back to the whole unprivileged range when that leaves too little.
 */
function candidateRange(busPort: boolean): [number, number] {
  const ephemeralLow = ephemeralRangeStart();
  const top = ephemeralLow - 1 - (busPort ? CLUSTER_BUS_PORT_OFFSET : 0);
  if (top - LOWEST >= 1_000) return [LOWEST, top];
  return [LOWEST, 65_535 - (busPort ? CLUSTER_BUS_PORT_OFFSET : 0)];
}

function ephemeralRangeStart(): number {
  try {
    const text = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8');
    const low = Number.parseInt(text.trim().split(/\s+/)[0] ?? '', 10);
    if (Number.isInteger(low) && low > 1024) return low;
  } catch {
    // Not Linux: macOS and Windows start their ephemeral ranges at 49152, Linux's default is 32768.
  }
  return 32_768;
}
