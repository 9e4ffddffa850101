// What gen-lua sends of a script: its code without comments or layout, every
// string literal as written (`--` in it too), and each line where it was.
import { expect } from 'chai';
// @ts-expect-error: a plain .mjs build script, without declarations
import { stripLua } from '../../scripts/strip-lua.mjs';

const strip = stripLua as (source: string) => string;

describe('the Lua sent to the server (scripts/strip-lua.mjs)', () => {
  it('drops comments, indentation, trailing spaces and blank lines; keeps a shebang first', () => {
    const source =
      '#!lua flags=allow-cross-slot-keys\n--[[\n  header\n]]\n\nlocal a  =  1 -- one\n  if a then\t\n    return a --[==[ x ]] ]==] + 1\n  end\n';
    expect(strip(source)).to.equal('#!lua flags=allow-cross-slot-keys\nlocal a = 1\nif a then\nreturn a + 1\nend');
  });

  it('keeps -- and spacing inside quoted and long-bracket strings', () => {
    const source = 'local s = \'a -- b\'  ..  "c\\" --[[ d"\nlocal t = [[\n  e -- f\n\n]] .. [==[ g ]] -- ]==]\n';
    expect(strip(source)).to.equal('local s = \'a -- b\' .. "c\\" --[[ d"\nlocal t = [[\n  e -- f\n\n]] .. [==[ g ]] -- ]==]');
  });

  it('keeps tokens apart where a comment stood between them', () => {
    expect(strip('local x = a--[[c]]b\n')).to.equal('local x = a b');
  });
});
