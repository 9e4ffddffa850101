import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The owner tokens of the `withRead`/`withWrite` calls enclosing the current
 * async call chain, by lock key: a nested call on the same lock reuses the
 * outer owner, so it is reentrant (or upgrades, or downgrades) instead of
 * deadlocking against itself.
 */
const storage = new AsyncLocalStorage<ReadonlyMap<string, string>>();

export function enclosingOwner(lockKey: string): string | undefined {
  return storage.getStore()?.get(lockKey);
}

export function runAsOwner<T>(lockKey: string, owner: string, fn: () => Promise<T>): Promise<T> {
  const outer = storage.getStore();
  if (outer?.get(lockKey) === owner) return fn();
  return storage.run(new Map(outer).set(lockKey, owner), fn);
}
