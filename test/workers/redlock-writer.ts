// A redlock-mode writer in a process of its own (its clock may be shifted, see
// shifted-clock.mjs): waits for the write lock of RWLOCK_RESOURCE on the servers
// at RWLOCK_PORTS (JSON) as owner RWLOCK_OWNER, prints "granted" and holds it
// until its standard input ends, then releases and exits.
import { Redis } from 'ioredis';
import { LockClient } from '../../src/index.js';

const ports = JSON.parse(process.env.RWLOCK_PORTS!) as number[];
const nodes = ports.map((port) => new Redis({ host: '127.0.0.1', port }));
const locks = new LockClient(nodes, { mode: 'redlock', fair: true });
const lease = await locks.lock(process.env.RWLOCK_RESOURCE!).acquireWrite({ owner: process.env.RWLOCK_OWNER!, waitMs: 30_000 });
process.stdout.write('granted\n');
process.stdin.resume();
await new Promise((resolve) => process.stdin.once('end', resolve));
await lease.release();
await locks.close();
await Promise.all(nodes.map((node) => node.quit()));
