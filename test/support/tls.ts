/**
 * Certificates for TLS tests, made for the run with `openssl` (nothing is
 * committed): a CA, and a server certificate it signed for 127.0.0.1, which
 * also serves as a client certificate.
 *
 * @module
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCertificates {
  readonly dir: string;
  /** The CA's certificate (PEM file). */
  readonly ca: string;
  /** A certificate for 127.0.0.1 signed by the CA, and its key (PEM files). */
  readonly cert: string;
  readonly key: string;
  /** `redis-server` arguments for a TLS port beside the plain one (which the harness pings). */
  serverArgs(tlsPort: number): string[];
  remove(): void;
}

export function makeCertificates(): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), 'rwlock-tls-'));
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=redis-rwlock test CA');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'san.ext');
  return {
    dir,
    ca: file('ca.crt'),
    cert: file('server.crt'),
    key: file('server.key'),
    serverArgs: (tlsPort) => [
      '--tls-port', String(tlsPort),
      '--tls-cert-file', file('server.crt'),
      '--tls-key-file', file('server.key'),
      '--tls-ca-cert-file', file('ca.crt'),
      '--tls-auth-clients', 'optional',
    ],
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
