import type { LockKeys } from '../keys/keys.js';
import { lockKeys } from '../keys/keys.js';
import { type LegacyKeyPair, type LegacyLockKeys, legacyLockKeys, resolveLegacyPair } from '../keys/legacy.js';
import type { LegacyInfo, LockInfo } from './backend.js';
import { describeState, mergePages, pairs } from './replies.js';
import type { HashKeys, LayoutKeys, LegacyKeys, OperationScript, ScriptReply } from './scripts.js';

/**
 * A storage layout as data: how a resource's keys are named, which script
 * runs each operation, the peer channels its release and abandon wake, and
 * how its inspect reply reads. The
 * `ScriptedBackend` runs any layout; the layouts' scripts take the same
 * arguments after their KEYS (lua/includes/*-body.lua), so nothing else
 * differs.
 */
export interface Layout<K extends LockKeys, out Keys extends LayoutKeys = LayoutKeys, out I extends InspectScript = InspectScript> {
  keysFor(resource: string): K;
  /** The KEYS every script of the layout takes, in order. */
  names(keys: K): Keys;
  /**
   * The channels a release or abandon wakes waiters on besides the lock's own
   * (which the scripts name after the state key): a peer layout's.
   */
  peerChannels(keys: K): readonly string[];
  /** Which script runs each operation (each layout checks its own take `Keys`: `satisfies LayoutScripts<Keys, I>`). */
  readonly scripts: LayoutScripts<LayoutKeys, I>;
  /**
   * The script that renews a Cluster node's leases of many slots in one call,
   * touching keys it does not declare (lua/extend-across-slots.lua), where the
   * layout has one; without it, or where the server refuses it, one slot per call.
   */
  readonly extendAcrossSlots?: 'extendAcrossSlots';
  /** Whether a release hands a freed lock to the longest-waiting writer (lua/includes/release-body.lua, HANDS_OVER). */
  readonly handsOver: boolean;
  /** The lock's state from the pages its inspect script replied (lua/includes/inspect-page.lua), in order. */
  describe(resource: string, keys: K, pages: readonly ScriptReply<I>[]): LockInfo;
}

type InspectScript = 'inspect' | 'legacyInspect';

/** The script of each operation, for a layout whose scripts take KEYS `Keys`. */
interface LayoutScripts<Keys extends LayoutKeys, I extends InspectScript> {
  readonly acquireRead: OperationScript<'acquireRead', Keys>;
  readonly acquireWrite: OperationScript<'acquireWrite', Keys>;
  readonly release: OperationScript<'release', Keys>;
  readonly extend: OperationScript<'extend', Keys>;
  readonly abandon: OperationScript<'abandon', Keys>;
  readonly inspect: I;
}

/** The default layout: one hash, one deadline index and one queue per lock, in one Cluster slot. */
export function hashLayout(prefix: string): Layout<LockKeys, HashKeys, 'inspect'> {
  return {
    keysFor: (resource) => lockKeys(prefix, resource),
    names: hashNames,
    peerChannels: () => NO_CHANNELS,
    scripts: {
      acquireRead: 'acquireRead',
      acquireWrite: 'acquireWrite',
      release: 'release',
      extend: 'extend',
      abandon: 'abandon',
      inspect: 'inspect',
    } satisfies LayoutScripts<HashKeys, 'inspect'>,
    extendAcrossSlots: 'extendAcrossSlots',
    handsOver: true,
    describe: (resource, keys, pages) => {
      const { now, fields, deadlines, queue } = mergePages(pages);
      return describeState(resource, keys.state, now, fields, deadlines, queue);
    },
  };
}

/** A hash-mode lock has no peer to wake: one empty list, not a new one per release. */
const NO_CHANNELS: readonly string[] = [];

/** The keys every hash-mode script takes, in their KEYS order. */
function hashNames(keys: LockKeys): HashKeys {
  return [keys.state, keys.leases, keys.queue];
}

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
export function legacyLayout(
  prefix: string,
  legacyKeys: (resource: string) => LegacyKeyPair,
  layout: 'legacy' | 'bridge',
  cluster: boolean,
): Layout<LegacyLockKeys, LegacyKeys, 'legacyInspect'> {
  return {
    keysFor: (resource) => legacyLockKeys(prefix, resource, resolveLegacyPair(legacyKeys, resource), layout, cluster),
    names: (k) => [k.state, k.leases, k.queue, k.read, k.write, k.readers],
    peerChannels: (k) => [k.peerChannel],
    scripts: {
      acquireRead: 'legacyAcquireRead',
      acquireWrite: 'legacyAcquireWrite',
      release: 'legacyRelease',
      extend: 'legacyExtend',
      abandon: 'legacyAbandon',
      inspect: 'legacyInspect',
    } satisfies LayoutScripts<LegacyKeys, 'legacyInspect'>,
    handsOver: false,
    describe: describeLegacyLock,
  };
}

function describeLegacyLock(resource: string, k: LegacyLockKeys, pages: readonly ScriptReply<'legacyInspect'>[]): LockInfo {
  const { now, fields, deadlines, queue } = mergePages(pages);
  const info = describeState(resource, k.state, now, fields, deadlines, queue);
  // The legacy keys as the last page read them (with the clock it gives), the readers of every page.
  const [, , , , , , readValue, readTtl, writeValue, writeTtl] = pages[pages.length - 1]!;
  const legacy = describeLegacy(
    k,
    now,
    readValue,
    readTtl,
    writeValue,
    writeTtl,
    pages.flatMap((page) => page[10]),
  );
  const writeHeld = info.writer !== null || legacy.write.value !== null;
  const readHeld = info.readers.length > 0 || legacy.read.value !== null;
  return { ...info, mode: writeHeld ? 'write' : readHeld ? 'read' : 'free', legacy };
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
