import { LayoutVersionError } from '../errors.js';
import type { LockKeys } from '../keys/keys.js';
import type { AcquireOutcome, BlockReason, HolderInfo, LockInfo } from './backend.js';
import type { AcquireReply, InspectReply, LegacyInspectReply } from './scripts.js';

/**
 * Decoding the scripts' replies, shared by the hash and the legacy/bridge
 * layouts (their scripts reply alike: lua/includes/*-body.lua).
 *
 * @module
 */

/** The outcome of an acquire script's reply; `leaseMs` is the lease asked for, which a bare fence was granted for. */
export function parseAcquireReply(reply: AcquireReply, leaseMs: number): AcquireOutcome {
  if (typeof reply === 'number') return { granted: true, fence: reply, leaseRemainingMs: leaseMs };
  if (reply[0] === 1) return { granted: true, fence: Number(reply[1]), leaseRemainingMs: Number(reply[2]) };
  const refused = { granted: false, retryAfterMs: Math.max(0, Number(reply[1])), reason: reply[2] as BlockReason } as const;
  if (reply[3] === undefined) return refused;
  return reply[4] === undefined
    ? { ...refused, queuedUntil: [Number(reply[3])] }
    : { ...refused, queuedUntil: [Number(reply[3])], queuedAtUs: [Number(reply[4])] };
}

/**
 * A script's refusal of a lock of another layout version (the error reply
 * `RWLOCK_LAYOUT <lock's version> <script's version>`, lua/includes/state.lua)
 * as a {@link LayoutVersionError}; any other failure as it is.
 */
export function layoutRefusal(error: unknown, keys: LockKeys, resource?: string): unknown {
  const refused = error instanceof Error ? /^RWLOCK_LAYOUT (\S+) (\d+)/.exec(error.message) : null;
  if (refused === null) return error;
  const lock = resource === undefined ? `at "${keys.state}"` : `on "${resource}"`;
  return new LayoutVersionError(Number(refused[1]), Number(refused[2]), lock, { resource, cause: error });
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

/** A flat `[field, value, field, value, ...]` reply as a map. */
export function pairs(flat: string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i < flat.length; i += 2) map.set(flat[i]!, flat[i + 1]!);
  return map;
}

/**
 * The pages of one inspect (lua/includes/inspect-page.lua) as one state: the
 * hash fields and holders' deadlines of every page (an entry read twice, its
 * later reading), the queue in order without repeats, and the server's clock
 * at the last page, which every deadline is counted against.
 */
export function mergePages(pages: readonly (InspectReply | LegacyInspectReply)[]): {
  now: number;
  fields: Map<string, string>;
  deadlines: Map<string, string>;
  queue: string[];
} {
  const fields = new Map<string, string>();
  const deadlines = new Map<string, string>();
  const queue = new Set<string>();
  for (const [, , pageFields, pageDeadlines, pageQueue] of pages) {
    for (const [field, value] of pairs(pageFields)) fields.set(field, value);
    for (const [owner, deadline] of pairs(pageDeadlines)) deadlines.set(owner, deadline);
    for (const owner of pageQueue) queue.add(owner);
  }
  return { now: pages[pages.length - 1]![0], fields, deadlines, queue: [...queue] };
}

/** The sole holder field `o`: its mode's letter, then (after the hold id) its owner. */
const SOLE_HOLDER = /^([wr]) \S+ (.*)$/s;

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
  // A fresh lock's sole holder sits in `o` alone, as '<w|r> <holdId> <owner>' (lua/includes/fresh-grant.lua).
  const sole = SOLE_HOLDER.exec(fields.get('o') ?? '');
  const writerOwner = sole?.[1] === 'w' ? sole[2]! : fields.get('w');
  const writer: HolderInfo | null =
    writerOwner !== undefined && ttl(writerOwner) > 0
      ? { owner: writerOwner, holds: sole ? 1 : holdCount(fields.get('wc')), ttlMs: ttl(writerOwner) }
      : null;
  const readers: HolderInfo[] = [];
  if (sole?.[1] === 'r' && ttl(sole[2]!) > 0) readers.push({ owner: sole[2]!, holds: 1, ttlMs: ttl(sole[2]!) });
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
