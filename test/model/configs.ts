/**
 * The configurations the model checker explores (world.ts says what each
 * field bounds). `CI` runs in `npm run test:model`, those that find most
 * slips soonest first (the mutation tests stop at the first that breaks an
 * invariant); `LARGER` in `npm run test:faults` (test/faults/model.test.ts).
 */
import type { Config, Op, OwnerLayout, OwnerSpec } from './world.js';

const acquire = (mode: 'read' | 'write'): Op => ({ op: mode, wait: true });
const tryTo = (mode: 'read' | 'write'): Op => ({ op: mode, wait: false });
const release = (mode: 'read' | 'write'): Op => ({ op: 'release', mode });
const extend: Op = { op: 'extend' };

const owner = (name: string, program: Op[], layout: OwnerLayout = 'hash'): OwnerSpec => ({ name, layout, program });

/** Every environment event, once per path. */
const EVENTS = { lost: 1, duplicated: 1, crashes: 1, pauses: 1, giveUp: false, fair: false } as const;

export const CI: readonly Config[] = [
  {
    name: 'hash: upgrade beside a reader',
    owners: [
      owner('A', [acquire('read'), acquire('write'), release('write'), release('read')]),
      owner('B', [acquire('read'), release('read')]),
    ],
    ...EVENTS,
  },
  {
    name: 'hash: a reader and a writer',
    owners: [owner('A', [acquire('read'), release('read')]), owner('B', [acquire('write'), release('write')])],
    ...EVENTS,
  },
  {
    name: 'hash: two writers',
    owners: [owner('A', [acquire('write'), release('write')]), owner('B', [acquire('write'), release('write')])],
    ...EVENTS,
  },
  {
    name: "hash: a fence ahead of the server's clock",
    owners: [owner('A', [acquire('write'), release('write')]), owner('B', [acquire('read'), release('read')])],
    ...EVENTS,
    fenceAheadUs: 5000,
  },
  {
    name: 'hash: fenced writes of a writer whose lease runs out',
    owners: [
      owner('A', [acquire('write'), { op: 'fencedSet' }, { op: 'fencedSet' }, release('write')]),
      owner('B', [acquire('read'), { op: 'fencedGet' }, release('read')]),
    ],
    ...EVENTS,
    lost: 0,
    duplicated: 0,
  },
  {
    name: 'hash: Cluster renewal across slots, a writer queued',
    owners: [owner('A', [acquire('read'), extend, acquire('read'), release('read')]), owner('B', [acquire('write'), release('write')])],
    ...EVENTS,
    acrossSlots: true,
  },
  {
    name: 'legacy: a reader and a writer',
    owners: [owner('A', [acquire('read'), release('read')], 'legacy'), owner('B', [acquire('write'), release('write')], 'legacy')],
    ...EVENTS,
  },
  {
    name: 'legacy and bridge: a writer of each',
    owners: [owner('A', [acquire('write'), release('write')], 'legacy'), owner('B', [acquire('write'), release('write')], 'bridge')],
    ...EVENTS,
  },
  {
    name: 'hash: downgrade before a reader',
    owners: [
      owner('A', [acquire('write'), acquire('read'), release('write'), release('read')]),
      owner('B', [acquire('read'), release('read')]),
    ],
    ...EVENTS,
  },
  {
    name: 'hash: reentrant reads, renewal and a writer',
    owners: [
      owner('A', [acquire('read'), extend, acquire('read'), release('read'), release('read')]),
      owner('B', [acquire('write'), release('write')]),
    ],
    ...EVENTS,
  },
  {
    name: 'hash: a try and a writer that gives up, fair queue',
    owners: [
      owner('A', [tryTo('write'), release('write'), acquire('read'), release('read')]),
      owner('B', [acquire('write'), release('write')]),
    ],
    ...EVENTS,
    giveUp: true,
    fair: true,
  },
  {
    name: 'hash and bridge: an upgrade and a reader',
    owners: [
      owner('A', [acquire('read'), acquire('write'), release('write'), release('read')], 'bridge'),
      owner('B', [acquire('read'), release('read')], 'hash'),
    ],
    ...EVENTS,
  },
  {
    name: 'legacy and bridge: a downgrade and a reader',
    owners: [
      owner('A', [acquire('write'), acquire('read'), release('write'), release('read')], 'bridge'),
      owner('B', [acquire('read'), release('read')], 'legacy'),
    ],
    ...EVENTS,
  },
];

/** Three owners: the queue's pass-over rules (a writer waiting before the lock was freed may pass the head). */
const THREE = { lost: 0, duplicated: 0, crashes: 0, pauses: 1, giveUp: false } as const;

export const LARGER: readonly Config[] = [
  {
    name: 'legacy: three writers',
    owners: ['A', 'B', 'C'].map((n) => owner(n, [acquire('write'), release('write')], 'legacy')),
    ...THREE,
    pauses: 2,
    fair: false,
  },
  {
    name: 'hash: three writers, no hand-over (as in redlock mode)',
    owners: ['A', 'B', 'C'].map((n) => owner(n, [acquire('write'), release('write')])),
    ...THREE,
    pauses: 2,
    fair: false,
    handOver: false,
  },
  {
    name: 'legacy: three writers, fair queue',
    owners: ['A', 'B', 'C'].map((n) => owner(n, [acquire('write'), release('write')], 'legacy')),
    ...THREE,
    fair: true,
  },
];
