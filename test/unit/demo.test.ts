// The demo's pieces that need no server: its command line, and the check
// that tells a whole cached value from a half-built one.
import { expect } from 'chai';
import calculateSlot from 'cluster-key-slot';
import { UsageError } from '../../src/cli/command.js';
import { parseDemoArgs, parseDuration } from '../../src/demo/args.js';
import { cachedValueNames, checkValue, metaValue, partValue } from '../../src/demo/cache-value.js';
import { emptyStats, mergeStats } from '../../src/demo/protocol.js';

/** No Redis variables, and a terminal that nobody answers. */
const ENV = {};
const IO = { out: () => undefined, err: () => undefined, interactive: false, ask: async () => '' };
const parse = (argv: string[]) => parseDemoArgs(argv, ENV, IO);

async function usageError(argv: string[]): Promise<string> {
  try {
    await parse(argv);
  } catch (error) {
    expect(error).to.be.instanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error(`no UsageError for ${JSON.stringify(argv)}`);
}

describe('demo: command line', () => {
  it('has defaults: 10 s on an embedded cluster, 4 processes of 6 readers and 1 rebuild writer', async () => {
    expect(await parse([])).to.deep.include({
      durationMs: 10_000,
      target: undefined,
      processes: 4,
      readers: 6,
      writers: 1,
      values: 3,
      parts: 5,
      withoutLocks: false,
      json: false,
    });
  });

  it('reads durations in ms, s, m, h and bare seconds, from 100 ms to 24 h', () => {
    expect(parseDuration('10s')).to.equal(10_000);
    expect(parseDuration('1500ms')).to.equal(1_500);
    expect(parseDuration('2m')).to.equal(120_000);
    expect(parseDuration('1h')).to.equal(3_600_000);
    expect(parseDuration('2.5')).to.equal(2_500);
    for (const bad of ['', 'soon', '-1s', '10 s', '50ms', '25h']) expect(() => parseDuration(bad), bad).to.throw(UsageError);
  });

  it('takes --redis URLs and --cluster node lists, one of them, in both --opt value and --opt=value forms', async () => {
    expect((await parse(['--redis', 'redis://127.0.0.1:6380'])).target).to.deep.equal({ kind: 'redis', url: 'redis://127.0.0.1:6380' });
    expect((await parse(['--cluster=127.0.0.1:7000,[::1]:7001'])).target).to.deep.equal({
      kind: 'cluster',
      nodes: [
        { host: '127.0.0.1', port: 7000 },
        { host: '::1', port: 7001 },
      ],
    });
    // The CLI's host syntax, with its parser: a bare host means port 6379.
    expect((await parse(['--cluster', '127.0.0.1'])).target).to.deep.equal({ kind: 'cluster', nodes: [{ host: '127.0.0.1', port: 6379 }] });
    expect(await usageError(['--redis', 'http://x'])).to.match(/redis:\/\/ or rediss:\/\//);
    expect(await usageError(['--cluster', '127.0.0.1:99999'])).to.match(/host:port/);
    expect(await usageError(['--redis', 'redis://a', '--cluster', 'b:1'])).to.match(/--redis or --cluster, not both/);
  });

  it("takes the CLI's user, password and TLS options for --redis or --cluster, and the password from the environment only", async () => {
    const target = (await parseDemoArgs(['--cluster', '127.0.0.1:7000', '--user', 'demo', '--insecure'], { REDIS_PASSWORD: 'pw' }, IO))
      .target;
    expect(target).to.deep.equal({
      kind: 'cluster',
      nodes: [{ host: '127.0.0.1', port: 7000 }],
      username: 'demo',
      password: 'pw',
      tls: { rejectUnauthorized: false },
    });
    expect((await parse(['--redis', 'rediss://127.0.0.1:6390'])).target).to.deep.equal({
      kind: 'redis',
      url: 'rediss://127.0.0.1:6390',
      tls: {},
    });
    expect(await usageError(['--tls'])).to.match(/--tls is for --redis or --cluster; without them the demo starts its own Cluster/);
    expect(await usageError(['--redis', 'redis://a', '--ask-pass'])).to.match(/--ask-pass needs a terminal/);
  });

  it('refuses unknown options, missing values, values on flags and out-of-range counts', async () => {
    // node:util parseArgs' own messages.
    expect(await usageError(['--durration', '1s'])).to.match(/Unknown option '--durration'/);
    expect(await usageError(['--duration'])).to.match(/'--duration <value>' argument missing/);
    expect(await usageError(['--duration', '--json'])).to.match(/'--duration' argument is ambiguous/);
    expect(await usageError(['--json=yes'])).to.match(/'--json' does not take an argument/);
    expect(await usageError(['extra'])).to.match(/Unexpected argument 'extra'/);
    expect(await usageError(['--processes', '0'])).to.match(/from 1 to 32/);
    expect(await usageError(['--parts', '1'])).to.match(/from 2 to 100/);
    expect(await usageError(['--readers', '0', '--writers', '0'])).to.match(/cannot both be 0/);
  });
});

describe('demo: the half-built check', () => {
  const names = cachedValueNames(1, 3);
  const whole = (version: number): string[] => {
    const parts = [0, 1, 2].map((p) => partValue(version, p));
    return [metaValue(version, parts), ...parts];
  };

  it('names a value so that its lock and every data key share one Cluster slot', () => {
    const slot = calculateSlot(names.resource);
    for (const key of [names.meta, ...names.parts]) expect(calculateSlot(key), key).to.equal(slot);
  });

  it('accepts a whole value', () => {
    expect(checkValue(whole(7))).to.equal(undefined);
  });

  it('catches parts of two versions, a missing part or meta, and a checksum that does not match', () => {
    const v7 = whole(7);
    const v8 = whole(8);
    expect(checkValue([v7[0]!, v8[1]!, v7[2]!, v7[3]!])).to.match(/meta says version 7, parts are versions \[8, 7, 7\]/);
    expect(checkValue([v7[0]!, v7[1]!, null, v7[3]!])).to.match(/versions \[7, missing, 7\]/);
    expect(checkValue([null, ...v7.slice(1)])).to.equal('meta is missing');
    expect(checkValue([v7[0]!, v7[1]!, v7[2]!, '7:tampered'])).to.match(/checksum .* does not match/);
  });

  it('adds counters and keeps the longest waits when merging workers', () => {
    const a = { ...emptyStats(), reads: 3, maxReaderWaitMs: 5, notes: ['a'] };
    const b = { ...emptyStats(), reads: 4, maxReaderWaitMs: 9, halfBuilt: 1, notes: ['b'] };
    expect(mergeStats([a, b])).to.deep.include({ reads: 7, maxReaderWaitMs: 9, halfBuilt: 1, notes: ['a', 'b'] });
  });
});
