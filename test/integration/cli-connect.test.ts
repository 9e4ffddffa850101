/**
 * How the CLI reaches a secured server: `$REDIS_URL`, an ACL user with its
 * password from `$REDIS_PASSWORD` (never needed in argv), TLS with a CA file
 * or `--insecure` (warned), and bad combinations refused before connecting.
 * Against a real redis-server with an ACL user and a TLS port (certificates
 * made for the run), the CLI run as its users run it: a separate process.
 * No password ever shows in its output.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { EXIT } from '../../src/cli/command.js';
import { LockClient } from '../../src/index.js';
import { type RedisServerHandle, startRedisServer, type TlsEndpoint } from '../../src/testing/index.js';
import { bundled } from '../support/bundled.js';

const CLI = fileURLToPath(new URL('../../src/cli/index.ts', import.meta.url));
const PASSWORD = 'pw-7f3a-secret';

interface Run {
  code: number | null;
  out: string;
}

/** Runs the CLI in its own process with `env` added to an environment without Redis variables. */
function cli(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  const base = { ...process.env };
  for (const name of ['REDIS_URL', 'REDIS_PASSWORD', 'REDISCLI_AUTH']) delete base[name];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bundled(CLI), ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...base, ...env } });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, out }));
    child.stdin.end();
  });
}

describe('CLI connections: ACL users, passwords, REDIS_URL and TLS', function () {
  this.timeout(60_000);
  let server: RedisServerHandle;
  let certs: TlsEndpoint;
  let tlsPort: number;
  let plain: string;
  let holder: { redis: Redis; locks: LockClient };

  before(async () => {
    server = await startRedisServer({ tls: true });
    certs = server.tls!;
    tlsPort = certs.port;
    plain = `redis://127.0.0.1:${server.port}`;
    const admin = new Redis({ host: '127.0.0.1', port: server.port });
    await admin.call('ACL', 'SETUSER', 'operator', 'on', `>${PASSWORD}`, '~rwlock*', '&rwlock*', '+@all');
    // A lock to look at, held by a library user for the whole suite.
    holder = { redis: admin, locks: new LockClient(admin) };
    await holder.locks.lock('job:{1}').acquireWrite();
  });
  after(async () => {
    await holder.locks.close();
    holder.redis.disconnect();
    await server.stop();
  });

  const noSecret = (run: Run) => expect(run.out).to.not.include(PASSWORD);

  it('takes the server from $REDIS_URL when --redis is not given', async () => {
    const run = await cli(['list', '--json'], { REDIS_URL: plain });
    expect(run.code, run.out).to.equal(EXIT.OK);
    expect(run.out).to.include('job:{1}');
  });

  it('logs in as --user with the password from $REDIS_PASSWORD (or $REDISCLI_AUTH), and fails without it', async () => {
    for (const variable of ['REDIS_PASSWORD', 'REDISCLI_AUTH']) {
      const run = await cli(['inspect', 'job:{1}', '--redis', plain, '--user', 'operator', '--json'], { [variable]: PASSWORD });
      expect(run.code, run.out).to.equal(EXIT.OK);
      expect(JSON.parse(run.out).mode).to.equal('write');
      noSecret(run);
    }
    const wrong = await cli(['inspect', 'job:{1}', '--redis', plain, '--user', 'operator'], { REDIS_PASSWORD: 'not-it' });
    expect(wrong.code).to.equal(EXIT.FAILED);
    expect(wrong.out).to.match(/WRONGPASS|invalid username-password/);
    expect(wrong.out).to.not.include('not-it');
  });

  it('still takes a password in the URL, warns that argv shows it, and prints it nowhere', async () => {
    const run = await cli(['inspect', 'job:{1}', '--redis', `redis://operator:${PASSWORD}@127.0.0.1:${server.port}`]);
    expect(run.code, run.out).to.equal(EXIT.OK);
    expect(run.out).to.include('set REDIS_PASSWORD instead');
    noSecret(run);
  });

  it('connects over TLS to a server whose certificate the --tls-ca signed, and refuses an unknown one', async () => {
    const url = `rediss://127.0.0.1:${tlsPort}`;
    const trusted = await cli(['inspect', 'job:{1}', '--redis', url, '--tls-ca', certs.caFile, '--user', 'operator', '--json'], {
      REDIS_PASSWORD: PASSWORD,
    });
    expect(trusted.code, trusted.out).to.equal(EXIT.OK);
    expect(JSON.parse(trusted.out).mode).to.equal('write');

    const unknown = await cli(['inspect', 'job:{1}', '--redis', url]);
    expect(unknown.code).to.equal(EXIT.FAILED);
    expect(unknown.out).to.match(/certificate/i);

    const withClientCert = await cli([
      'list',
      '--redis',
      url,
      '--tls-ca',
      certs.caFile,
      '--tls-cert',
      certs.certFile,
      '--tls-key',
      certs.keyFile,
    ]);
    expect(withClientCert.code, withClientCert.out).to.equal(EXIT.OK);
  });

  it('skips the certificate check only with --insecure, and says so', async () => {
    const run = await cli(['inspect', 'job:{1}', '--redis', `rediss://127.0.0.1:${tlsPort}`, '--insecure']);
    expect(run.code, run.out).to.equal(EXIT.OK);
    expect(run.out).to.match(/warning: --insecure/);
  });

  // Port 1: nothing listens there, so a connection attempt would fail with exit 1, not 2.
  const nowhere = 'redis://127.0.0.1:1';
  const refused: [string, string[], RegExp][] = [
    ['--ask-pass without a terminal', ['inspect', 'x', '--redis', nowhere, '--ask-pass'], /--ask-pass needs a terminal/],
    ['--tls-cert without --tls-key', ['inspect', 'x', '--redis', nowhere, '--tls-cert', 'c.pem'], /--tls-cert and --tls-key go together/],
    [
      'a CA file that is not there',
      ['inspect', 'x', '--redis', nowhere, '--tls-ca', '/nonexistent/ca.pem'],
      /--tls-ca: cannot read \/nonexistent\/ca.pem \(ENOENT\)/,
    ],
    ['a URL that is not redis://', ['inspect', 'x', '--redis', `http://u:${PASSWORD}@h`], /not a redis:\/\/ or rediss:\/\/ URL/],
  ];
  for (const [what, args, message] of refused) {
    it(`refuses ${what} before connecting (exit 2)`, async () => {
      const run = await cli(args);
      expect(run.code, run.out).to.equal(EXIT.USAGE);
      expect(run.out).to.match(message);
      noSecret(run);
    });
  }
});
