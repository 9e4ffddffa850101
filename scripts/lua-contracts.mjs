// The contracts of the Lua includes (lua/includes/*.lua), checked by
// scripts/gen-lua.mjs before it generates anything.
//
// An include declares, in its header, what it needs and what role it plays:
//   -- @needs rcall stateKey owner state peers   (locals, includes or roles)
//   -- @provides peers                           (a role another include can stand for)
// Every top-level `local` and `local function` of an include is what it
// defines. A script must bind (as a top-level local, or through an earlier
// include) everything an include needs before it includes it; and an
// include must declare every name it uses that a script or another include
// binds (so a new dependency cannot slip in unannounced).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The text without comments and string literals (their contents are not code). */
export function codeOf(text) {
  return text
    .replace(/--\[(=*)\[[\s\S]*?\]\1\]/g, ' ')
    .replace(/--[^\n]*/g, ' ')
    .replace(/'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"/g, "''");
}

/** Names a text defines at its top level: `local a, b = ...`, `local a`, `local function f`. */
export function topLevelNames(text) {
  const names = new Set();
  for (const line of codeOf(text).split('\n')) {
    const fn = /^local function ([A-Za-z_]\w*)/.exec(line);
    if (fn) names.add(fn[1]);
    const vars = /^local ((?:[A-Za-z_]\w*\s*,\s*)*[A-Za-z_]\w*)\s*(?:=|$)/.exec(line);
    if (vars && !fn) for (const name of vars[1].split(',')) names.add(name.trim());
  }
  return names;
}

/** Every name a text declares anywhere: locals at any depth, functions, parameters, loop variables. */
function declaredNames(text) {
  const names = new Set(topLevelNames(text));
  const code = codeOf(text);
  for (const m of code.matchAll(/\blocal\s+(?:function\s+)?((?:[A-Za-z_]\w*\s*,\s*)*[A-Za-z_]\w*)/g)) {
    for (const name of m[1].split(',')) names.add(name.trim());
  }
  for (const m of code.matchAll(/\bfunction\s*[A-Za-z_.:\w]*\s*\(([^)]*)\)/g)) {
    for (const name of m[1].split(',')) if (name.trim() && name.trim() !== '...') names.add(name.trim());
  }
  for (const m of code.matchAll(/\bfor\s+((?:[A-Za-z_]\w*\s*,\s*)*[A-Za-z_]\w*)\s+(?:=|in)\b/g)) {
    for (const name of m[1].split(',')) names.add(name.trim());
  }
  return names;
}

/** Names a text uses (not as a field: `a.b` uses `a` only). */
function usedNames(text) {
  return new Set([...codeOf(text).matchAll(/(?<![.:\w])([A-Za-z_]\w*)/g)].map((m) => m[1]));
}

/** The `@needs` and `@provides` lines of an include. */
export function contractOf(text) {
  const list = (tag) => [...text.matchAll(new RegExp(`^-- @${tag} (.+)$`, 'gm'))].flatMap((m) => m[1].trim().split(/\s+/));
  return { needs: list('needs'), provides: list('provides') };
}

/**
 * Checks every script of `luaDir` against the contracts of the includes it
 * uses. Returns the problems found, each naming the file and what to do.
 */
export function checkLuaContracts(luaDir) {
  const problems = [];
  const includeDir = join(luaDir, 'includes');
  const includes = new Map(
    readdirSync(includeDir)
      .filter((f) => f.endsWith('.lua'))
      .map((f) => {
        const text = readFileSync(join(includeDir, f), 'utf8');
        const name = f.replace(/\.lua$/, '');
        return [name, { text, ...contractOf(text), defines: topLevelNames(text), declared: declaredNames(text) }];
      }),
  );
  const scripts = readdirSync(luaDir)
    .filter((f) => f.endsWith('.lua'))
    .map((f) => [f, readFileSync(join(luaDir, f), 'utf8')]);

  // What scripts and includes bind: a name an include uses from this set must be in its @needs.
  const bound = new Map(); // name -> where it comes from (a script local, or an include)
  for (const [, text] of scripts) for (const name of topLevelNames(text)) bound.set(name, 'script');
  const roles = new Map(); // role -> includes that provide it
  for (const [name, inc] of includes) for (const role of inc.provides) roles.set(role, [...(roles.get(role) ?? []), name]);
  // A name of an include that plays a role is the role's: a script may include either provider.
  for (const [name, inc] of includes) for (const defined of inc.defines) bound.set(defined, inc.provides[0] ?? name);

  for (const [name, inc] of includes) {
    const covered = new Set(inc.needs);
    for (const need of inc.needs) {
      for (const provider of [need, ...(roles.get(need) ?? [])]) {
        for (const defined of includes.get(provider)?.defines ?? []) covered.add(defined);
      }
    }
    for (const used of usedNames(inc.text)) {
      if (inc.declared.has(used) || covered.has(used) || !bound.has(used)) continue;
      const from = bound.get(used);
      problems.push(
        `lua/includes/${name}.lua uses ${used} (${from === 'script' ? "a script's local" : `from ${from}`}) ` +
          `without declaring it: add it${from === 'script' ? '' : ` (or ${from})`} to its "-- @needs" line`,
      );
    }
  }

  for (const [file, text] of scripts) {
    const have = new Set();
    for (const line of text.split('\n')) {
      const include = /^-- @include (\S+)$/.exec(line);
      if (!include) {
        for (const defined of topLevelNames(line)) have.add(defined);
        continue;
      }
      const inc = includes.get(include[1]);
      if (!inc) {
        problems.push(`lua/${file} includes ${include[1]}, which is not in lua/includes/`);
        continue;
      }
      for (const need of inc.needs) {
        if (!have.has(need)) {
          problems.push(
            `lua/${file} includes ${include[1]} before binding ${need}` +
              (includes.has(need) || roles.has(need)
                ? `: include ${roles.has(need) ? roles.get(need).join(' or ') : need} first`
                : `: bind "local ${need}" first`),
          );
        }
      }
      have.add(include[1]);
      for (const role of inc.provides) have.add(role);
      for (const defined of inc.defines) have.add(defined);
    }
  }
  return problems;
}
