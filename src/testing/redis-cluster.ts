/**
 * A real Redis Cluster of `redis-server` child processes on loopback ports,
 * for tests: creation with `redis-cli --cluster create`, a strict readiness
 * check, slot lookups and fault injection (killing a master, manual failover).
 *
 * @module
 */
import { execFile } from 'node:child_process';
import { Cluster, type ClusterOptions, type Redis } from 'ioredis';
import { sleep, withAdminConnection, parseInfo } from './admin.js';
import { LOOPBACK_HOST } from './ports.js';
import {
  DEFAULT_START_TIMEOUT_MS,
  launchRedisServer,
  RedisServerProcess,
  type FlushOptions,
  type RedisServerHandle,
  type RedisServerOptions,
  type ServerInit,
} from './redis-server.js';

/** Number of hash slots in a Redis Cluster. */
export const CLUSTER_SLOTS = 16_384;

/** Default `cluster-node-timeout` of harness clusters, in milliseconds. */
export const DEFAULT_CLUSTER_NODE_TIMEOUT_MS = 2_000;

/** Default time allowed for the whole cluster to start and settle. */
export const DEFAULT_CLUSTER_START_TIMEOUT_MS = 30_000;

/** Default time allowed for a failover to complete and the cluster to settle. */
export const DEFAULT_FAILOVER_TIMEOUT_MS = 30_000;

/** Options for {@link startRedisCluster}. */
export interface RedisClusterOptions {
  /**
   * Number of masters (slot owners). `redis-cli --cluster create` needs at least 3.
   * @defaultValue 3
   */
  masters?: number;
  /**
   * Replicas of each master.
   * @defaultValue 1
   */
  replicasPerMaster?: number;
  /**
   * `cluster-node-timeout`: how long a node may be unreachable before it is
   * considered failing. A failover by {@link RedisClusterHandle.killMaster}
   * takes about 1.5x-2x this plus up to a second of election delay. Small
   * values make failover tests quick, but on a starved machine too small a
   * value causes failovers nobody asked for.
   * @defaultValue 2000
   */
  nodeTimeoutMs?: number;
  /**
   * `cluster-require-full-coverage`. With `false` (the default) the masters
   * that are up keep serving their slots while another master is down, so a
   * fault test on one shard does not make every key unavailable. With `true`
   * every node refuses all queries (CLUSTERDOWN) until the failover completes.
   * @defaultValue false
   */
  requireFullCoverage?: boolean;
  /** Extra `redis-server` arguments for every node (appended last). */
  args?: readonly string[];
  /**
   * The `redis-server` binary.
   * @defaultValue `process.env.REDIS_SERVER_BIN`, else `redis-server` on PATH
   */
  bin?: string;
  /**
   * The `redis-cli` binary used for `--cluster create`.
   * @defaultValue `process.env.REDIS_CLI_BIN`, else `redis-cli` on PATH
   */
  cliBin?: string;
  /**
   * Time allowed for all nodes to start, the cluster to be created and every
   * node to agree on it.
   * @defaultValue 30000
   */
  startTimeoutMs?: number;
  /**
   * Grace period between SIGTERM and SIGKILL when nodes are stopped.
   * @defaultValue 5000
   */
  stopTimeoutMs?: number;
}

/** A node's role in the cluster. */
export type ClusterRole = 'master' | 'replica';

/**
 * One node of a harness cluster: a {@link RedisServerHandle} plus what the
 * harness last observed about its place in the cluster. The observed fields
 * are refreshed whenever the harness checks the cluster (at startup, by
 * `waitForClusterOk`, `killMaster`, `manualFailover`, `failover` and
 * `restartNode`), not continuously.
 */
export interface RedisClusterNode extends RedisServerHandle {
  /** The node's role as last observed. */
  readonly role: ClusterRole;
  /** The node's cluster node id (40 hex characters); it survives restarts. */
  readonly nodeId: string;
  /** For a replica, the port of its master as last observed; undefined for a master. */
  readonly masterPort: number | undefined;
}

/** Outcome of a failover. */
export interface FailoverResult {
  /** The replica that became master. */
  readonly promoted: RedisClusterNode;
  /** The master that was replaced. */
  readonly replaced: RedisClusterNode;
  /** Milliseconds from the kill (or `CLUSTER FAILOVER`) until every live node agreed on the new slot map. */
  readonly elapsedMs: number;
}

/** Options for {@link RedisClusterHandle.waitForClusterOk}. */
export interface WaitForClusterOkOptions {
  /**
   * Give up after this long.
   * @defaultValue 30000
   */
  timeoutMs?: number;
  /**
   * Also wait until every live replica's link to its master is up (initial
   * sync done), so a replica is ready to take over.
   * @defaultValue true
   */
  replicasInSync?: boolean;
}

/** Options for {@link RedisClusterHandle.killMaster}, {@link RedisClusterHandle.manualFailover} and {@link RedisClusterHandle.failover}. */
export interface FailoverOptions {
  /**
   * Give up waiting for the cluster to settle after this long.
   * @defaultValue 30000
   */
  timeoutMs?: number;
}

/** Options for {@link RedisClusterHandle.manualFailover}. */
export interface ManualFailoverOptions extends FailoverOptions {
  /**
   * `CLUSTER FAILOVER` variant: `'default'` (coordinated with the master, no
   * writes lost), `'force'` (without the master's agreement) or `'takeover'`
   * (without any agreement, bumps the epoch on its own).
   * @defaultValue 'default'
   */
  mode?: 'default' | 'force' | 'takeover';
}

/**
 * A running Redis Cluster of harness-managed `redis-server` processes.
 *
 * Dispose it with `await using cluster = await startRedisCluster()` or call
 * {@link RedisClusterHandle.stop}.
 */
export interface RedisClusterHandle extends AsyncDisposable {
  /** Every node, in the order given to `redis-cli --cluster create` (masters first at creation). */
  readonly nodes: readonly RedisClusterNode[];
  /** `{ host, port }` of every node, for `new Cluster(startupNodes, ...)`. */
  readonly startupNodes: readonly {
    /** Always `'127.0.0.1'`. */
    readonly host: string;
    /** The node's port. */
    readonly port: number;
  }[];
  /** The cluster's `cluster-node-timeout` in milliseconds. */
  readonly nodeTimeoutMs: number;
  /**
   * A new ioredis `Cluster` client. Defaults: `scaleReads: 'master'`,
   * `slotsRefreshTimeout: 2000`; `options` override them and `redisOptions` is
   * passed through. Clients made here are disconnected by {@link RedisClusterHandle.stop}.
   *
   * @param options - any ioredis Cluster options
   */
  client(options?: ClusterOptions): Cluster;
  /**
   * The node listening on `port`.
   * @throws Error if no node of this cluster has that port
   */
  node(port: number): RedisClusterNode;
  /** The live masters that own slots now (asks a live node). */
  masters(): Promise<RedisClusterNode[]>;
  /** The live replicas of the master on `masterPort` now (asks a live node). */
  replicasOf(masterPort: number): Promise<RedisClusterNode[]>;
  /** Stops every node (SIGTERM, then SIGKILL), disconnects the clients made by `client()`. Idempotent. */
  stop(): Promise<void>;
  /**
   * `FLUSHALL` on every master that owns slots (then `WAIT` for its replicas),
   * and with `{ scripts: true }` `SCRIPT FLUSH` on every live node.
   */
  flush(options?: FlushOptions): Promise<void>;
  /**
   * Sends `signal` (default SIGKILL) to the node on `port` and waits for it to
   * exit; does not wait for the cluster to react. See {@link RedisClusterHandle.killMaster}.
   */
  killNode(port: number, signal?: NodeJS.Signals): Promise<void>;
  /** Restarts a node (killed or not) on its port and waits until the cluster is ok and agrees again. */
  restartNode(port: number, options?: WaitForClusterOkOptions): Promise<void>;
  /**
   * SIGKILLs the master on `port`, then waits until one of its replicas has
   * been promoted, every live node agrees on the slot map and reports
   * `cluster_state:ok`. The killed node stays down; bring it back with
   * {@link RedisClusterHandle.restartNode} (it rejoins as a replica).
   *
   * @throws Error if `port` is not a slot-owning master, or it has no live replica
   */
  killMaster(port: number, options?: FailoverOptions): Promise<FailoverResult>;
  /**
   * Runs `CLUSTER FAILOVER` on the replica on `replicaPort`, then waits until
   * it is master, every live node agrees and the old master has resynced as
   * its replica.
   *
   * @throws Error if `replicaPort` is not a replica
   */
  manualFailover(replicaPort: number, options?: ManualFailoverOptions): Promise<FailoverResult>;
  /**
   * Fails over the master on `masterPort`: by `CLUSTER FAILOVER` on one of its
   * replicas (`method: 'manual'`, the default), or by SIGKILL (`method: 'kill'`,
   * see {@link RedisClusterHandle.killMaster}).
   */
  failover(masterPort: number, options?: FailoverOptions & { method?: 'manual' | 'kill' }): Promise<FailoverResult>;
  /** The master that owns `slot` now, by `CLUSTER SLOTS` on a live node. */
  masterForSlot(slot: number): Promise<RedisClusterNode>;
  /** The master that owns the slot of `key` now (slot by `CLUSTER KEYSLOT`, owner by `CLUSTER SLOTS`). */
  masterForKey(key: string | Buffer): Promise<RedisClusterNode>;
  /**
   * Resolves when every live node reports `cluster_state:ok`, all of them
   * agree on the owner of each of the 16384 slots and on every live node's
   * role, every slot owner is up and not flagged failing, and (by default)
   * every live replica is in sync with its master.
   *
   * @throws Error naming what was still wrong when the timeout expired
   */
  waitForClusterOk(options?: WaitForClusterOkOptions): Promise<void>;
}

/**
 * Starts a Redis Cluster (by default 3 masters with 1 replica each) of
 * `redis-server` processes on free loopback ports, creates it with
 * `redis-cli --cluster create` and resolves once it is ok and consistent on
 * every node (see {@link RedisClusterHandle.waitForClusterOk}).
 *
 * Nodes run with `cluster-replica-validity-factor 0` (a replica may always
 * take over), `cluster-allow-replica-migration no` (the topology only changes
 * when a test changes it) and `repl-diskless-sync-delay 0` (replicas sync at once).
 *
 * @example
 * ```ts
 * import { startRedisCluster } from 'redis-rwlock/testing';
 * await using cluster = await startRedisCluster({ nodeTimeoutMs: 1000 });
 * const redis = cluster.client();
 * await redis.set('k', 'v');
 * const { promoted } = await cluster.killMaster((await cluster.masterForKey('k')).port);
 * ```
 *
 * @param options - see {@link RedisClusterOptions}
 * @throws RangeError for fewer than 3 masters; {@link RedisServerStartError} or
 *   Error when a node does not start or the cluster does not form in time
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisClusterHandle> {
  const masters = options.masters ?? 3;
  const replicasPerMaster = options.replicasPerMaster ?? 1;
  const nodeTimeoutMs = options.nodeTimeoutMs ?? DEFAULT_CLUSTER_NODE_TIMEOUT_MS;
  if (!Number.isInteger(masters) || masters < 3) {
    throw new RangeError(`startRedisCluster: masters must be an integer >= 3 (redis-cli --cluster create needs 3), got ${masters}`);
  }
  if (!Number.isInteger(replicasPerMaster) || replicasPerMaster < 0) {
    throw new RangeError(`startRedisCluster: replicasPerMaster must be a non-negative integer, got ${replicasPerMaster}`);
  }
  if (!Number.isInteger(nodeTimeoutMs) || nodeTimeoutMs < 100) {
    throw new RangeError(`startRedisCluster: nodeTimeoutMs must be an integer >= 100, got ${nodeTimeoutMs}`);
  }
  const startTimeoutMs = options.startTimeoutMs ?? DEFAULT_CLUSTER_START_TIMEOUT_MS;
  const deadline = Date.now() + startTimeoutMs;
  const serverOptions: RedisServerOptions = {
    startTimeoutMs: Math.min(startTimeoutMs, DEFAULT_START_TIMEOUT_MS),
    ...(options.args !== undefined && { args: options.args }),
    ...(options.bin !== undefined && { bin: options.bin }),
    ...(options.stopTimeoutMs !== undefined && { stopTimeoutMs: options.stopTimeoutMs }),
  };
  const harnessArgs = (port: number): string[] => [
    '--cluster-enabled', 'yes',
    '--cluster-config-file', `nodes-${port}.conf`,
    '--cluster-node-timeout', String(nodeTimeoutMs),
    '--cluster-require-full-coverage', options.requireFullCoverage ? 'yes' : 'no',
    '--cluster-replica-validity-factor', '0',
    '--cluster-allow-replica-migration', 'no',
    '--repl-diskless-sync-delay', '0',
    '--repl-ping-replica-period', '1',
  ];

  const total = masters * (1 + replicasPerMaster);
  const launched = await Promise.allSettled(
    Array.from({ length: total }, () =>
      launchRedisServer(serverOptions, { busPort: true, harnessArgs }, (init) => new ClusterNodeProcess(init)),
    ),
  );
  const nodes = launched.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  try {
    const failed = launched.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const cli = options.cliBin ?? process.env['REDIS_CLI_BIN'] ?? 'redis-cli';
    await runCli(
      cli,
      ['--cluster', 'create', ...nodes.map((n) => `${LOOPBACK_HOST}:${n.port}`), '--cluster-replicas', String(replicasPerMaster), '--cluster-yes'],
      Math.max(1_000, deadline - Date.now()),
    );
    const cluster = new RedisClusterImpl(nodes, nodeTimeoutMs);
    // A first write on every master gives the replicas a non-zero replication
    // offset; until then CLUSTER SLOTS does not advertise them to clients
    // (repl-ping-replica-period 1 does the same within a second if a replica
    // was not attached yet).
    await cluster.flushMasters(false);
    await cluster.waitForClusterOk({ timeoutMs: Math.max(1_000, deadline - Date.now()) });
    return cluster;
  } catch (err) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw err;
  }
}

/** A cluster node process with the observed cluster fields. @internal */
class ClusterNodeProcess extends RedisServerProcess implements RedisClusterNode {
  role: ClusterRole = 'master';
  nodeId = '';
  masterPort: number | undefined;

  constructor(init: ServerInit) {
    super(init);
  }
}

/** One line of `CLUSTER NODES`. */
interface NodeLine {
  readonly id: string;
  readonly port: number;
  readonly flags: ReadonlySet<string>;
  /** Master's node id for a replica. */
  readonly masterId: string | undefined;
  /** Slot ranges (inclusive) owned by a master. */
  readonly slots: readonly (readonly [number, number])[];
}

/** What one node says about the cluster. */
interface NodeReport {
  readonly node: ClusterNodeProcess;
  readonly state: string | undefined;
  readonly lines: readonly NodeLine[];
  readonly masterLinkStatus: string | undefined;
  /** `CLUSTER SLOTS`: per range, the start, the end, the master and the replicas it advertises. */
  readonly slotRanges: readonly (readonly unknown[])[];
}

class RedisClusterImpl implements RedisClusterHandle {
  readonly nodes: readonly ClusterNodeProcess[];
  readonly startupNodes: readonly { readonly host: string; readonly port: number }[];
  readonly nodeTimeoutMs: number;
  readonly #clients = new Set<Cluster>();
  #stopping: Promise<void> | undefined;

  constructor(nodes: readonly ClusterNodeProcess[], nodeTimeoutMs: number) {
    this.nodes = nodes;
    this.startupNodes = nodes.map((n) => Object.freeze({ host: LOOPBACK_HOST, port: n.port }));
    this.nodeTimeoutMs = nodeTimeoutMs;
  }

  client(options: ClusterOptions = {}): Cluster {
    if (this.#stopping) throw new Error('this Redis Cluster has been stopped; client() is not possible any more');
    const { redisOptions, ...rest } = options;
    const client = new Cluster(
      this.startupNodes.map((n) => ({ host: n.host, port: n.port })),
      { scaleReads: 'master', slotsRefreshTimeout: 2_000, ...rest, redisOptions: { ...redisOptions } },
    );
    this.#clients.add(client);
    client.once('end', () => this.#clients.delete(client));
    return client;
  }

  node(port: number): ClusterNodeProcess {
    const node = this.nodes.find((n) => n.port === port);
    if (!node) throw new Error(`no node of this cluster listens on port ${port} (ports: ${this.nodes.map((n) => n.port).join(', ')})`);
    return node;
  }

  async masters(): Promise<ClusterNodeProcess[]> {
    const lines = await this.#anyView();
    return lines.filter((l) => isMaster(l) && l.slots.length > 0).flatMap((l) => this.#liveNode(l.port));
  }

  async replicasOf(masterPort: number): Promise<ClusterNodeProcess[]> {
    const lines = await this.#anyView();
    const master = lines.find((l) => l.port === masterPort);
    if (!master) throw new Error(`no node on port ${masterPort} is known to the cluster`);
    return lines.filter((l) => l.masterId === master.id && !isFailing(l)).flatMap((l) => this.#liveNode(l.port));
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      for (const client of this.#clients) client.disconnect();
      this.#clients.clear();
      await Promise.all(this.nodes.map((n) => n.stop()));
    })();
    return this.#stopping;
  }

  async flush(options: FlushOptions = {}): Promise<void> {
    await this.flushMasters(true);
    if (options.scripts) {
      await Promise.all(this.nodes.filter((n) => n.running).map((n) => withAdminConnection(n.port, (conn) => conn.script('FLUSH'))));
    }
  }

  /** FLUSHALL on every slot-owning master, optionally waiting for its connected replicas to acknowledge. @internal */
  async flushMasters(waitForReplicas: boolean): Promise<void> {
    const masters = await this.masters();
    await Promise.all(
      masters.map((m) =>
        withAdminConnection(m.port, async (conn) => {
          await conn.flushall();
          if (!waitForReplicas) return;
          const replicas = Number(parseInfo(await conn.info('replication')).get('connected_slaves') ?? 0);
          if (replicas > 0) await conn.wait(replicas, 1_000);
        }),
      ),
    );
  }

  async killNode(port: number, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.node(port).kill(signal);
  }

  async restartNode(port: number, options: WaitForClusterOkOptions = {}): Promise<void> {
    await this.node(port).restart();
    await this.waitForClusterOk(options);
  }

  async killMaster(port: number, options: FailoverOptions = {}): Promise<FailoverResult> {
    const master = this.node(port);
    const lines = await this.#anyView();
    const line = lines.find((l) => l.port === port);
    if (!line || !isMaster(line) || line.slots.length === 0 || !master.running) {
      throw new Error(`killMaster: the node on port ${port} is not a live master that owns slots`);
    }
    const replicas = lines.filter((l) => l.masterId === line.id && !isFailing(l)).flatMap((l) => this.#liveNode(l.port));
    if (replicas.length === 0) throw new Error(`killMaster: the master on port ${port} has no live replica to take over`);
    const started = Date.now();
    await master.kill('SIGKILL');
    const promoted = await this.#settle(options.timeoutMs, `a replica of ${port} to be promoted`, () => replicas.find((r) => r.role === 'master'));
    return { promoted, replaced: master, elapsedMs: Date.now() - started };
  }

  async manualFailover(replicaPort: number, options: ManualFailoverOptions = {}): Promise<FailoverResult> {
    const replica = this.node(replicaPort);
    const lines = await this.#anyView();
    const line = lines.find((l) => l.port === replicaPort);
    const masterLine = line?.masterId === undefined ? undefined : lines.find((l) => l.id === line.masterId);
    if (!line || isMaster(line) || !masterLine || !replica.running) {
      throw new Error(`manualFailover: the node on port ${replicaPort} is not a live replica`);
    }
    const replaced = this.node(masterLine.port);
    const mode = options.mode ?? 'default';
    const started = Date.now();
    const args = mode === 'default' ? ['FAILOVER'] : ['FAILOVER', mode.toUpperCase()];
    await withAdminConnection(replicaPort, (conn) => conn.call('CLUSTER', args));
    const promoted = await this.#settle(options.timeoutMs, `${replicaPort} to become master`, () => (replica.role === 'master' ? replica : undefined));
    return { promoted, replaced, elapsedMs: Date.now() - started };
  }

  async failover(masterPort: number, options: FailoverOptions & { method?: 'manual' | 'kill' } = {}): Promise<FailoverResult> {
    const { method = 'manual', ...rest } = options;
    if (method === 'kill') return this.killMaster(masterPort, rest);
    const [replica] = await this.replicasOf(masterPort);
    if (!replica) throw new Error(`failover: the master on port ${masterPort} has no live replica`);
    return this.manualFailover(replica.port, rest);
  }

  async masterForSlot(slot: number): Promise<ClusterNodeProcess> {
    if (!Number.isInteger(slot) || slot < 0 || slot >= CLUSTER_SLOTS) throw new RangeError(`masterForSlot: slot must be an integer in 0-16383, got ${slot}`);
    const ranges = await this.#onLiveNode((conn) => conn.cluster('SLOTS'));
    const owner = ranges.find(([start, end]) => slot >= start && slot <= end)?.[2];
    if (!owner) throw new Error(`masterForSlot: slot ${slot} is not assigned to any node`);
    return this.node(Number(owner[1]));
  }

  async masterForKey(key: string | Buffer): Promise<ClusterNodeProcess> {
    const slot = await this.#onLiveNode((conn) => conn.cluster('KEYSLOT', key));
    return this.masterForSlot(Number(slot));
  }

  async waitForClusterOk(options: WaitForClusterOkOptions = {}): Promise<void> {
    await this.#settle(options.timeoutMs, 'the cluster to be ok', () => true, options.replicasInSync ?? true);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  /**
   * Polls {@link RedisClusterImpl.#check} (which refreshes the observed roles)
   * until the cluster is consistent and `done()` returns a value.
   */
  async #settle<T>(timeoutMs = DEFAULT_FAILOVER_TIMEOUT_MS, what: string, done: () => T | undefined, replicasInSync = true): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let problem: string;
    for (;;) {
      problem = (await this.#check(replicasInSync)) ?? '';
      if (problem === '') {
        const result = done();
        if (result !== undefined) return result;
        problem = `still waiting for ${what}`;
      }
      if (Date.now() > deadline) throw new Error(`Redis Cluster: timed out after ${timeoutMs} ms waiting for ${what}: ${problem}`);
      await sleep(50);
    }
  }

  /** Returns what is not settled yet, or undefined when the cluster is ok and every live node agrees. */
  async #check(replicasInSync: boolean): Promise<string | undefined> {
    const live = this.nodes.filter((n) => n.running);
    const reports: NodeReport[] = [];
    for (const result of await Promise.allSettled(live.map((n) => this.#report(n)))) {
      if (result.status === 'rejected') return String(result.reason);
      reports.push(result.value);
    }
    if (reports.length === 0) return 'no node is running';
    const livePorts = new Set(live.map((n) => n.port));
    let firstSignature: string | undefined;
    for (const report of reports) {
      const port = report.node.port;
      if (report.state !== 'ok') return `node ${port} reports cluster_state:${report.state ?? 'unknown'}`;
      const known = report.lines.find((l) => l.flags.has('handshake') || l.flags.has('noaddr'));
      if (known) return `node ${port} is still in handshake with ${known.port || known.id}`;
      const owners = new Array<number>(CLUSTER_SLOTS).fill(-1);
      for (const line of report.lines) {
        if (!isMaster(line)) continue;
        for (const [start, end] of line.slots) owners.fill(line.port, start, end + 1);
      }
      const unassigned = owners.filter((p) => p === -1).length;
      if (unassigned > 0) return `node ${port} sees ${unassigned} unassigned slots`;
      for (const line of report.lines) {
        if (!isMaster(line) || line.slots.length === 0) continue;
        if (!livePorts.has(line.port)) return `node ${port} sees slots owned by ${line.port}, which is down`;
        if (isFailing(line)) return `node ${port} flags slot owner ${line.port} as failing`;
      }
      const signature = slotSignature(owners) + '|' + roleSignature(report.lines, livePorts);
      if (firstSignature === undefined) firstSignature = signature;
      else if (signature !== firstSignature) return `nodes ${reports[0]!.node.port} and ${port} disagree on the slot map or roles`;
    }
    // Each live node's own view of itself must match what the others say about it.
    for (const report of reports) {
      const self = report.lines.find((l) => l.flags.has('myself'));
      const seen = reports[0]!.lines.find((l) => l.port === report.node.port);
      if (!self || !seen || isMaster(self) !== isMaster(seen) || self.masterId !== seen.masterId) {
        return `node ${report.node.port}'s role is not yet agreed on`;
      }
      if (replicasInSync && !isMaster(self) && report.masterLinkStatus !== 'up') {
        return `replica ${report.node.port} is not in sync with its master (master_link_status:${report.masterLinkStatus ?? 'unknown'})`;
      }
    }
    if (replicasInSync) {
      // CLUSTER SLOTS (what clients see) leaves out replicas whose replication
      // offset the node does not know yet, e.g. before the master's first write.
      const agreed = reports[0]!.lines;
      const expected = new Map<number, number>();
      for (const line of agreed) {
        const master = line.masterId === undefined ? undefined : agreed.find((l) => l.id === line.masterId);
        if (master && livePorts.has(line.port) && !isFailing(line)) expected.set(master.port, (expected.get(master.port) ?? 0) + 1);
      }
      for (const report of reports) {
        for (const range of report.slotRanges) {
          const ownerPort = Number((range[2] as unknown[] | undefined)?.[1]);
          const advertised = range.length - 3;
          if (advertised < (expected.get(ownerPort) ?? 0)) {
            return `node ${report.node.port} does not list every replica of ${ownerPort} in CLUSTER SLOTS yet`;
          }
        }
      }
    }
    this.#observe(reports[0]!.lines);
    return undefined;
  }

  /** Records roles, node ids and masters from an agreed view. */
  #observe(lines: readonly NodeLine[]): void {
    const byId = new Map(lines.map((l) => [l.id, l]));
    for (const line of lines) {
      const node = this.nodes.find((n) => n.port === line.port);
      if (!node) continue;
      node.nodeId = line.id;
      node.role = isMaster(line) ? 'master' : 'replica';
      node.masterPort = line.masterId === undefined ? undefined : byId.get(line.masterId)?.port;
    }
  }

  async #report(node: ClusterNodeProcess): Promise<NodeReport> {
    return withAdminConnection(
      node.port,
      async (conn) => {
        const [info, nodes, replication, slots] = await Promise.all([
          conn.cluster('INFO'),
          conn.cluster('NODES'),
          conn.info('replication'),
          conn.cluster('SLOTS'),
        ]);
        return {
          node,
          state: parseInfo(String(info)).get('cluster_state'),
          lines: parseClusterNodes(String(nodes)),
          masterLinkStatus: parseInfo(replication).get('master_link_status'),
          slotRanges: slots,
        };
      },
      2_000,
    );
  }

  /** `CLUSTER NODES` as seen by the first live node that answers. */
  async #anyView(): Promise<NodeLine[]> {
    return parseClusterNodes(String(await this.#onLiveNode((conn) => conn.cluster('NODES'))));
  }

  /** Runs `fn` on the first live node that answers, masters first. */
  async #onLiveNode<T>(fn: (conn: Redis) => Promise<T>): Promise<T> {
    const live = this.nodes.filter((n) => n.running).sort((a, b) => Number(b.role === 'master') - Number(a.role === 'master'));
    let lastError: unknown = new Error('no node of this cluster is running');
    for (const node of live) {
      try {
        return await withAdminConnection(node.port, fn, 2_000);
      } catch (err) {
        lastError = err;
      }
    }
    throw lastError;
  }

  #liveNode(port: number): ClusterNodeProcess[] {
    const node = this.nodes.find((n) => n.port === port);
    return node?.running ? [node] : [];
  }
}

function isMaster(line: NodeLine): boolean {
  return line.flags.has('master');
}

function isFailing(line: NodeLine): boolean {
  return line.flags.has('fail') || line.flags.has('fail?');
}

/** Parses `CLUSTER NODES` output. */
function parseClusterNodes(text: string): NodeLine[] {
  const lines: NodeLine[] = [];
  for (const raw of text.split('\n')) {
    const fields = raw.trim().split(' ');
    if (fields.length < 8) continue;
    const [id, address, flags, master] = fields as [string, string, string, string];
    // address: ip:port@cport[,hostname]
    const hostPort = address.split('@')[0] ?? '';
    const port = Number(hostPort.slice(hostPort.lastIndexOf(':') + 1));
    const slots: [number, number][] = [];
    for (const spec of fields.slice(8)) {
      if (spec.startsWith('[')) continue; // importing / migrating marker
      const [start, end = start] = spec.split('-');
      slots.push([Number(start), Number(end)]);
    }
    lines.push({ id, port, flags: new Set(flags.split(',')), masterId: master === '-' ? undefined : master, slots });
  }
  return lines;
}

/** Run-length summary of a slot owner map: `0-5460:7000,5461-10922:7001,...`. */
function slotSignature(owners: readonly number[]): string {
  const runs: string[] = [];
  let start = 0;
  for (let slot = 1; slot <= owners.length; slot++) {
    if (slot === owners.length || owners[slot] !== owners[start]) {
      runs.push(`${start}-${slot - 1}:${owners[start]}`);
      start = slot;
    }
  }
  return runs.join(',');
}

/** The roles of the live nodes as a comparable string. */
function roleSignature(lines: readonly NodeLine[], livePorts: ReadonlySet<number>): string {
  const byId = new Map(lines.map((l) => [l.id, l.port]));
  return lines
    .filter((l) => livePorts.has(l.port))
    .map((l) => `${l.port}:${isMaster(l) ? 'm' : `r>${l.masterId === undefined ? '?' : byId.get(l.masterId)}`}`)
    .sort()
    .join(',');
}

/** Runs `redis-cli` and rejects with its output if it fails. */
function runCli(bin: string, args: readonly string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(bin, args, { timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) {
        const hint = (err as NodeJS.ErrnoException).code === 'ENOENT' ? ' Install redis-cli (Redis >= 7) or set REDIS_CLI_BIN to the binary.' : '';
        reject(new Error(`\`${bin} ${args.join(' ')}\` failed: ${err.message}.${hint}\n${stdout}${stderr}`, { cause: err }));
      } else {
        resolve(stdout);
      }
    });
  });
}
