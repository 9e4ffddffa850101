import { LUA_SOURCES } from './lua/scripts.generated.js';
import type { RedisClient } from './redis.js';

/** Keys per script; `undefined` means the caller passes the key count first (variadic). */
const NUMBER_OF_KEYS = {
  acquireRead: 3,
  acquireWrite: 3,
  release: 3,
  extend: undefined,
  inspect: 3,
  abandon: 3,
  fencedSet: 2,
  legacyAcquireRead: 6,
  legacyAcquireWrite: 6,
  legacyRelease: 6,
  legacyExtend: undefined,
  legacyInspect: 6,
  legacyAbandon: 6,
} as const satisfies Record<keyof typeof LUA_SOURCES, number | undefined>;

export type ScriptName = keyof typeof LUA_SOURCES;

/** The command name a script is defined under on a client: namespaced, so it cannot clash with the user's own. */
export const commandName = (name: ScriptName): string => `rwlock_${name}`;

type Invoke = (...args: (string | number)[]) => Promise<unknown>;

const defined = new WeakSet<object>();

/**
 * Defines the scripts on `client` (once per client) with ioredis
 * `defineCommand`, which sends EVAL the first time on each connection and
 * EVALSHA after, and resends on NOSCRIPT (after SCRIPT FLUSH or a failover).
 */
export function defineScripts(client: RedisClient): void {
  if (defined.has(client)) return;
  for (const name of Object.keys(LUA_SOURCES) as ScriptName[]) {
    const numberOfKeys = NUMBER_OF_KEYS[name];
    client.defineCommand(
      commandName(name),
      numberOfKeys === undefined ? { lua: LUA_SOURCES[name] } : { lua: LUA_SOURCES[name], numberOfKeys },
    );
  }
  defined.add(client);
}

/** Runs script `name` on `client`, which must have been passed to {@link defineScripts}. */
export function runScript(client: RedisClient, name: ScriptName, args: (string | number)[]): Promise<unknown> {
  return ((client as unknown as Record<string, Invoke>)[commandName(name)] as Invoke).apply(client, args);
}
