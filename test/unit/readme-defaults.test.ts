// The README's options table is what a user reads: every option the client
// takes has a row, and each row's default is the one the code applies.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { CLIENT_DEFAULTS } from '../../src/options.js';

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** The `| \`name\` | default | meaning |` rows of the LockClient options table. */
function optionRows(): Map<string, string> {
  const start = README.indexOf('| option | default | meaning |');
  expect(start, 'the options table').to.be.greaterThan(0);
  const rows = new Map<string, string>();
  for (const line of README.slice(start).split('\n').slice(2)) {
    if (!line.startsWith('|')) break;
    const [name, value] = line.split(' | ').map((cell) => cell.replace(/^\|\s*/, '').trim());
    rows.set(name!.replace(/`/g, ''), value!);
  }
  return rows;
}

/** A default as the README writes it: `'text'`, `30000`, `true`, `{ a: 1 }`, or `off`. */
function defaultIn(cell: string): unknown {
  const code = cell.replace(/^`+\s?|\s?`+$/g, '');
  if (code === 'off') return undefined;
  if (code.startsWith("'")) return code.slice(1, -1);
  if (code.startsWith('{')) return JSON.parse(code.replace(/(\w+):/g, '"$1":'));
  return JSON.parse(code);
}

describe('README: the LockClient options table', () => {
  const rows = optionRows();

  it('has a row for every option, and no other', () => {
    expect([...rows.keys()].sort()).to.deep.equal(Object.keys(CLIENT_DEFAULTS).sort());
  });

  it('gives each default as the code applies it', () => {
    for (const [name, cell] of rows) {
      if (name === 'legacyKeys') continue; // a function: checked below
      expect(defaultIn(cell), name).to.deep.equal(CLIENT_DEFAULTS[name as keyof typeof CLIENT_DEFAULTS]);
    }
  });

  it('writes the default legacy key names the way the code makes them', () => {
    const cell = rows.get('legacyKeys')!;
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the README shows the template itself
    expect(cell).to.include('read: `${r}:read`, write: `${r}:write`');
    expect(CLIENT_DEFAULTS.legacyKeys('r')).to.deep.equal({ read: 'r:read', write: 'r:write' });
  });
});
