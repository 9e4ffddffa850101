// `npm run docs:check` refuses internal issue numbers and "round N" history in
// shipped files (scripts/docs-check/history.ts), and lets upstream citations by.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { historyProblems, shippedFiles } from '../../scripts/docs-check/history.js';

const root = join(fileURLToPath(import.meta.url), '..', '..', '..');
const found = (text: string): [number, string][] => historyProblems(text).map((p) => [p.line, p.found]);

describe('docs:check: no tracker numbers or history in shipped files', () => {
  it('refuses an internal issue number, in each way one is written, at its line', () => {
    const text = [
      '# Notes',
      'Renewal stops after 250 µs (issue 27).',
      'The targets of issues 6, 14 and 27.',
      'Fixed in issue #44, see also (#45) and PR 12.',
      '// a code comment: as pull request 9 asked',
    ].join('\n');
    expect(found(text)).to.deep.equal([
      [2, 'issue 27'],
      [3, 'issues 6'],
      [4, 'issue #44'],
      [4, 'PR 12'],
      [4, '#45'],
      [5, 'pull request 9'],
    ]);
  });

  it('refuses "round N" history, also across a line break', () => {
    expect(found('Measured in round nine.\nAs of round\nthirteen, and round 7 before.')).to.deep.equal([
      [1, 'round nine'],
      [2, 'round thirteen'],
      [3, 'round 7'],
    ]);
  });

  it('refuses the other ways a tracker number is written', () => {
    const text = [
      'As issue no. 12 and issue number 13 asked; see issue-14 and Issues: 15.',
      'Bug 3 and ticket 9; GH-44; redis-rwlock#45.',
      'Also github.com/acme/redis-rwlock/issues/46.',
    ].join('\n');
    expect(found(text)).to.deep.equal([
      [1, 'issue no. 12'],
      [1, 'issue number 13'],
      [1, 'issue-14'],
      [1, 'Issues: 15'],
      [2, 'Bug 3'],
      [2, 'ticket 9'],
      [2, 'GH-44'],
      [2, 'redis-rwlock#45'],
      [3, 'github.com/acme/redis-rwlock/issues/46'],
    ]);
  });

  it("refuses a number or a round split by a line break in a code comment (JSDoc, //, Lua's --, #)", () => {
    const text = [
      '/**',
      ' * The bound of issue',
      ' * 27, measured in round',
      ' * nine.',
      ' */',
      '// see issue',
      '// #7',
      '-- from round',
      '-- 3 on',
      '# as issue',
      '# 12 found',
    ].join('\n');
    expect(found(text).map(([line, f]) => [line, f.replace(/ (?:\*|\/\/|--|#) /, ' ')])).to.deep.equal([
      [2, 'issue 27'],
      [3, 'round nine'],
      [6, 'issue #7'],
      [8, 'round 3'],
      [10, 'issue 12'],
    ]);
  });

  it('refuses rounds counted in the plural, as an ordinal, or in roman numerals', () => {
    const text = 'Rounds 3 and 4 found it; the 13th round and the ninth round kept it; Round IX.';
    expect(found(text).map(([, f]) => f)).to.deep.equal(['Rounds 3', '13th round', 'ninth round', 'Round IX']);
  });

  it("refuses a link to this project's own tracker, and its owner/repo#N", () => {
    const text = 'See [the fix](https://github.com/acme/redis-rwlock/issues/44) and acme/redis-rwlock#45.';
    expect(found(text).map(([, f]) => f)).to.deep.equal(['[the fix](https://github.com/acme/redis-rwlock/issues/44)', '#45']);
  });

  it("lets an upstream project's issue by when the citation names the project", () => {
    const text = [
      'Redis fixed it upstream: [Redis issue 9105](https://github.com/redis/redis/issues/9105).',
      'Also redis/redis#9105 and ioredis/ioredis#1234.',
      '// https://github.com/nodejs/node/issues/42345 explains the timer',
    ].join('\n');
    expect(historyProblems(text)).to.deep.equal([]);
  });

  it('lets an upstream issue by when its words stand next to its link or owner/repo#N, and no farther', () => {
    const text = [
      '// Redis issue 9105 (https://github.com/redis/redis/issues/9105) explains it,',
      '// as Node issue 42345 (nodejs/node#42345) does the timer.',
    ].join('\n');
    expect(historyProblems(text)).to.deep.equal([]);
    const far = `Redis issue 9105.${' Unrelated text.'.repeat(20)} https://github.com/redis/redis/issues/9105`;
    expect(found(far)).to.deep.equal([[1, 'issue 9105']]);
  });

  it('lets "issue" counting Redis commands, "round" as a verb and a numbered node or step by', () => {
    const text = [
      'Each hand-over issues 2 EVALSHA, a retry may issue 3 SPUBLISH calls, and a tick issues 2 more calls.',
      'Durations round 12 ms up and round 5 down; the first round and the second round of renewal.',
      'The lock is held on node #3 of 5, from step #2 of the guide.',
    ].join('\n');
    expect(historyProblems(text)).to.deep.equal([]);
  });

  it('lets "issue" as a verb, "round" in its other senses and a link anchor by', () => {
    const text = [
      'Each tick issues 16 calls, and a client may issue 2 commands per grant.',
      'The next round renews them; a renewal round; libraries in round-robin; round 1.5 up.',
      'See [the first step](guide/start.md#1-install) and &#123;.',
    ].join('\n');
    expect(historyProblems(text)).to.deep.equal([]);
  });

  it('reads the shipped files from package.json "files", with README.md and src/', () => {
    const files = shippedFiles(root);
    for (const f of ['README.md', 'CHANGELOG.md', 'bench/README.md', 'bench/config.ts', 'docs/guide/start.md', 'examples/fencing.ts']) {
      expect(files).to.include(f);
    }
    expect(files.some((f) => f.startsWith('lua/includes/'))).to.equal(true);
    expect(files).to.include('src/index.ts');
    expect(files).to.include('package.json');
    expect(files.some((f) => /^(dist|test|node_modules)\//.test(f))).to.equal(false);
  });
});
