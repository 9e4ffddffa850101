// The scripts' sources as the server gets them, from a directory of Lua files
// laid out as lua/ is: shared by scripts/gen-lua.mjs (lua/ itself) and the
// mutation tests of test/model (a mutated copy of lua/, never the real files).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stripLua } from './strip-lua.mjs';

/** A script's name in LUA_SOURCES: its file name in camel case. */
export const scriptName = (file) => file.replace(/\.lua$/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());

/** The script files of `luaDir`, sorted. */
export const scriptFiles = (luaDir) =>
  readdirSync(luaDir)
    .filter((f) => f.endsWith('.lua'))
    .sort();

/** `text` with every `-- @include name` replaced by lua/includes/name.lua of `luaDir`, recursively. */
export function expandIncludes(luaDir, text, seen = new Set()) {
  return text.replace(/^-- @include (\S+)$/gm, (_, name) => {
    if (seen.has(name)) throw new Error(`lua include cycle at ${name}`);
    return expandIncludes(luaDir, readFileSync(join(luaDir, 'includes', `${name}.lua`), 'utf8'), new Set([...seen, name]));
  });
}

/** Every script of `luaDir` by name, includes expanded, comments stripped. */
export function buildLuaSources(luaDir) {
  return Object.fromEntries(
    scriptFiles(luaDir).map((f) => [scriptName(f), stripLua(expandIncludes(luaDir, readFileSync(join(luaDir, f), 'utf8')))]),
  );
}
