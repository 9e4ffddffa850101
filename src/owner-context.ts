import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The owner tokens of the `withRead`/`withWrite` calls enclosing the current
 * async call chain, by lock key: a nested call on the same lock reuses the
 * outer owner, so it is reentrant (or upgrades, or downgrades) instead of
 * deadlocking against itself.
 */
const storage = new AsyncLocalStorage<ReadonlyMap<string, string>>();

/**
 * `withRead`/`withWrite` calls whose function is running. When none is, the
 * storage is disabled: on Node 20 and 22 an enabled AsyncLocalStorage runs
 * async_hooks on every promise of the process, and one `withWrite` call
 * left the application's own work 8-15 % slower for good (Node 24's
 * AsyncContextFrame costs nothing of the kind). Work that a function left
 * running after it returned may then find its owner or none: its lock was
 * released by then, so either way such a call acquires anew.
 */
let running = 0;

export function enclosingOwner(lockKey: string): string | undefined {
  return storage.getStore()?.get(lockKey);
}

export async function runAsOwner<T>(lockKey: string, owner: string, fn: () => Promise<T>): Promise<T> {
  const outer = storage.getStore();
  if (outer?.get(lockKey) === owner) return fn();
  running++;
  try {
    return await storage.run(new Map(outer).set(lockKey, owner), fn);
  } finally {
    if (--running === 0) storage.disable();
  }
}
