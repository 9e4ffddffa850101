/**
 * The spill-first invariant, checked on every lock script: a fresh lock keeps
 * its sole holder in the hash alone (field `o`, lua/includes/fresh-grant.lua),
 * and every script but the fresh grant and its release must first move that
 * holder into the usual layout (`spill()`), or it would not see the holder.
 * So each operation of each layout runs twice, on a lock whose holder sits
 * inline and on the same lock with its holder spilled, and must answer and
 * leave the lock alike. A script that skipped `spill()` answers differently
 * (grants beside the holder, finds nothing to release or extend).
 */
import { expect } from 'chai';
import { type AcquireRequest, ALL_HOLDS, type LockBackend, type LockInfo } from '../../src/backends/backend.js';
import { hashLayout, type Layout, legacyLayout } from '../../src/backends/layouts.js';
import { ScriptedBackend } from '../../src/backends/scripted.js';
import { holderArg } from '../../src/backends/scripts.js';
import { driverFor } from '../../src/clients/index.js';
import type { LockMode } from '../../src/errors.js';
import type { LockKeys } from '../../src/keys/keys.js';
import { forEachTopology } from '../setup/topologies.js';

const PREFIX = 'rwlock';
const LEASE_MS = 10_000;
const HOLDER = 'holder';
const OTHER = 'other';

type Operation = keyof Layout<LockKeys>['scripts'];

/** What each case does with the lock, and the operation (so the script) it runs. */
interface Case {
  readonly op: Operation;
  readonly name: string;
  run(backend: LockBackend, keys: LockKeys, resource: string): Promise<unknown>;
}

let holdIds = 0;
const acquire =
  (mode: LockMode, owner: string, waitBeatMs = 0) =>
  (backend: LockBackend, keys: LockKeys, resource: string) =>
    backend.acquire(request(resource, keys, mode, owner, waitBeatMs));

function request(resource: string, keys: LockKeys, mode: LockMode, owner: string, waitBeatMs = 0): AcquireRequest {
  return {
    resource,
    keys,
    mode,
    owner,
    holdId: `h${++holdIds}`,
    leaseMs: LEASE_MS,
    honourIntent: true,
    waitBeatMs,
    fair: false,
  };
}

const CASES: readonly Case[] = [
  { op: 'acquireRead', name: 'another owner reads', run: acquire('read', OTHER) },
  { op: 'acquireRead', name: 'the holder reads', run: acquire('read', HOLDER) },
  { op: 'acquireWrite', name: 'another owner writes, without waiting', run: acquire('write', OTHER) },
  { op: 'acquireWrite', name: 'another owner writes, waiting', run: acquire('write', OTHER, 2_000) },
  { op: 'acquireWrite', name: 'the holder writes', run: acquire('write', HOLDER) },
  { op: 'release', name: 'the holder releases its hold', run: (b, k) => b.release(k, holderMode(k), HOLDER, firstHold(k)) },
  { op: 'release', name: 'another owner releases', run: (b, k) => b.release(k, 'read', OTHER, 'nothing') },
  {
    op: 'extend',
    name: 'the holder extends',
    run: (b, k) => b.extend([{ keys: k, owner: HOLDER, leaseMs: 2 * LEASE_MS, holdIds: [firstHold(k)] }]),
  },
  { op: 'extend', name: 'another owner extends', run: (b, k) => b.extend([{ keys: k, owner: OTHER, leaseMs: LEASE_MS, holdIds: [] }]) },
  { op: 'abandon', name: 'the holder abandons every hold', run: (b, k) => b.abandon(k, HOLDER, ALL_HOLDS) },
  { op: 'abandon', name: 'another owner abandons', run: (b, k) => b.abandon(k, OTHER, ALL_HOLDS) },
  { op: 'inspect', name: 'inspect', run: (b, k, r) => b.inspect(r, k) },
];

/** Each lock's holder: its mode and the id of its hold, set when the lock is made. */
const holders = new Map<string, { mode: LockMode; holdId: string }>();
const holderMode = (keys: LockKeys) => holders.get(keys.state)!.mode;
const firstHold = (keys: LockKeys) => holders.get(keys.state)!.holdId;

forEachTopology('spill first: every script sees a sole holder kept inline', (ctx) => {
  it('covers every operation of a layout', () => {
    const covered = new Set(CASES.map((c) => c.op));
    expect([...covered].sort()).to.deep.equal(Object.keys(hashLayout(PREFIX).scripts).sort());
  });

  const layouts = {
    // Bridge mode's own state is the hash-mode lock, where a hash-mode client's fresh grant keeps its holder inline.
    hash: () => hashLayout(PREFIX) as Layout<LockKeys>,
    bridge: (cluster: boolean) =>
      legacyLayout(PREFIX, (r) => ({ read: `{${r}}:read`, write: `{${r}}:write` }), 'bridge', cluster) as Layout<LockKeys>,
  };

  for (const [layoutName, makeLayout] of Object.entries(layouts)) {
    for (const mode of ['read', 'write'] as const) {
      for (const c of CASES) {
        it(`${layoutName}, a ${mode} holder: ${c.name} (${c.op}) answers and leaves the lock as with the holder spilled`, async () => {
          const redis = ctx.client();
          const layout = makeLayout(ctx.kind === 'cluster');
          const backend = new ScriptedBackend(driverFor(redis), layout);
          const fresh = new ScriptedBackend(driverFor(redis), hashLayout(PREFIX));
          const outcomes: unknown[] = [];
          for (const spilled of [false, true]) {
            const resource = `spill-${layoutName}-${mode}-${CASES.indexOf(c)}-${spilled}`;
            const keys = backend.keysFor(resource);
            const holdId = `h${++holdIds}`;
            const grant = await fresh.acquire({ ...request(resource, keys, mode, HOLDER), holdId });
            expect(grant.granted, 'the fresh grant').to.equal(true);
            holders.set(keys.state, { mode, holdId });
            expect(await redis.hget(keys.state, 'o'), 'the holder sits inline').to.equal(holderArg(mode, holdId, HOLDER));
            if (spilled) {
              // A refused try that does not wait spills the holder and changes nothing else.
              const refused = await backend.acquire(request(resource, keys, mode === 'read' ? 'write' : 'read', 'bystander'));
              expect(refused.granted).to.equal(false);
              expect(await redis.hget(keys.state, 'o'), 'the holder was spilled').to.equal(null);
            }
            const fence = grant.granted ? grant.fence : NaN;
            const answer = normalise(await c.run(backend, keys, resource), fence);
            const after = normalise(await backend.inspect(resource, keys), fence);
            outcomes.push({ answer, after });
          }
          expect(outcomes[0], 'inline holder (first) against spilled holder (second)').to.deep.equal(outcomes[1]);
        });
      }
    }
  }
});

/**
 * An outcome without what differs between two locks by construction: times
 * left (rounded to seconds), deadlines (kept only as there or not), resource
 * and key names, and fences, which are kept only as "the holder's" or "another".
 */
function normalise(value: unknown, holderFence: number): unknown {
  if (Array.isArray(value)) return value.map((v) => normalise(v, holderFence));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (k === 'resource' || k === 'key' || k === 'serverTimeMs') continue;
    if (k === 'legacy') {
      const legacy = v as NonNullable<LockInfo['legacy']>;
      out[k] = {
        read: legacy.read.value,
        write: legacy.write.value,
        oldWriter: legacy.oldWriter,
        readers: legacy.readers.map((r) => r.owner),
      };
    } else if (k === 'fence') out[k] = v === holderFence ? 'holder' : v === null ? null : 'other';
    else if (k === 'ttlMs' || k === 'leaseRemainingMs' || k === 'retryAfterMs') out[k] = Math.round(Number(v) / 1000);
    else if (k === 'queuedUntil') out[k] = Array.isArray(v) ? v.map((d) => (typeof d === 'number' ? 'a deadline' : d)) : v;
    else if (k === 'queuedAtUs') out[k] = Array.isArray(v) ? v.map((d) => (typeof d === 'number' ? 'a place' : d)) : v;
    else out[k] = normalise(v, holderFence);
  }
  return out;
}
