/**
 * A real Redis Cluster of `redis-server` child processes on loopback ports,
 * for tests: creation with `redis-cli --cluster create`, a strict readiness
 * check, slot lookups and fault injection (killing a master, manual failover).
 *
 * @module
 */
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Cluster, type ClusterOptions, type Redis } from 'ioredis';
import { parseInfo, sleep, withAdminConnection } from './admin.js';
import { LOOPBACK_HOST } from './ports.js';
import {
  type AclUser,
  DEFAULT_START_TIMEOUT_MS,
  type FlushOptions,
  launchRedisServer,
  type RedisServerHandle,
  type RedisServerOptions,
  RedisServerProcess,
  type ServerInit,
} from './redis-server.js';
import { TEMP_DIR_PREFIX, trackClient, untrackClient } from './registry.js';
import { makeTestCertificates, type TestCertificates } from './tls.js';

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
   * Every node also listens with TLS on a second port, and the cluster bus
   * and replication use TLS; one CA and certificate, made for the run by
   * `openssl`, serve every node. A client that connects over TLS is told
   * the nodes' TLS ports, a plain one (the harness) the plain ports. See
   * {@link RedisClusterHandle.tls}.
   * @defaultValue false
   */
  tls?: boolean;
  /** ACL users on every node, besides `default` (see {@link RedisServerOptions.users}). */
  users?: readonly AclUser[];
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

/** A Cluster's TLS side (`tls: true`): the certificates, and where each node listens with TLS. */
export interface ClusterTls extends TestCertificates {
  /** `{ host, port }` of every node's TLS port, for `new Cluster([...tls.startupNodes], { redisOptions: { tls: { ca: tls.ca } } })`. */
  readonly startupNodes: readonly NodeAddress[];
}

/** Where a node listens. */
export interface NodeAddress {
  /** Always `'127.0.0.1'`. */
  readonly host: string;
  /** The port. */
  readonly port: number;
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
   * Also wait until every running replica is in sync with its master:
   * `master_link_status:up` and `master_sync_in_progress:0` in its own
   * `INFO replication`, listed `state=online` by its master, the master's
   * replication id and offset reached (the replica, asked just after its
   * master, has everything the master had written), and advertised in every
   * node's `CLUSTER SLOTS`. Then each replica is ready to take over.
   * @defaultValue true
   */
  replicasInSync?: boolean;
}

/** Options for {@link RedisClusterHandle.killMaster}, {@link RedisClusterHandle.manualFailover} and {@link RedisClusterHandle.failover}. */
export interface FailoverOptions {
  /**
   * Give up after this long. It bounds the whole call: the wait for a replica
   * ready to take over, then the wait for the failover to settle.
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
  /**
   * With `tls: true`: the certificates, and every node's TLS address for
   * `new Cluster(tls.startupNodes, { redisOptions: { tls: { ca: tls.ca } } })`.
   */
  readonly tls: ClusterTls | undefined;
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
  /**
   * Restarts a node (killed or not) on its port, then waits as
   * {@link RedisClusterHandle.waitForClusterOk} does: it resolves only once the
   * restarted node has rejoined, no node flags any running node as failing,
   * and (by default) every replica, the restarted one too, is linked to its
   * master and caught up.
   *
   * @throws Error naming the nodes not yet healthy, and why, when the timeout expired
   */
  restartNode(port: number, options?: WaitForClusterOkOptions): Promise<void>;
  /**
   * SIGKILLs the master on `port`, then waits until one of its replicas has
   * been promoted and the cluster is healthy again (see
   * {@link RedisClusterHandle.waitForClusterOk}). The killed node stays down;
   * bring it back with {@link RedisClusterHandle.restartNode} (it rejoins as
   * a replica).
   *
   * Before the kill it waits for a replica ready to take over: running, a
   * replica of `port` in the view of every node that answers, flagged `fail`
   * or `fail?` by none of them, with `master_link_status:up` and
   * `master_sync_in_progress:0`. So a replica that is still rejoining (just
   * restarted, say) is waited for rather than refused. A replica you froze
   * with `pause()` does not answer, so it is never ready: to fail over to it,
   * use {@link RedisClusterHandle.killNode}, `resume()` it, then
   * {@link RedisClusterHandle.waitForClusterOk}.
   *
   * @throws Error at once if the node on `port` is not running, or every node
   *   that answers sees it as a replica or a master without slots; after
   *   `timeoutMs`, an Error naming what it waited for and what was still
   *   missing (which replica, and why)
   */
  killMaster(port: number, options?: FailoverOptions): Promise<FailoverResult>;
  /**
   * Runs `CLUSTER FAILOVER` on the replica on `replicaPort`, then waits until
   * it is master and the cluster is healthy again, the old master resynced as
   * its replica (see {@link RedisClusterHandle.waitForClusterOk}).
   *
   * Before the command it waits until `replicaPort` is a replica in every
   * answering node's view, flagged `fail`/`fail?` by none; in the default mode
   * also until its master is running and its link to it is up, with no sync
   * in progress (`'force'` and `'takeover'` need no master).
   *
   * @throws Error at once if `replicaPort` is not running or every node sees
   *   it as a master; after `timeoutMs`, an Error naming what it waited for
   *   and what was still missing
   */
  manualFailover(replicaPort: number, options?: ManualFailoverOptions): Promise<FailoverResult>;
  /**
   * Fails over the master on `masterPort`: by `CLUSTER FAILOVER` on one of its
   * replicas (`method: 'manual'`, the default), or by SIGKILL (`method: 'kill'`,
   * see {@link RedisClusterHandle.killMaster}). Either way it first waits, as
   * `killMaster` does, for a replica ready to take over.
   */
  failover(masterPort: number, options?: FailoverOptions & { method?: 'manual' | 'kill' }): Promise<FailoverResult>;
  /** The master that owns `slot` now, by `CLUSTER SLOTS` on a live node. */
  masterForSlot(slot: number): Promise<RedisClusterNode>;
  /** The master that owns the slot of `key` now (slot by `CLUSTER KEYSLOT`, owner by `CLUSTER SLOTS`). */
  masterForKey(key: string | Buffer): Promise<RedisClusterNode>;
  /**
   * Resolves when the cluster is healthy in the view of every running node
   * (polled every 50 ms; each node must answer within 2 s):
   *
   * - every running node answers and reports `cluster_state:ok`;
   * - in every node's `CLUSTER NODES`: no handshake, every running node
   *   known, none flagged `fail` or `fail?` (nodes you killed may be), all
   *   16384 slots assigned, each to a running master;
   * - all of them agree on the owner of each slot and on every running
   *   node's role and master;
   * - by default, every running replica linked to its master and caught up
   *   (see {@link WaitForClusterOkOptions.replicasInSync}).
   *
   * A node frozen by `pause()` does not answer, so the wait lasts until it is
   * resumed or the timeout expires.
   *
   * @throws Error when the timeout expired, listing what was still wrong,
   *   node by node (say, `node 7001 flags node 7003 as fail?`, or
   *   `replica 7004 is not linked to its master 7001 (master_link_status:down)`)
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
    ...(options.tls === true && { tls: true }),
    ...(options.users !== undefined && { users: options.users }),
    ...(options.args !== undefined && { args: options.args }),
    ...(options.bin !== undefined && { bin: options.bin }),
    ...(options.stopTimeoutMs !== undefined && { stopTimeoutMs: options.stopTimeoutMs }),
  };
  const harnessArgs = (port: number): string[] => [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    `nodes-${port}.conf`,
    '--cluster-node-timeout',
    String(nodeTimeoutMs),
    '--cluster-require-full-coverage',
    options.requireFullCoverage ? 'yes' : 'no',
    '--cluster-replica-validity-factor',
    '0',
    '--cluster-allow-replica-migration',
    'no',
    '--repl-diskless-sync-delay',
    '0',
    '--repl-ping-replica-period',
    '1',
  ];

  const total = masters * (1 + replicasPerMaster);
  // One CA and certificate for every node, in a dir of the cluster's own (removed by stop()).
  const certificatesDir = options.tls ? await mkdtemp(path.join(os.tmpdir(), `${TEMP_DIR_PREFIX}${process.pid}-tls-`)) : undefined;
  const certificates = certificatesDir === undefined ? undefined : makeTestCertificates(certificatesDir);
  const launched = await Promise.allSettled(
    Array.from({ length: total }, () =>
      launchRedisServer(
        serverOptions,
        { busPort: true, harnessArgs, clusterNode: true, ...(certificates && { certificates }) },
        (init) => new ClusterNodeProcess(init),
      ),
    ),
  );
  const nodes = launched.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  try {
    const failed = launched.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const cli = options.cliBin ?? process.env.REDIS_CLI_BIN ?? 'redis-cli';
    await runCli(
      cli,
      [
        '--cluster',
        'create',
        ...nodes.map((n) => `${LOOPBACK_HOST}:${n.port}`),
        '--cluster-replicas',
        String(replicasPerMaster),
        '--cluster-yes',
      ],
      Math.max(1_000, deadline - Date.now()),
    );
    const cluster = new RedisClusterImpl(nodes, nodeTimeoutMs, certificates, certificatesDir);
    // A first write on every master gives the replicas a non-zero replication
    // offset; until then CLUSTER SLOTS does not advertise them to clients
    // (repl-ping-replica-period 1 does the same within a second if a replica
    // was not attached yet).
    await cluster.flushMasters(false);
    await cluster.waitForClusterOk({ timeoutMs: Math.max(1_000, deadline - Date.now()) });
    return cluster;
  } catch (err) {
    await Promise.all(nodes.map((n) => n.stop()));
    if (certificatesDir !== undefined) rmSync(certificatesDir, { recursive: true, force: true });
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
  /** `cluster_state` of `CLUSTER INFO`. */
  readonly state: string | undefined;
  /** `CLUSTER NODES`. */
  readonly lines: readonly NodeLine[];
  /** `INFO replication`. */
  readonly replication: ReadonlyMap<string, string>;
  /** `CLUSTER SLOTS`: per range, the start, the end, the master and the replicas it advertises. */
  readonly slotRanges: readonly (readonly unknown[])[];
}

/** One poll of the cluster: what every running node said. */
interface Snapshot {
  /** The nodes whose process is running. */
  readonly live: readonly ClusterNodeProcess[];
  /** The reports of the running nodes that answered. */
  readonly reports: readonly NodeReport[];
  /** One line per running node that did not answer. */
  readonly silent: readonly string[];
}

/** What a poll of the cluster found: the value waited for, or why not yet. */
type PollOutcome<T> = { readonly done: T; readonly problems?: undefined } | { readonly problems: string[] };

/** How long a poll waits for one node's answer before it counts the node as not answering. */
const REPORT_TIMEOUT_MS = 2_000;

/** Pause between two polls of the cluster's state. */
const POLL_INTERVAL_MS = 50;

/** How many problems a timeout error lists. */
const MAX_PROBLEMS_SHOWN = 6;

/** What a replica must be to take over by `killMaster`, `failover` or a default `CLUSTER FAILOVER`. */
const READY_REPLICA =
  "running, a replica of it in every node's view, flagged fail/fail? by none, master_link_status:up, master_sync_in_progress:0";

/** What a replica must be to take over by `CLUSTER FAILOVER FORCE` or `TAKEOVER`. */
const READY_REPLICA_UNLINKED = "running, a replica in every node's view, flagged fail/fail? by none";

class RedisClusterImpl implements RedisClusterHandle {
  readonly nodes: readonly ClusterNodeProcess[];
  readonly startupNodes: readonly { readonly host: string; readonly port: number }[];
  readonly nodeTimeoutMs: number;
  readonly tls: ClusterTls | undefined;
  readonly #certificatesDir: string | undefined;
  readonly #clients = new Set<Cluster>();
  #stopping: Promise<void> | undefined;

  constructor(nodes: readonly ClusterNodeProcess[], nodeTimeoutMs: number, certificates?: TestCertificates, certificatesDir?: string) {
    this.nodes = nodes;
    this.startupNodes = nodes.map((n) => Object.freeze({ host: LOOPBACK_HOST, port: n.port }));
    this.nodeTimeoutMs = nodeTimeoutMs;
    this.tls = certificates && {
      ...certificates,
      startupNodes: nodes.map((n) => Object.freeze({ host: LOOPBACK_HOST, port: n.tls!.port })),
    };
    this.#certificatesDir = certificatesDir;
  }

  client(options: ClusterOptions = {}): Cluster {
    if (this.#stopping) throw new Error('this Redis Cluster has been stopped; client() is not possible any more');
    const { redisOptions, ...rest } = options;
    const client = new Cluster(
      this.startupNodes.map((n) => ({ host: n.host, port: n.port })),
      { scaleReads: 'master', slotsRefreshTimeout: 2_000, ...rest, redisOptions: { ...redisOptions } },
    );
    this.#clients.add(client);
    trackClient(client);
    client.once('end', () => {
      this.#clients.delete(client);
      untrackClient(client);
    });
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
      if (this.#certificatesDir !== undefined) rmSync(this.#certificatesDir, { recursive: true, force: true });
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
    const timeoutMs = options.timeoutMs ?? DEFAULT_FAILOVER_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    const master = this.node(port);
    const { candidates } = await this.#waitForTakeoverReplica('killMaster', master, timeoutMs, deadline);
    const started = Date.now();
    await master.kill('SIGKILL');
    const promoted = await this.#settle('killMaster', timeoutMs, deadline, `a replica of ${port} to be promoted`, () =>
      candidates.find((r) => r.role === 'master'),
    );
    return { promoted, replaced: master, elapsedMs: Date.now() - started };
  }

  async manualFailover(replicaPort: number, options: ManualFailoverOptions = {}): Promise<FailoverResult> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_FAILOVER_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    const replica = this.node(replicaPort);
    const mode = options.mode ?? 'default';
    const linked = mode === 'default';
    const what = `${replicaPort} to be a replica ready to take over (${linked ? READY_REPLICA : READY_REPLICA_UNLINKED})`;
    const replaced = await this.#poll<ClusterNodeProcess>('manualFailover', timeoutMs, deadline, what, async (snap) => {
      if (!replica.running) throw new Error(`manualFailover: the node on port ${replicaPort} is not a live replica (it is not running)`);
      const views = snap.reports.map((r) => r.lines.find((l) => l.port === replicaPort));
      const self = snap.reports.find((r) => r.node === replica)?.lines.find((l) => l.flags.has('myself'));
      if (self && views.every((l) => l !== undefined && isMaster(l))) {
        throw new Error(`manualFailover: the node on port ${replicaPort} is not a live replica (every node sees it as a master)`);
      }
      if (!self) return { problems: [...snap.silent] };
      const masterLine =
        self.masterId === undefined ? undefined : snap.reports.find((r) => r.node === replica)!.lines.find((l) => l.id === self.masterId);
      if (!masterLine) return { problems: [`node ${replicaPort} does not see itself as a replica yet`] };
      const problems: string[] = [];
      const masterNode = this.nodes.find((n) => n.port === masterLine.port);
      if (linked && !masterNode?.running)
        problems.push(`its master ${masterLine.port} is not running (use mode 'force' or 'takeover' without a master)`);
      const why = replicaNotReady(snap, replica, masterLine.id, linked);
      if (why) problems.push(`replica ${replicaPort}: ${why}`);
      return problems.length > 0 || !masterNode ? { problems } : { done: masterNode };
    });
    const started = Date.now();
    const args = mode === 'default' ? ['FAILOVER'] : ['FAILOVER', mode.toUpperCase()];
    await withAdminConnection(replicaPort, (conn) => conn.call('CLUSTER', args));
    const promoted = await this.#settle('manualFailover', timeoutMs, deadline, `${replicaPort} to become master`, () =>
      replica.role === 'master' ? replica : undefined,
    );
    return { promoted, replaced, elapsedMs: Date.now() - started };
  }

  async failover(masterPort: number, options: FailoverOptions & { method?: 'manual' | 'kill' } = {}): Promise<FailoverResult> {
    const { method = 'manual', ...rest } = options;
    if (method === 'kill') return this.killMaster(masterPort, rest);
    const timeoutMs = rest.timeoutMs ?? DEFAULT_FAILOVER_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    const { ready } = await this.#waitForTakeoverReplica('failover', this.node(masterPort), timeoutMs, deadline);
    return this.manualFailover(ready.port, { ...rest, timeoutMs: Math.max(1, deadline - Date.now()) });
  }

  async masterForSlot(slot: number): Promise<ClusterNodeProcess> {
    if (!Number.isInteger(slot) || slot < 0 || slot >= CLUSTER_SLOTS)
      throw new RangeError(`masterForSlot: slot must be an integer in 0-16383, got ${slot}`);
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
    const timeoutMs = options.timeoutMs ?? DEFAULT_FAILOVER_TIMEOUT_MS;
    await this.#settle(
      'Redis Cluster',
      timeoutMs,
      Date.now() + timeoutMs,
      "the cluster to be healthy in every node's view",
      () => true,
      options.replicasInSync ?? true,
    );
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  /**
   * Waits until the master `master` owns slots in every answering node's view
   * and has a replica ready to take over (see {@link replicaNotReady}).
   * Throws at once if `master` is not running, or every node sees it as a
   * master without slots or as a replica.
   *
   * @returns a ready replica, and every running node some view lists as its
   *   replica (any of them may win the election)
   */
  async #waitForTakeoverReplica(
    label: string,
    master: ClusterNodeProcess,
    timeoutMs: number,
    deadline: number,
  ): Promise<{ ready: ClusterNodeProcess; candidates: ClusterNodeProcess[] }> {
    const port = master.port;
    const notMaster = `${label}: the node on port ${port} is not a live master that owns slots`;
    return this.#poll<{ ready: ClusterNodeProcess; candidates: ClusterNodeProcess[] }>(
      label,
      timeoutMs,
      deadline,
      `a replica of ${port} ready to take over (${READY_REPLICA})`,
      async (snap) => {
        if (!master.running) throw new Error(`${notMaster} (it is not running)`);
        const views = snap.reports.map((r) => ({ port: r.node.port, line: r.lines.find((l) => l.port === port) }));
        const owner = (line: NodeLine | undefined): line is NodeLine => line !== undefined && isMaster(line) && line.slots.length > 0;
        const self = snap.reports.find((r) => r.node === master)?.lines.find((l) => l.flags.has('myself'));
        if (self && !views.some((v) => owner(v.line))) throw new Error(notMaster);
        // Nodes that do not answer (say, paused by the test) do not hold the failover up.
        const problems: string[] = [];
        for (const v of views) if (!owner(v.line)) problems.push(`node ${v.port} does not see ${port} as a master that owns slots yet`);
        const masterId = self?.id ?? views.find((v) => owner(v.line))?.line?.id;
        if (masterId === undefined) return { problems: [...problems, ...snap.silent] };
        const candidates = this.nodes.filter(
          (n) => n.running && snap.reports.some((r) => r.lines.some((l) => l.port === n.port && l.masterId === masterId)),
        );
        if (candidates.length === 0) problems.push(`no running node is a replica of ${port}`);
        const notReady: string[] = [];
        let ready: ClusterNodeProcess | undefined;
        for (const candidate of candidates) {
          const why = replicaNotReady(snap, candidate, masterId, true);
          if (why === undefined) ready ??= candidate;
          else notReady.push(`replica ${candidate.port}: ${why}`);
        }
        if (ready && problems.length === 0) return { done: { ready, candidates } };
        return { problems: [...problems, ...notReady, ...snap.silent] };
      },
    );
  }

  /**
   * Polls {@link RedisClusterImpl.#healthProblems} (which refreshes the
   * observed roles) until the cluster is healthy and `done()` returns a value.
   */
  async #settle<T>(
    label: string,
    timeoutMs: number,
    deadline: number,
    what: string,
    done: () => T | undefined,
    replicasInSync = true,
  ): Promise<T> {
    return this.#poll<T>(label, timeoutMs, deadline, what, async (snap) => {
      const problems = await this.#healthProblems(snap, replicasInSync);
      if (problems.length > 0) return { problems };
      const result = done();
      return result === undefined ? { problems: [`still waiting for ${what}`] } : { done: result };
    });
  }

  /**
   * Takes a {@link Snapshot} of every running node every {@link POLL_INTERVAL_MS}
   * until `evaluate` is done with it; rejects at `deadline` with the problems
   * `evaluate` found last, or at once with what `evaluate` throws.
   */
  async #poll<T>(
    label: string,
    timeoutMs: number,
    deadline: number,
    what: string,
    evaluate: (snap: Snapshot) => Promise<PollOutcome<T>>,
  ): Promise<T> {
    for (;;) {
      const outcome = await evaluate(await this.#snapshot());
      if (outcome.problems === undefined) return outcome.done;
      if (Date.now() >= deadline) {
        const shown = outcome.problems.slice(0, MAX_PROBLEMS_SHOWN);
        const more = outcome.problems.length > shown.length ? `; and ${outcome.problems.length - shown.length} more` : '';
        throw new Error(`${label}: timed out after ${timeoutMs} ms waiting for ${what}: ${shown.join('; ')}${more}`);
      }
      await sleep(POLL_INTERVAL_MS);
    }
  }

  /** What every running node says now; nodes that do not answer are listed apart. */
  async #snapshot(): Promise<Snapshot> {
    const live = this.nodes.filter((n) => n.running);
    const results = await Promise.allSettled(live.map((n) => this.#report(n)));
    const reports: NodeReport[] = [];
    const silent: string[] = [];
    results.forEach((result, i) => {
      if (result.status === 'fulfilled') reports.push(result.value);
      else silent.push(`node ${live[i]!.port} does not answer (${errorText(result.reason)})`);
    });
    return { live, reports, silent };
  }

  /**
   * Everything that keeps the cluster from being healthy in every running
   * node's view (see {@link RedisClusterHandle.waitForClusterOk}); empty when
   * it is healthy, and then the observed roles are refreshed.
   */
  async #healthProblems(snap: Snapshot, replicasInSync: boolean): Promise<string[]> {
    if (snap.live.length === 0) return ['no node is running'];
    const problems = [...snap.silent];
    const livePorts = new Set(snap.live.map((n) => n.port));
    const bySignature = new Map<string, number[]>();
    for (const report of snap.reports) {
      const port = report.node.port;
      if (report.state !== 'ok') problems.push(`node ${port} reports cluster_state:${report.state ?? 'unknown'}`);
      const known = new Set<number>();
      for (const line of report.lines) {
        if (line.flags.has('handshake') || line.flags.has('noaddr')) {
          problems.push(`node ${port} is still in handshake with ${line.port || line.id}`);
          continue;
        }
        known.add(line.port);
        if (livePorts.has(line.port) && isFailing(line)) problems.push(`node ${port} flags node ${line.port} as ${failFlags(line)}`);
      }
      for (const other of livePorts) if (!known.has(other)) problems.push(`node ${port} does not know node ${other} yet`);
      const owners = new Array<number>(CLUSTER_SLOTS).fill(-1);
      const downOwners = new Set<number>();
      for (const line of report.lines) {
        if (!isMaster(line)) continue;
        for (const [start, end] of line.slots) owners.fill(line.port, start, end + 1);
        if (line.slots.length > 0 && !livePorts.has(line.port)) downOwners.add(line.port);
      }
      const unassigned = owners.filter((p) => p === -1).length;
      if (unassigned > 0) problems.push(`node ${port} sees ${unassigned} unassigned slots`);
      for (const owner of downOwners) problems.push(`node ${port} sees slots owned by ${owner}, which is down`);
      const signature = `${slotSignature(owners)}|${roleSignature(report.lines, livePorts)}`;
      bySignature.set(signature, [...(bySignature.get(signature) ?? []), port]);
    }
    if (bySignature.size > 1) {
      const groups = [...bySignature.values()].map((ports) => ports.join(', '));
      problems.push(`the nodes disagree on the slot map or roles (views: ${groups.map((g) => `[${g}]`).join(' vs ')})`);
    }
    if (problems.length > 0 || snap.reports.length === 0) return problems;

    // Every view agrees: check replication against it.
    const agreed = snap.reports[0]!.lines;
    if (replicasInSync) problems.push(...(await this.#replicationProblems(snap, agreed)));
    if (problems.length > 0) return problems;
    this.#observe(agreed);
    return [];
  }

  /**
   * For every running replica of the agreed view: linked to its master from
   * both ends, no sync in progress, the master's replication history and
   * offset reached, and advertised by every node's `CLUSTER SLOTS`.
   */
  async #replicationProblems(snap: Snapshot, agreed: readonly NodeLine[]): Promise<string[]> {
    const problems: string[] = [];
    const byId = new Map(agreed.map((l) => [l.id, l]));
    const reportOf = new Map(snap.reports.map((r) => [r.node.port, r]));
    const linked: { replica: NodeReport; master: NodeReport }[] = [];
    const expected = new Map<number, number>();
    for (const line of agreed) {
      const replica = reportOf.get(line.port);
      if (isMaster(line) || !replica) continue;
      const masterLine = line.masterId === undefined ? undefined : byId.get(line.masterId);
      const master = masterLine && reportOf.get(masterLine.port);
      if (!masterLine || !master) {
        problems.push(`replica ${line.port}'s master ${masterLine?.port ?? line.masterId ?? '?'} is not running`);
        continue;
      }
      expected.set(masterLine.port, (expected.get(masterLine.port) ?? 0) + 1);
      const info = replica.replication;
      const link = info.get('master_link_status');
      const listed = replicaState(master.replication, line.port);
      if (info.get('role') !== 'slave' || Number(info.get('master_port')) !== masterLine.port) {
        problems.push(
          `replica ${line.port} does not replicate from its master ${masterLine.port} yet (role:${info.get('role') ?? '?'}, master_port:${info.get('master_port') ?? '-'})`,
        );
      } else if (link !== 'up') {
        problems.push(`replica ${line.port} is not linked to its master ${masterLine.port} (master_link_status:${link ?? 'unknown'})`);
      } else if (info.get('master_sync_in_progress') !== '0') {
        problems.push(
          `replica ${line.port} is still syncing from its master ${masterLine.port} (master_sync_in_progress:${info.get('master_sync_in_progress') ?? 'unknown'})`,
        );
      } else if (listed !== 'online') {
        problems.push(
          `master ${masterLine.port} does not list replica ${line.port} as online (${listed === undefined ? 'not listed' : `state=${listed}`})`,
        );
      } else {
        linked.push({ replica, master });
      }
    }
    // Offsets: the replica, asked after its master, must have everything the
    // master had written when it was asked.
    const later = await Promise.allSettled(
      linked.map(({ replica }) => withAdminConnection(replica.node.port, (conn) => conn.info('replication'), REPORT_TIMEOUT_MS)),
    );
    later.forEach((result, i) => {
      const { replica, master } = linked[i]!;
      const [r, m] = [replica.node.port, master.node.port];
      if (result.status === 'rejected') {
        problems.push(`node ${r} does not answer (${errorText(result.reason)})`);
        return;
      }
      const info = parseInfo(result.value);
      const target = Number(master.replication.get('master_repl_offset'));
      const reached = Number(info.get('slave_repl_offset') ?? info.get('master_repl_offset'));
      if (info.get('master_replid') !== master.replication.get('master_replid')) {
        problems.push(
          `replica ${r} does not have its master ${m}'s replication history yet (replid ${info.get('master_replid')} vs ${master.replication.get('master_replid')})`,
        );
      } else if (!(reached >= target)) {
        problems.push(`replica ${r} is ${target - reached} bytes behind its master ${m} (offset ${reached} < ${target})`);
      }
    });
    // CLUSTER SLOTS (what clients see) leaves out replicas whose replication
    // offset the node does not know yet, e.g. before the master's first write.
    for (const report of snap.reports) {
      for (const range of report.slotRanges) {
        const ownerPort = Number((range[2] as unknown[] | undefined)?.[1]);
        if (range.length - 3 < (expected.get(ownerPort) ?? 0)) {
          problems.push(`node ${report.node.port} does not list every replica of ${ownerPort} in CLUSTER SLOTS yet`);
          break;
        }
      }
    }
    return problems;
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
          replication: parseInfo(replication),
          slotRanges: slots,
        };
      },
      REPORT_TIMEOUT_MS,
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
        return await withAdminConnection(node.port, fn, REPORT_TIMEOUT_MS);
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

/**
 * Why `replica` cannot take over from the master with node id `masterId` yet,
 * or undefined when it can: it is running and answers, every answering node
 * lists it as a replica of that master and flags it neither `fail` nor
 * `fail?`, and (when `linked`) its own `INFO replication` shows the link to
 * that master up with no sync in progress.
 */
function replicaNotReady(snap: Snapshot, replica: ClusterNodeProcess, masterId: string, linked: boolean): string | undefined {
  if (!replica.running) return 'not running';
  const own = snap.reports.find((r) => r.node === replica);
  if (!own) return 'does not answer';
  for (const report of snap.reports) {
    const line = report.lines.find((l) => l.port === replica.port);
    const by = report.node === replica ? 'itself' : `node ${report.node.port}`;
    if (!line) return `${by} does not know it yet`;
    if (line.masterId !== masterId) return `${by} does not see it as a replica of this master yet`;
    if (isFailing(line)) return `${by} flags it as ${failFlags(line)}`;
  }
  if (!linked) return undefined;
  const link = own.replication.get('master_link_status');
  if (link !== 'up') return `master_link_status:${link ?? 'unknown'}`;
  const syncing = own.replication.get('master_sync_in_progress');
  if (syncing !== '0') return `master_sync_in_progress:${syncing ?? 'unknown'}`;
  return undefined;
}

/** The `state=` a master's `INFO replication` gives the replica on `port`, if it lists it. */
function replicaState(masterInfo: ReadonlyMap<string, string>, port: number): string | undefined {
  for (const [key, value] of masterInfo) {
    if (!/^slave\d+$/.test(key)) continue;
    const fields = new Map(value.split(',').map((kv) => kv.split('=') as [string, string]));
    if (Number(fields.get('port')) === port) return fields.get('state');
  }
  return undefined;
}

function failFlags(line: NodeLine): string {
  return [...line.flags].filter((f) => f === 'fail' || f === 'fail?').join(',');
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
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
        const hint =
          (err as NodeJS.ErrnoException).code === 'ENOENT' ? ' Install redis-cli (Redis >= 7) or set REDIS_CLI_BIN to the binary.' : '';
        reject(new Error(`\`${bin} ${args.join(' ')}\` failed: ${err.message}.${hint}\n${stdout}${stderr}`, { cause: err }));
      } else {
        resolve(stdout);
      }
    });
  });
}
