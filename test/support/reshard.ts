/**
 * Live resharding of Cluster slots, as `redis-cli --cluster reshard` does
 * it, for the tests that meet a migration half-way.
 *
 * @module
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { parseInfo } from '../../src/testing/admin.js';
import type { RedisClusterNode } from '../../src/testing/index.js';

/** Connections to `nodes`, by port, and their node ids; disconnect them when done. */
export async function slotAdmin(
  nodes: readonly RedisClusterNode[],
): Promise<{ conns: Map<number, Redis>; idOf(port: number): Promise<string>; close(): void }> {
  const conns = new Map<number, Redis>(
    nodes.map((n) => [n.port, new Redis(n.port, n.host, { lazyConnect: false, maxRetriesPerRequest: 1 })]),
  );
  return {
    conns,
    idOf: async (port) => String(await conns.get(port)!.call('CLUSTER', 'MYID')),
    close: () => conns.forEach((c) => c.disconnect()),
  };
}

/**
 * IMPORTING on the target, MIGRATING on the source: from now on a script
 * whose keys are not all on one side gets TRYAGAIN until {@link endMigration}.
 */
export async function beginMigration(
  slot: number,
  source: RedisClusterNode,
  target: RedisClusterNode,
  all: readonly RedisClusterNode[],
): Promise<void> {
  const admin = await slotAdmin(all);
  try {
    await admin.conns.get(target.port)!.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', await admin.idOf(source.port));
    await admin.conns.get(source.port)!.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', await admin.idOf(target.port));
  } finally {
    admin.close();
  }
}

/** MIGRATEs `keys` from the source to the target (mid-migration). */
export async function migrateKeys(source: RedisClusterNode, target: RedisClusterNode, keys: readonly string[]): Promise<void> {
  const src = new Redis(source.port, source.host, { lazyConnect: false, maxRetriesPerRequest: 1 });
  try {
    await src.call('MIGRATE', target.host, target.port, '', 0, 5_000, 'KEYS', ...keys);
  } finally {
    src.disconnect();
  }
}

/** A node's `CLUSTER INFO` field, such as `cluster_my_epoch`. */
export async function clusterInfo(conn: Redis, field: string): Promise<number> {
  return Number(parseInfo(String(await conn.call('CLUSTER', 'INFO'))).get(field));
}

/**
 * Waits until `node` has heard every master's config epoch. Ending an import
 * bumps the importer's epoch to one above the highest it knows of; before
 * that news arrived by gossip, two moves in a row gave two masters the same
 * epoch, the collision moved the wrong one up, and the replicas kept the
 * slot at the higher epoch's node for good (CI's shared Cluster, once).
 */
async function epochsHeard(node: number, admin: { conns: Map<number, Redis> }): Promise<void> {
  const deadline = performance.now() + 20_000;
  for (;;) {
    const epochs = await Promise.all([...admin.conns.values()].map((conn) => clusterInfo(conn, 'cluster_my_epoch')));
    const heard = await clusterInfo(admin.conns.get(node)!, 'cluster_current_epoch');
    if (heard >= Math.max(...epochs)) return;
    if (performance.now() > deadline) throw new Error(`node ${node} heard of epoch ${heard} only, below ${Math.max(...epochs)}`);
    await sleep(50);
  }
}

/** SETSLOT NODE on the target, the source and every other master: the slot is the target's. */
export async function endMigration(
  slot: number,
  source: RedisClusterNode,
  target: RedisClusterNode,
  all: readonly RedisClusterNode[],
): Promise<void> {
  const admin = await slotAdmin(all);
  try {
    const targetId = await admin.idOf(target.port);
    await epochsHeard(target.port, admin);
    await admin.conns.get(target.port)!.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId);
    await admin.conns.get(source.port)!.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId);
    for (const [port, conn] of admin.conns)
      if (port !== source.port && port !== target.port) await conn.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId);
  } finally {
    admin.close();
  }
}

/**
 * Moves an empty slot from `source` to `target`: begin, then end, with no
 * keys to MIGRATE. Never end without beginning: the target bumps its config
 * epoch only when it ends an import (above every epoch it heard of, which
 * {@link endMigration} waits for), and without that bump the replicas,
 * which learn the slot map by gossip, keep the owner of the higher epoch;
 * the nodes then disagreed for good (giving a slot back that way failed
 * CI's shared Cluster for every later test).
 */
export async function moveEmptySlot(
  slot: number,
  source: RedisClusterNode,
  target: RedisClusterNode,
  all: readonly RedisClusterNode[],
): Promise<void> {
  await beginMigration(slot, source, target, all);
  await endMigration(slot, source, target, all);
}

/**
 * Live resharding of one slot: begin, MIGRATE its keys in small batches
 * (with pauses, so that clients meet the migration half-way), end.
 */
export async function migrateSlot(
  slot: number,
  source: RedisClusterNode,
  target: RedisClusterNode,
  all: readonly RedisClusterNode[],
  batchSize = 2,
  pauseMs = 100,
) {
  await beginMigration(slot, source, target, all);
  await sleep(pauseMs); // clients meet the slot half-open before any key moved too
  const src = new Redis(source.port, source.host, { lazyConnect: false, maxRetriesPerRequest: 1 });
  let keys = 0;
  let batches = 0;
  try {
    for (let round = 0; round < 1_000; round++) {
      const batch = (await src.call('CLUSTER', 'GETKEYSINSLOT', slot, batchSize)) as string[];
      if (batch.length === 0) break;
      await migrateKeys(source, target, batch);
      keys += batch.length;
      batches++;
      await sleep(pauseMs);
    }
  } finally {
    src.disconnect();
  }
  await endMigration(slot, source, target, all);
  return { keys, batches };
}

/** One entry of Valkey 9's `CLUSTER GETSLOTMIGRATIONS`, its fields by name (`state`, `slot_ranges`, `operation`, ...). */
export type SlotMigration = Record<string, string>;

/** Valkey 9's `CLUSTER GETSLOTMIGRATIONS` on `conn`: in-progress and recent atomic slot migrations, newest first. */
export async function slotMigrations(conn: Redis): Promise<SlotMigration[]> {
  const reply = (await conn.call('CLUSTER', 'GETSLOTMIGRATIONS')) as unknown[];
  return reply.map((entry) => {
    const fields: SlotMigration = {};
    if (Array.isArray(entry)) for (let i = 0; i + 1 < entry.length; i += 2) fields[String(entry[i])] = String(entry[i + 1]);
    else Object.assign(fields, entry);
    return fields;
  });
}

/**
 * Valkey 9's atomic slot migration: `CLUSTER MIGRATESLOTS` on the source
 * moves the slot's keys to the target in the background (a snapshot, then the
 * writes made since, streamed), then pauses the source's writes for the last
 * of them and hands the slot over in one step; clients meet no ASK or
 * TRYAGAIN, only a MOVED once it is the target's. Waits until the job
 * succeeded on the source (it throws if the job failed or was cancelled) and
 * every node says the slot is the target's; returns how long the job took.
 */
export async function atomicMigrateSlot(
  slot: number,
  source: RedisClusterNode,
  target: RedisClusterNode,
  all: readonly RedisClusterNode[],
  timeoutMs = 30_000,
): Promise<{ ms: number; job: SlotMigration }> {
  const admin = await slotAdmin(all);
  try {
    const src = admin.conns.get(source.port)!;
    const targetId = await admin.idOf(target.port);
    const before = new Set((await slotMigrations(src)).map((j) => j.name));
    const started = performance.now();
    await src.call('CLUSTER', 'MIGRATESLOTS', 'SLOTSRANGE', slot, slot, 'NODE', targetId);
    const deadline = started + timeoutMs;
    let job: SlotMigration | undefined;
    for (;;) {
      // Ours: the export of this slot that was not listed before it was started.
      job = (await slotMigrations(src)).find((j) => j.operation === 'EXPORT' && j.slot_ranges === `${slot}-${slot}` && !before.has(j.name));
      if (job?.state === 'success') break;
      if (job?.state === 'failed' || job?.state === 'cancelled')
        throw new Error(`the migration of slot ${slot} ${job.state}: ${job.message}`);
      if (performance.now() > deadline)
        throw new Error(`the migration of slot ${slot} did not finish in ${timeoutMs} ms: ${JSON.stringify(job)}`);
      await sleep(20);
    }
    const ms = performance.now() - started;
    // The other nodes learn the new owner by gossip.
    for (;;) {
      const owners = await Promise.all(
        [...admin.conns.values()].map(async (conn) => {
          const slots = (await conn.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
          return slots.find(([from, to]) => from <= slot && slot <= to)?.[2]?.[2];
        }),
      );
      if (owners.every((id) => id === targetId)) break;
      if (performance.now() > deadline) throw new Error(`the nodes do not agree slot ${slot} is ${targetId}'s: ${owners.join(', ')}`);
      await sleep(50);
    }
    return { ms, job: job! };
  } finally {
    admin.close();
  }
}
