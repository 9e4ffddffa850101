import type { Driver } from '../clients/driver.js';
import type { LockMode } from '../errors.js';
import { type LegacyKeyPair, type LegacyLockKeys, legacyLockKeys, resolveLegacyPair } from '../keys/legacy.js';
import type { AcquireOutcome, AcquireRequest, ExtendRequest, LegacyInfo, LockBackend, LockInfo } from './backend.js';
import { extendByGroup, extendInChunks } from './extend-groups.js';
import { describeState, pairs, parseAcquireReply } from './replies.js';
import { type LegacyKeys, runScript } from './scripts.js';

/** The member of a lock's readers registry that stands for old readers (never an owner token). */
export const OLD_READERS_MEMBER = '';

/**
 * The `legacy` and `bridge` layouts: the library's hash state (the hash-mode
 * lock itself in bridge mode, a twin beside the legacy keys in legacy mode)
 * plus the two keys of the old scheme, checked and written together in one
 * script, so that old processes and library processes refuse each other as
 * two old processes would. The scripts are the hash-mode ones with the
 * `legacy` peer hooks (lua/includes/legacy.lua).
 */
export class LegacyBackend implements LockBackend<LegacyLockKeys> {
  constructor(
    private readonly client: Driver,
    private readonly prefix: string,
    private readonly legacyKeys: (resource: string) => LegacyKeyPair,
    private readonly layout: 'legacy' | 'bridge',
  ) {}

  keysFor(resource: string): LegacyLockKeys {
    const pair = resolveLegacyPair(this.legacyKeys, resource);
    return legacyLockKeys(this.prefix, resource, pair, this.layout, this.client.cluster);
  }

  async acquire(r: AcquireRequest<LegacyLockKeys>): Promise<AcquireOutcome> {
    const names = legacyNames(r.keys);
    const reply = await (r.mode === 'read'
      ? runScript(this.client, 'legacyAcquireRead', [...names, r.owner, r.leaseMs, r.honourIntent ? '1' : '0', r.holdId])
      : runScript(this.client, 'legacyAcquireWrite', [...names, r.owner, r.leaseMs, r.waitBeatMs, r.fair ? '1' : '0', r.holdId]));
    return parseAcquireReply(reply, r.leaseMs);
  }

  async release(k: LegacyLockKeys, mode: LockMode, owner: string, holdId: string): Promise<boolean> {
    return (await runScript(this.client, 'legacyRelease', [...legacyNames(k), owner, mode, k.channel, k.peerChannel, holdId])) >= 0;
  }

  async extend(requests: readonly ExtendRequest<LegacyLockKeys>[]): Promise<number[]> {
    // One call per slot on a Cluster (each script touches one slot), one for all on one server.
    const groups = new Map<number, number[]>();
    const cluster = this.client.cluster;
    requests.forEach((r, i) => {
      const slot = cluster ? r.keys.slot : 0;
      const list = groups.get(slot);
      if (list) list.push(i);
      else groups.set(slot, [i]);
    });
    return extendByGroup(requests.length, [...groups.values()], (indexes, results) =>
      extendInChunks(requests, indexes, results, legacyNames, (args) => runScript(this.client, 'legacyExtend', args)),
    );
  }

  async abandon(k: LegacyLockKeys, owner: string, drop = ''): Promise<void> {
    await runScript(this.client, 'legacyAbandon', [...legacyNames(k), owner, drop, k.channel, k.peerChannel]);
  }

  async inspect(resource: string, k: LegacyLockKeys): Promise<LockInfo> {
    const [now, fields, leases, queue, readValue, readTtl, writeValue, writeTtl, readers] = await runScript(
      this.client,
      'legacyInspect',
      legacyNames(k),
    );
    const info = describeState(resource, k.state, now, pairs(fields), pairs(leases), queue);
    const legacy = describeLegacy(k, now, readValue, readTtl, writeValue, writeTtl, readers);
    const writeHeld = info.writer !== null || legacy.write.value !== null;
    const readHeld = info.readers.length > 0 || legacy.read.value !== null;
    return { ...info, mode: writeHeld ? 'write' : readHeld ? 'read' : 'free', legacy };
  }
}

/** The keys every legacy/bridge script takes, in their KEYS order. */
function legacyNames(k: LegacyLockKeys): LegacyKeys {
  return [k.state, k.leases, k.queue, k.read, k.write, k.readers];
}

/** Until deleted: how inspect reports an old key without a TTL. */
const UNTIL_DELETED = Number.MAX_SAFE_INTEGER;

function describeLegacy(
  keys: LegacyLockKeys,
  now: number,
  readValue: string | null,
  readTtl: number,
  writeValue: string | null,
  writeTtl: number,
  readersFlat: string[],
): LegacyInfo {
  const ttl = (pttl: number) => (pttl >= 0 ? pttl : null);
  const readers: { owner: string; ttlMs: number }[] = [];
  let oldReadersTtlMs = 0;
  for (const [member, score] of pairs(readersFlat)) {
    const left = Number(score) - now;
    if (left <= 0) continue;
    if (member === OLD_READERS_MEMBER) oldReadersTtlMs = Math.min(left, UNTIL_DELETED);
    else readers.push({ owner: member, ttlMs: left });
  }
  // A read key value that names no live library reader was (re)set by an old process: its TTL is that reader's.
  if (readValue !== null && !readers.some((r) => r.owner === readValue)) {
    oldReadersTtlMs = Math.max(oldReadersTtlMs, readTtl >= 0 ? readTtl : UNTIL_DELETED);
  }
  return {
    read: { key: keys.read, value: readValue, ttlMs: ttl(readTtl) },
    write: { key: keys.write, value: writeValue, ttlMs: ttl(writeTtl) },
    oldWriter: writeValue === '1',
    oldReadersTtlMs,
    readers,
  };
}
