/**
 * LockClient's event names are typed: a misspelt name is a compile error on
 * the name, and a known one types its listener's arguments. Type-checked by
 * `npm run typecheck` (which covers the tests), never run.
 */
import type { LockClient } from '../../src/index.js';

export function subscribeAll(locks: LockClient): void {
  locks.on('acquired', (lease, waitedMs) => void [lease.resource, waitedMs.toFixed(1)]);
  locks.once('released', (lease, heldMs) => void [lease.mode, heldMs.toFixed(1)]);
  // A listener of type `never` fits any listener type, so only the name can be wrong here
  // (Node's own typing took any name, and refused only the listener, as `never`).
  // @ts-expect-error: no such event
  locks.on('aquired', undefined as never);
  // @ts-expect-error: no such event
  locks.off('release', undefined as never);
}
