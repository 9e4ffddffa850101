import type { LockMode } from '../errors.js';
import { type LockKeys, lockKeys } from '../keys/keys.js';
import { isCluster, type RedisClient } from '../redis.js';
import type { AcquireOutcome, AcquireRequest, BlockReason, ExtendRequest, HolderInfo, LockBackend, LockInfo } from './backend.js';
import { extendByGroup } from './extend-groups.js';
import { type AcquireReply, defineScripts, type HashKeys, runScript } from './scripts.js';

/**
 * Leases renewed by one script call at most: bounds how long one renewal
 * blocks the Redis server (each lease costs a handful of commands).
 */
export const EXTEND_BATCH = 2500;

/** The default layout: one hash and one deadline index per lock, on one server or one Cluster slot. */
export class HashBackend implements LockBackend {
  constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
  ) {
    defineScripts(client);
  }

  keysFor(resource: string): LockKeys {
    return lockKeys(this.prefix, resource);
  }

  async acquire(r: AcquireRequest): Promise<AcquireOutcome> {
    const { state, leases, queue } = r.keys;
    const reply = await (r.mode === 'read'
      ? runScript(this.client, 'acquireRead', [state, leases, queue, r.owner, r.leaseMs, r.honourIntent ? '1' : '0', r.holdId])
      : runScript(this.client, 'acquireWrite', [state, leases, queue, r.owner, r.leaseMs, r.waitBeatMs, r.fair ? '1' : '0', r.holdId]));
    return parseAcquireReply(reply, r.leaseMs);
  }

  async release(keys: LockKeys, mode: LockMode, owner: string, holdId: string): Promise<boolean> {
    return (await runScript(this.client, 'release', [keys.state, keys.leases, keys.queue, owner, mode, keys.channel, holdId])) >= 0;
  }

  async extend(requests: readonly ExtendRequest[]): Promise<number[]> {
    return extendByGroup(requests.length, this.groupByNode(requests), async (indexes, results) => {
      try {
        await this.extendGroup(requests, indexes, results);
      } catch (error) {
        // The slot map moved under us (a key no longer local, MOVED, ASK): one call per slot is always routable.
        if (!isCluster(this.client) || !/non local key|MOVED|ASK|CROSSSLOT|TRYAGAIN|Too many Cluster redirections/.test(String(error)))
          throw error;
        const bySlot = new Map<number, number[]>();
        for (const i of indexes) push(bySlot, requests[i]!.keys.slot, i);
        const slots = await extendByGroup(requests.length, [...bySlot.values()], (slotIndexes, slotResults) =>
          this.extendGroup(requests, slotIndexes, slotResults),
        );
        for (const i of indexes) results[i] = slots[i]!;
      }
    });
  }

  async abandon(keys: LockKeys, owner: string, drop = ''): Promise<void> {
    await runScript(this.client, 'abandon', [...lockNames(keys), owner, drop, keys.channel]);
  }

  async inspect(resource: string, keys: LockKeys): Promise<LockInfo> {
    const [now, fields, leases, queue] = await runScript(this.client, 'inspect', lockNames(keys));
    return describeState(resource, keys.state, now, pairs(fields), pairs(leases), queue);
  }

  private async extendGroup(requests: readonly ExtendRequest[], indexes: number[], results: number[]): Promise<void> {
    for (let start = 0; start < indexes.length; start += EXTEND_BATCH) {
      const chunk = indexes.slice(start, start + EXTEND_BATCH);
      const args: (string | number)[] = [3, ...lockNames(requests[chunk[0]!]!.keys)];
      for (const i of chunk) args.push(...lockNames(requests[i]!.keys), requests[i]!.owner, requests[i]!.leaseMs);
      const reply = await runScript(this.client, 'extend', args);
      chunk.forEach((i, k) => (results[i] = reply[k]!));
    }
  }

  /** Request indexes grouped so that each group's keys live on one node. */
  private groupByNode(requests: readonly ExtendRequest[]): number[][] {
    if (!isCluster(this.client)) return [requests.map((_, i) => i)];
    const slots = this.client.slots;
    const groups = new Map<string, number[]>();
    requests.forEach((r, i) => push(groups, slots[r.keys.slot]?.[0] ?? `slot:${r.keys.slot}`, i));
    return [...groups.values()];
  }
}

/** The keys every hash-mode script takes, in their KEYS order. */
function lockNames(keys: LockKeys): HashKeys {
  return [keys.state, keys.leases, keys.queue];
}

function push<K>(map: Map<K, number[]>, key: K, value: number): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** The outcome of an acquire script's reply; `leaseMs` is the lease asked for, which a bare fence was granted for. */
export function parseAcquireReply(reply: AcquireReply, leaseMs: number): AcquireOutcome {
  if (typeof reply === 'number') return { granted: true, fence: reply, leaseRemainingMs: leaseMs };
  if (reply[0] === 1) return { granted: true, fence: Number(reply[1]), leaseRemainingMs: Number(reply[2]) };
  return { granted: false, retryAfterMs: Math.max(0, Number(reply[1])), reason: reply[2] as BlockReason };
}

/**
 * The holds in a hold list, `<fence> <holdId> <holdId> ...`, or a fresh
 * lock's hold id alone (lua/includes/state.lua).
 */
function holdCount(list: string | undefined): number {
  if (list === undefined) return 0;
  let n = 0;
  for (let at = list.indexOf(' '); at >= 0; at = list.indexOf(' ', at + 1)) n++;
  return Math.max(n, 1);
}

function pairs(flat: string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i < flat.length; i += 2) map.set(flat[i]!, flat[i + 1]!);
  return map;
}

/** A {@link LockInfo} from the raw hash fields and owner deadlines; expired owners are left out. */
export function describeState(
  resource: string,
  key: string,
  now: number,
  fields: Map<string, string>,
  deadlines: Map<string, string>,
  queue: readonly string[],
): LockInfo {
  const ttl = (owner: string) => Number(deadlines.get(owner) ?? 0) - now;
  const writerOwner = fields.get('w');
  const writer: HolderInfo | null =
    writerOwner !== undefined && ttl(writerOwner) > 0
      ? { owner: writerOwner, holds: holdCount(fields.get('wc')), ttlMs: ttl(writerOwner) }
      : null;
  const readers: HolderInfo[] = [];
  for (const [field, holds] of fields) {
    if (!field.startsWith('r:')) continue;
    const owner = field.slice(2);
    if (ttl(owner) > 0) readers.push({ owner, holds: holdCount(holds), ttlMs: ttl(owner) });
  }
  const beat = (field: string) => Number(fields.get(field) ?? 0) - now;
  const waiting = queue.filter((owner) => beat(`q:${owner}`) > 0).map((owner) => ({ owner, ttlMs: beat(`q:${owner}`) }));
  const upgrader = fields.get('u');
  const waitingWriter =
    upgrader !== undefined && beat('ud') > 0 && fields.has(`r:${upgrader}`) && ttl(upgrader) > 0
      ? { owner: upgrader, ttlMs: beat('ud') }
      : (waiting[0] ?? null);
  return {
    resource,
    key,
    mode: writer ? 'write' : readers.length > 0 ? 'read' : 'free',
    writer,
    readers,
    waitingWriter,
    queue: waiting,
    fence: fields.has('f') ? Number(fields.get('f')) : null,
    serverTimeMs: now,
  };
}
