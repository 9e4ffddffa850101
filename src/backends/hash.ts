import type { LockMode } from '../errors.js';
import { type LockKeys, lockKeys } from '../keys/keys.js';
import { isCluster, type RedisClient } from '../redis.js';
import type { AcquireOutcome, AcquireRequest, ExtendRequest, LockBackend, LockInfo } from './backend.js';
import { extendByGroup, extendInChunks } from './extend-groups.js';
import { describeState, pairs, parseAcquireReply } from './replies.js';
import { defineScripts, type HashKeys, runScript } from './scripts.js';

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
    const { keys } = r;
    const { state, leases, queue } = keys;
    const reply = await (r.mode === 'read'
      ? runScript(this.client, 'acquireRead', [state, leases, queue, r.owner, r.leaseMs, r.honourIntent ? '1' : '0', r.holdId], keys)
      : runScript(
          this.client,
          'acquireWrite',
          [state, leases, queue, r.owner, r.leaseMs, r.waitBeatMs, r.fair ? '1' : '0', r.holdId],
          keys,
        ));
    return parseAcquireReply(reply, r.leaseMs);
  }

  async release(keys: LockKeys, mode: LockMode, owner: string, holdId: string): Promise<boolean> {
    return (await runScript(this.client, 'release', [keys.state, keys.leases, keys.queue, owner, mode, holdId], keys)) >= 0;
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

  private extendGroup(requests: readonly ExtendRequest[], indexes: number[], results: number[]): Promise<void> {
    return extendInChunks(requests, indexes, results, lockNames, (args) => runScript(this.client, 'extend', args));
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
