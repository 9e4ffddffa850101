import { createHash } from 'node:crypto';
import type { ScriptName } from '../backends/scripts.js';
import { LUA_SOURCES } from '../lua/scripts.generated.js';

let shas: Record<ScriptName, string> | undefined;

/** Each library script's SHA-1, as `EVALSHA` names it (hashed on first use). */
export function shaOf(name: ScriptName): string {
  shas ??= Object.fromEntries(
    Object.entries(LUA_SOURCES).map(([n, source]) => [n, createHash('sha1').update(source).digest('hex')]),
  ) as Record<ScriptName, string>;
  return shas[name];
}
