// The contracts of the Lua includes: gen-lua refuses a script that includes
// something before binding what it needs, or in the wrong order, and an
// include that uses a name it does not declare. The real lua/ passes.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
// @ts-expect-error: a plain .mjs build script, without declarations
import { checkLuaContracts } from '../../scripts/lua-contracts.mjs';

const check = checkLuaContracts as (luaDir: string) => string[];

/** A lua/ dir of `scripts` and `includes` (name -> text), checked, then removed. */
function problemsOf(scripts: Record<string, string>, includes: Record<string, string>): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'rwlock-lua-'));
  try {
    mkdirSync(join(dir, 'includes'));
    for (const [name, text] of Object.entries(scripts)) writeFileSync(join(dir, `${name}.lua`), text);
    for (const [name, text] of Object.entries(includes)) writeFileSync(join(dir, 'includes', `${name}.lua`), text);
    return check(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const STATE = '-- @needs rcall stateKey\nlocal function spill() rcall("HGET", stateKey, "o") end\n';
const PEERS_A = '-- @provides peers\nlocal function peerWake(_) end\n';
const PEERS_B = '-- @provides peers\n-- @needs rcall\nlocal function peerWake(m) rcall("SPUBLISH", "c", m) end\n';
const BODY = '-- @needs rcall owner state peers\nspill()\npeerWake(owner)\nreturn rcall("TIME")\n';
const includes = { state: STATE, 'peers-a': PEERS_A, 'peers-b': PEERS_B, body: BODY };

describe('Lua include contracts', () => {
  it('hold for every script of lua/', () => {
    expect(check('lua')).to.deep.equal([]);
  });

  it('accept a script that binds what each include needs, in order, with either provider of a role', () => {
    const script = (peers: string) =>
      `local rcall = redis.call\nlocal stateKey = KEYS[1]\nlocal owner = ARGV[1]\n-- @include state\n-- @include ${peers}\n-- @include body\n`;
    expect(problemsOf({ a: script('peers-a'), b: script('peers-b') }, includes)).to.deep.equal([]);
  });

  it('refuse an include before the local it needs, or before the include it needs', () => {
    const problems = problemsOf(
      {
        late: 'local rcall = redis.call\nlocal stateKey = KEYS[1]\n-- @include state\n-- @include peers-a\n-- @include body\nlocal owner = ARGV[1]\n',
        order:
          'local rcall = redis.call\nlocal stateKey = KEYS[1]\nlocal owner = ARGV[1]\n-- @include peers-a\n-- @include body\n-- @include state\n',
      },
      includes,
    );
    expect(problems).to.deep.equal([
      'lua/late.lua includes body before binding owner: bind "local owner" first',
      'lua/order.lua includes body before binding state: include state first',
    ]);
  });

  it('refuse an include that uses a name it does not declare', () => {
    const sneaky = '-- @needs rcall state\nspill()\nreturn owner\n';
    const problems = problemsOf(
      { s: 'local rcall = redis.call\nlocal stateKey = KEYS[1]\nlocal owner = ARGV[1]\n-- @include state\n-- @include sneaky\n' },
      { state: STATE, sneaky },
    );
    expect(problems).to.deep.equal([
      `lua/includes/sneaky.lua uses owner (a script's local) without declaring it: add it to its "-- @needs" line`,
    ]);
  });
});
