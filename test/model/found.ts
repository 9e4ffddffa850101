/**
 * Counterexamples the model checker found, each a path of steps (labels, as
 * a violation gives them) from its configuration's first state: the tests
 * replay them (model.test.ts), and the scripts must break no invariant on
 * the way. Each was found on scripts that did.
 */
import { CI } from './configs.js';
import type { Config } from './world.js';

const hold = (program: Config['owners'][number]['program'], acrossSlots = false): Config => ({
  name: `hash: a renewal at its deadline${acrossSlots ? ', across slots' : ''}`,
  owners: [{ name: 'A', layout: 'hash', program }],
  lost: 0,
  duplicated: 0,
  crashes: 0,
  pauses: 0,
  giveUp: false,
  fair: false,
  acrossSlots,
});

export interface Found {
  readonly what: string;
  readonly config: Config;
  readonly path: readonly string[];
}

export const FOUND: readonly Found[] = [
  {
    // The sole holder kept in the hash alone, at the ms its lease ends (the hash lives through that ms):
    // its resent acquire moved it into the leases set, whose expiry at that deadline deleted the set at
    // once, so the grant took up its expired hold and that hold's fence again.
    what: 'a resend at the ms a sole holder lease ends gets a new hold and a new fence',
    config: CI.find((c) => c.name === 'hash: two writers')!,
    path: ['A:op:lost', 'clock', 'A:resend'],
  },
  {
    // The renewal of a sole holder kept in the hash alone at the ms its lease ends renewed the expired lease.
    what: 'a renewal at the ms a sole holder lease ends finds it lost',
    config: hold([{ op: 'read', wait: true }, { op: 'extend' }]),
    path: ['A:op', 'clock', 'A:op'],
  },
  {
    what: 'a renewal across slots at the ms a sole holder lease ends finds it lost',
    config: hold([{ op: 'read', wait: true }, { op: 'extend' }], true),
    path: ['A:op', 'clock', 'A:op'],
  },
];
