/**
 * TLS for test servers: a CA and a certificate it signed for 127.0.0.1,
 * made for the run with `openssl` in a temp dir (nothing is committed), and
 * the `redis-server` arguments for a TLS port beside the plain one (the
 * harness keeps using the plain port; a Cluster tells TLS clients the TLS
 * ports of its nodes, and plain clients the plain ones).
 *
 * @module
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { LOOPBACK_HOST } from './ports.js';

/** A CA and a certificate for 127.0.0.1 it signed (valid for servers and clients), as PEM text and as files. */
export interface TestCertificates {
  /** The CA's certificate (PEM): give it to clients as `tls: { ca }`. */
  readonly ca: string;
  /** The certificate for 127.0.0.1 (PEM), also usable as a client certificate. */
  readonly cert: string;
  /** Its private key (PEM). */
  readonly key: string;
  /** The CA's certificate as a file (for `redis-cli --cacert`, the CLI's `--tls-ca`). */
  readonly caFile: string;
  /** The certificate as a file. */
  readonly certFile: string;
  /** Its private key as a file. */
  readonly keyFile: string;
}

/** A server's TLS port, and the certificates it was started with. */
export interface TlsEndpoint extends TestCertificates {
  /** The TLS port; the plain `port` stays open for the harness. */
  readonly port: number;
  /** `rediss://127.0.0.1:<port>`. */
  readonly url: string;
}

/** Makes the certificates in `dir` (created if needed) with `openssl`. */
export function makeTestCertificates(dir: string): TestCertificates {
  mkdirSync(dir, { recursive: true });
  const openssl = (...args: string[]) => {
    try {
      execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
    } catch (error) {
      const err = error as NodeJS.ErrnoException & { stderr?: Buffer };
      throw new Error(
        err.code === 'ENOENT'
          ? 'redis-rwlock/testing: TLS needs the openssl command (Debian: apt-get install openssl)'
          : `redis-rwlock/testing: openssl ${args[0]} failed: ${err.stderr?.toString().trim() ?? err.message}`,
        { cause: error },
      );
    }
  };
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '7',
    '-subj',
    '/CN=redis-rwlock test CA',
  );
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', `/CN=${LOOPBACK_HOST}`);
  writeFileSync(path.join(dir, 'san.ext'), `subjectAltName=IP:${LOOPBACK_HOST},DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n`);
  openssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.crt',
    '-days',
    '7',
    '-extfile',
    'san.ext',
  );
  const file = (name: string) => path.join(dir, name);
  return {
    ca: readFileSync(file('ca.crt'), 'utf8'),
    cert: readFileSync(file('server.crt'), 'utf8'),
    key: readFileSync(file('server.key'), 'utf8'),
    caFile: file('ca.crt'),
    certFile: file('server.crt'),
    keyFile: file('server.key'),
  };
}

/** `redis-server` arguments for a TLS port beside the plain one; on a Cluster node the bus and replication use TLS too. */
export function tlsServerArgs(tlsPort: number, certs: TestCertificates, clusterNode: boolean): string[] {
  return [
    '--tls-port',
    String(tlsPort),
    '--tls-cert-file',
    certs.certFile,
    '--tls-key-file',
    certs.keyFile,
    '--tls-ca-cert-file',
    certs.caFile,
    '--tls-auth-clients',
    'optional',
    ...(clusterNode ? ['--tls-cluster', 'yes', '--tls-replication', 'yes'] : []),
  ];
}
