/**
 * Tests of the test harness (`redis-rwlock/testing`) against real
 * `redis-server` processes.
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { Cluster, Redis } from 'ioredis';
import {
  CLUSTER_BUS_PORT_OFFSET,
  CLUSTER_SLOTS,
  findFreePorts,
  isPortFree,
  type RedisClusterHandle,
  RedisServerStartError,
  reapStaleServers,
  runningServers,
  startFaultProxy,
  startRedisCluster,
  startRedisMasters,
  startRedisServer,
} from '../../src/testing/index.js';
import { forEachTopology, sharedCluster } from '../setup/topologies.js';
import { rejection } from '../support/rejection.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const testingIndexUrl = pathToFileURL(path.resolve(here, '../../src/testing/index.ts')).href;
const libraryIndexUrl = pathToFileURL(path.resolve(here, '../../src/index.ts')).href;

/** True while `pid` is a live process (a zombie counts as gone). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return process.platform !== 'linux';
  }
}

async function waitUntil(what: string, condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A short-lived connection to one node, closed after `fn`. */
async function onNode<T>(port: number, fn: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

/**
 * Runs a child Node process that imports the harness, starts a server, prints
 * `{ pid, dir }` and then does what `script` says.
 */
function runChild(script: string): {
  ready: Promise<{ pid: number; dir: string }>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal: NodeJS.Signals): void;
} {
  const source = `
    const { startRedisServer } = await import(${JSON.stringify(testingIndexUrl)});
    const server = await startRedisServer();
    process.stdout.write(JSON.stringify({ pid: server.pid, dir: server.dir }) + '\\n');
    ${script}
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const ready = new Promise<{ pid: number; dir: string }>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const line = stdout.split('\n')[0];
      if (stdout.includes('\n') && line) resolve(JSON.parse(line) as { pid: number; dir: string });
    });
    void exited.then(({ code, signal }) => reject(new Error(`child exited (${code ?? signal}) before reporting its server: ${stderr}`)));
  });
  return { ready, exited, kill: (signal) => child.kill(signal) };
}

describe('redis-rwlock/testing', function () {
  this.timeout(60_000);

  describe('ports', () => {
    it('finds distinct free loopback ports whose bus ports are free too', async () => {
      const ports = await findFreePorts(6, { busPort: true });
      expect(new Set(ports).size).to.equal(6);
      for (const port of ports) {
        expect(port).to.not.be.oneOf([6379, 16379, 26379]);
        expect(port + CLUSTER_BUS_PORT_OFFSET).to.be.at.most(65_535);
        expect(ports).to.not.include(port + CLUSTER_BUS_PORT_OFFSET);
        expect(await isPortFree(port)).to.equal(true);
        expect(await isPortFree(port + CLUSTER_BUS_PORT_OFFSET)).to.equal(true);
      }
    });

    it('reports a port that a server listens on as taken', async () => {
      const server = await startRedisServer();
      try {
        expect(await isPortFree(server.port)).to.equal(false);
      } finally {
        await server.stop();
      }
      expect(await isPortFree(server.port)).to.equal(true);
    });
  });

  describe('startRedisServer', () => {
    it('starts a server that answers PING, and stop() ends its process and removes its dir', async () => {
      const server = await startRedisServer();
      expect(server.host).to.equal('127.0.0.1');
      expect(server.url).to.equal(`redis://127.0.0.1:${server.port}`);
      expect(server.running).to.equal(true);
      expect(isAlive(server.pid)).to.equal(true);
      expect(runningServers().map((s) => s.port)).to.include(server.port);
      const client = server.client();
      expect(await client.ping()).to.equal('PONG');
      expect(await client.config('GET', 'bind')).to.deep.equal(['bind', '127.0.0.1']);
      expect(await client.config('GET', 'save')).to.deep.equal(['save', '']);
      expect(await client.config('GET', 'appendonly')).to.deep.equal(['appendonly', 'no']);

      await server.stop();
      expect(server.running).to.equal(false);
      expect(isAlive(server.pid)).to.equal(false);
      expect(existsSync(server.dir)).to.equal(false);
      expect(client.status).to.equal('end'); // clients made by client() are closed by stop()
      expect(runningServers().map((s) => s.port)).to.not.include(server.port);
      await server.stop(); // idempotent
    });

    it('with tls and users: a TLS port with a CA made for it, ACL users kept across restarts, no password in argv', async () => {
      const server = await startRedisServer({ tls: true, users: [{ name: 'app', password: 'pw-9d1e', rules: ['~app:*', '+@all'] }] });
      try {
        const tls = server.tls!;
        expect(tls.port).to.not.equal(server.port);
        expect(tls.url).to.equal(`rediss://127.0.0.1:${tls.port}`);
        expect(tls.ca).to.match(/^-----BEGIN CERTIFICATE-----/);
        const connect = () => new Redis({ host: '127.0.0.1', port: tls.port, tls: { ca: tls.ca }, username: 'app', password: 'pw-9d1e' });
        const client = connect();
        expect(await client.set('app:1', 'v')).to.equal('OK');
        expect(await client.set('other:1', 'v').catch((e: Error) => e.message)).to.match(/NOPERM/);
        client.disconnect();
        expect(readFileSync(`/proc/${server.pid}/cmdline`, 'utf8')).to.not.include('pw-9d1e');
        await server.restart();
        const again = connect();
        expect(await again.ping()).to.equal('PONG');
        again.disconnect();
        expect(await server.client().ping()).to.equal('PONG'); // the harness' plain port, default user
      } finally {
        await server.stop();
      }
      expect(existsSync(server.dir)).to.equal(false);
    });

    it('restarts on the same port with a new process, and an existing client reconnects', async () => {
      await using server = await startRedisServer();
      const client = server.client();
      await client.set('k', 'v');
      const { port, pid } = server;

      await server.kill();
      expect(server.running).to.equal(false);
      expect(isAlive(pid)).to.equal(false);
      expect(existsSync(server.dir)).to.equal(true); // kept for restart()

      await server.restart();
      expect(server.port).to.equal(port);
      expect(server.pid).to.not.equal(pid);
      expect(isAlive(server.pid)).to.equal(true);
      expect(await client.ping()).to.equal('PONG');
      expect(await client.get('k')).to.equal(null); // no persistence
      await client.set('k', 'v2');

      const before = server.pid;
      await server.restart(); // restart of a running server stops it first
      expect(isAlive(before)).to.equal(false);
      expect(await client.get('k')).to.equal(null);
    });

    it('kill(SIGTERM) shuts the server down gracefully and waits for it', async () => {
      await using server = await startRedisServer();
      await server.kill('SIGTERM');
      expect(isAlive(server.pid)).to.equal(false);
      expect(server.logs()).to.match(/ready to exit, bye bye/i);
    });

    it('pause() freezes the server and resume() thaws it', async () => {
      await using server = await startRedisServer();
      const client = server.client({ commandTimeout: 300, maxRetriesPerRequest: 0 });
      expect(await client.ping()).to.equal('PONG');
      await server.pause();
      expect((await rejection(client.ping())).message).to.match(/timed out/i);
      await server.resume();
      expect(await client.ping()).to.equal('PONG');
    });

    it('flush() removes the data (and the scripts when asked)', async () => {
      await using server = await startRedisServer();
      const client = server.client();
      await client.set('a', '1');
      const sha = (await client.script('LOAD', 'return 1')) as string;
      await server.flush();
      expect(await client.dbsize()).to.equal(0);
      expect(await client.script('EXISTS', sha)).to.deep.equal([1]);
      await server.flush({ scripts: true });
      expect(await client.script('EXISTS', sha)).to.deep.equal([0]);
    });

    it('rejects with the server log when the server cannot start, and leaves nothing behind', async () => {
      const before = runningServers().length;
      const err = await rejection(startRedisServer({ args: ['--no-such-directive', 'x'] }));
      expect(err).to.be.instanceOf(RedisServerStartError);
      expect(err.name).to.equal('RedisServerStartError');
      expect(err.message).to.match(/exited with code 1/);
      expect(err.message).to.include('Bad directive');
      expect((err as RedisServerStartError).log).to.include('no-such-directive');
      expect(runningServers().length).to.equal(before);
    });

    it('says how to fix a missing binary', async () => {
      const err = await rejection(startRedisServer({ bin: '/nonexistent/redis-server' }));
      expect(err.message).to.include('REDIS_SERVER_BIN');
      expect(err.message).to.include('ENOENT');
    });

    it('names the port and timeout, and stops the process, when the server does not answer in time', async () => {
      // A fake server that never listens.
      const fakeDir = mkdtempSync(path.join(os.tmpdir(), 'rwlock-fake-server-'));
      const fake = path.join(fakeDir, 'redis-server');
      writeFileSync(fake, '#!/bin/sh\necho "fake server: not listening"\nexec sleep 30\n');
      chmodSync(fake, 0o755);
      try {
        const err = await rejection(startRedisServer({ bin: fake, startTimeoutMs: 300 }));
        expect(err).to.be.instanceOf(RedisServerStartError);
        const { port, message } = err as RedisServerStartError;
        expect(message).to.match(new RegExp(`127\\.0\\.0\\.1:${port} \\(pid (\\d+)\\) did not answer PING within 300 ms`));
        expect(message).to.include('fake server: not listening');
        const pid = Number(/\(pid (\d+)\)/.exec(message)![1]);
        expect(isAlive(pid)).to.equal(false);
        expect(runningServers().filter((s) => s.port === port)).to.deep.equal([]);
      } finally {
        rmSync(fakeDir, { recursive: true, force: true });
      }
    });
  });

  describe('clean-up of servers a process leaves behind', () => {
    it('kills the servers when the owning process ends without stopping them', async () => {
      const child = runChild(`/* nothing keeps the event loop alive: the process just ends */`);
      const { pid, dir } = await child.ready;
      const { code } = await child.exited;
      expect(code).to.equal(0);
      await waitUntil('the orphaned server is gone', () => !isAlive(pid));
      expect(existsSync(dir)).to.equal(false);
    });

    it("ends the clients it handed out: the README's snippet, with a LockClient that waited, exits on its own", async () => {
      // The README's snippet (a Cluster, its client, a failover, stopAllServers()), with a LockClient on the
      // client whose writer waited (so it opened wake-up connections) and which is never closed.
      const source = `
        const { startRedisCluster, stopAllServers } = await import(${JSON.stringify(testingIndexUrl)});
        const { LockClient } = await import(${JSON.stringify(libraryIndexUrl)});
        const cluster = await startRedisCluster({ nodeTimeoutMs: 1000 });
        const redis = cluster.client();
        const locks = new LockClient(redis);
        await locks.lock('orders:{42}').acquireRead();
        await locks.lock('orders:{42}').acquireWrite({ waitMs: 100 }).catch(() => {});
        const [first] = await cluster.masters();
        await cluster.killMaster(first.port);
        await stopAllServers();
        process.stdout.write(\`stopped, the client \${redis.status}\\n\`);
      `;
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      await waitUntil('the snippet stopped its servers', () => stdout.includes('stopped') || child.exitCode !== null, 60_000);
      const stoppedAt = Date.now();
      const lingered = await Promise.race([exited.then(() => false), new Promise<true>((resolve) => setTimeout(resolve, 5_000, true))]);
      if (lingered) child.kill('SIGKILL');
      expect({ lingered, stderr }).to.deep.equal({ lingered: false, stderr: '' });
      expect(stdout).to.match(/^stopped, the client (?:close|end)\n$/); // disconnected, not reconnecting
      expect(await exited).to.equal(0);
      expect(Date.now() - stoppedAt).to.be.below(5_000);
    });

    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      it(`stops the servers and exits on ${signal}`, async () => {
        const child = runChild('setInterval(() => {}, 1000);');
        const { pid, dir } = await child.ready;
        expect(isAlive(pid)).to.equal(true);
        child.kill(signal);
        const { code } = await child.exited;
        expect(code).to.equal(signal === 'SIGINT' ? 130 : 143);
        await waitUntil('the server is gone', () => !isAlive(pid));
        expect(existsSync(dir)).to.equal(false);
      });
    }

    it('leaves the shut-down to a process that handles SIGINT itself; its servers still go', async () => {
      // The handler finds its server still answering (exit code 0, not 3), then stops it.
      const child = runChild(`
        const client = server.client({ maxRetriesPerRequest: 0, retryStrategy: () => null });
        client.on('error', () => {});
        const keepAlive = setInterval(() => {}, 1000);
        process.on('SIGINT', async () => {
          process.exitCode = (await client.ping().catch(() => 'gone')) === 'PONG' ? 0 : 3;
          await server.stop();
          clearInterval(keepAlive);
        });
      `);
      const { pid, dir } = await child.ready;
      child.kill('SIGINT');
      const { code } = await child.exited;
      expect(code).to.equal(0);
      await waitUntil('the server is gone', () => !isAlive(pid));
      expect(existsSync(dir)).to.equal(false);
    });

    it('reaps servers of a process that died by SIGKILL', async () => {
      const child = runChild('setInterval(() => {}, 1000);');
      const { pid, dir } = await child.ready;
      child.kill('SIGKILL');
      await child.exited;
      expect(isAlive(pid)).to.equal(true); // SIGKILL cannot be handled: the server is orphaned
      expect(reapStaleServers()).to.be.at.least(1);
      await waitUntil('the stale server is gone', () => !isAlive(pid));
      expect(existsSync(dir)).to.equal(false);
    });
  });

  describe('the shared cluster', () => {
    let cluster: RedisClusterHandle;

    before(async function () {
      this.timeout(60_000);
      cluster = await sharedCluster();
    });

    it('has 3 masters with 1 replica each, cluster_state:ok and all 16384 slots covered on every node', async () => {
      expect(cluster.nodes).to.have.length(6);
      expect(cluster.startupNodes.map((n) => n.port)).to.deep.equal(cluster.nodes.map((n) => n.port));
      const masters = cluster.nodes.filter((n) => n.role === 'master');
      const replicas = cluster.nodes.filter((n) => n.role === 'replica');
      expect(masters).to.have.length(3);
      expect(replicas).to.have.length(3);
      expect(replicas.map((r) => r.masterPort).sort()).to.deep.equal(masters.map((m) => m.port).sort());

      for (const node of cluster.nodes) {
        await onNode(node.port, async (redis) => {
          const info = String(await redis.cluster('INFO'));
          expect(info).to.match(/^cluster_state:ok\r?$/m);
          expect(info).to.match(/^cluster_slots_assigned:16384\r?$/m);
          expect(info).to.match(/^cluster_slots_ok:16384\r?$/m);
          expect(info).to.match(/^cluster_known_nodes:6\r?$/m);
          expect(info).to.match(/^cluster_size:3\r?$/m);
          const slots = await redis.cluster('SLOTS');
          const covered = slots.reduce((sum, [start, end]) => sum + (end - start + 1), 0);
          expect(covered).to.equal(CLUSTER_SLOTS);
          expect(slots.every((range) => range.length === 4)).to.equal(true); // master + 1 replica per range
          const role = (await redis.info('replication')).match(/^role:(\w+)/m)?.[1];
          expect(role).to.equal(node.role === 'master' ? 'master' : 'slave');
        });
      }
      expect((await cluster.masters()).map((m) => m.port).sort()).to.deep.equal(masters.map((m) => m.port).sort());
    });

    it('masterForKey names the node that answers the key; the other masters redirect to it', async () => {
      const client = cluster.client();
      try {
        const owners = new Set<number>();
        for (let i = 0; i < 30; i++) {
          const key = `harness:key:${i}`;
          await client.set(key, String(i));
          const owner = await cluster.masterForKey(key);
          owners.add(owner.port);
          expect(owner.role).to.equal('master');
          expect(await onNode(owner.port, (redis) => redis.get(key))).to.equal(String(i));
          for (const other of cluster.nodes.filter((n) => n.role === 'master' && n.port !== owner.port)) {
            const err = await rejection(onNode(other.port, (redis) => redis.get(key)));
            expect(err.message).to.match(new RegExp(`^MOVED \\d+ 127\\.0\\.0\\.1:${owner.port}$`));
          }
        }
        expect(owners.size).to.equal(3); // 30 keys spread over all masters
        expect((await cluster.masterForSlot(0)).port).to.equal((await cluster.masterForKey('{06S}')).port); // '06S' hashes to slot 0
        expect((await rejection(cluster.masterForSlot(CLUSTER_SLOTS))).name).to.equal('RangeError');
      } finally {
        client.disconnect();
      }
    });

    it('flush() empties every master', async () => {
      const client = cluster.client();
      try {
        for (let i = 0; i < 30; i++) await client.set(`flush:${i}`, 'x');
        await cluster.flush();
        const masters = await cluster.masters();
        const sizes = await Promise.all(masters.map((m) => onNode(m.port, (redis) => redis.dbsize())));
        expect(sizes).to.deep.equal([0, 0, 0]);
      } finally {
        client.disconnect();
      }
    });
  });

  describe('failover (a cluster of its own)', () => {
    let cluster: RedisClusterHandle;
    const nodeTimeoutMs = 1_000;

    before(async function () {
      this.timeout(60_000);
      const started = Date.now();
      cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs });
      console.log(`      (6-node cluster with node timeout ${nodeTimeoutMs} ms started in ${Date.now() - started} ms)`);
    });

    after(async () => {
      await cluster?.stop();
      for (const node of cluster?.nodes ?? []) expect(isAlive(node.pid)).to.equal(false);
    });

    it('manualFailover promotes the replica; the old master follows it; a Cluster client keeps working', async () => {
      const client = cluster.client();
      await client.set('mf', 'before');
      const master = await cluster.masterForKey('mf');
      const [replica] = await cluster.replicasOf(master.port);
      expect(replica).to.not.equal(undefined);

      const result = await cluster.manualFailover(replica!.port);
      expect(result.promoted.port).to.equal(replica!.port);
      expect(result.replaced.port).to.equal(master.port);
      expect(cluster.node(replica!.port).role).to.equal('master');
      expect(cluster.node(master.port).role).to.equal('replica');
      expect(cluster.node(master.port).masterPort).to.equal(replica!.port);
      expect((await cluster.masterForKey('mf')).port).to.equal(replica!.port);
      expect(await client.get('mf')).to.equal('before'); // a coordinated failover loses nothing
      await client.set('mf', 'after');
      expect(await onNode(replica!.port, (redis) => redis.get('mf'))).to.equal('after');
    });

    it('killMaster promotes the replica, and a Cluster client made before the kill keeps working', async () => {
      const client = cluster.client();
      await client.set('km', 'kept');
      const master = await cluster.masterForKey('km');
      const [replica] = await cluster.replicasOf(master.port);
      // Replication is asynchronous: make sure the replica has the write before the crash.
      expect(await onNode(master.port, (redis) => redis.wait(1, 2_000))).to.equal(1);
      const oldPid = master.pid;

      const result = await cluster.killMaster(master.port);
      console.log(
        `      (killMaster: replica promoted and cluster settled ${result.elapsedMs} ms after SIGKILL, node timeout ${nodeTimeoutMs} ms)`,
      );
      expect(result.promoted.port).to.equal(replica!.port);
      expect(result.replaced.port).to.equal(master.port);
      expect(isAlive(oldPid)).to.equal(false);
      expect(master.running).to.equal(false);
      expect(cluster.node(replica!.port).role).to.equal('master');
      expect((await cluster.masterForKey('km')).port).to.equal(replica!.port);
      expect((await cluster.masters()).map((m) => m.port)).to.not.include(master.port);

      expect(await client.get('km')).to.equal('kept');
      for (let i = 0; i < 30; i++) await client.set(`after-failover:${i}`, String(i)); // every shard writable
      expect(await client.get('after-failover:29')).to.equal('29');
    });

    it('restartNode brings the killed master back as a replica of the promoted node', async () => {
      const down = cluster.nodes.find((n) => !n.running);
      expect(down).to.not.equal(undefined);
      const promoted = (await cluster.masterForKey('km')).port;
      await cluster.restartNode(down!.port);
      expect(down!.running).to.equal(true);
      expect(down!.role).to.equal('replica');
      expect(down!.masterPort).to.equal(promoted);
      expect(
        await onNode(down!.port, async (redis) => {
          await redis.readonly();
          return redis.get('km');
        }),
      ).to.equal('kept');
      // Healthy in every node's view as soon as restartNode returns: nobody still flags it, its link is up.
      for (const node of cluster.nodes) {
        const view = String(await onNode(node.port, (redis) => redis.cluster('NODES')));
        expect(view, `CLUSTER NODES of ${node.port}`).to.not.match(/\bfail\??[ ,]/);
      }
      const replication = await onNode(down!.port, (redis) => redis.info('replication'));
      expect(replication).to.match(/^master_link_status:up\r?$/m);
      expect(replication).to.match(/^master_sync_in_progress:0\r?$/m);
    });

    it('killMaster waits for a replica that is still rejoining (restarted just before), then fails over to it', async function () {
      this.timeout(90_000);
      const first = await cluster.killMaster((await cluster.masterForKey('km')).port);
      // A raw restart: the node comes back flagged failing and not yet a linked replica of the promoted one.
      await first.replaced.restart();
      const second = await cluster.killMaster(first.promoted.port);
      expect(second.promoted.port).to.equal(first.replaced.port);
      expect((await cluster.masterForKey('km')).port).to.equal(first.replaced.port);
      await cluster.restartNode(first.promoted.port);
      expect(cluster.node(first.promoted.port).masterPort).to.equal(first.replaced.port);
    });

    it('killMaster and waitForClusterOk name what they waited for when it does not come', async function () {
      this.timeout(60_000);
      const master = await cluster.masterForKey('km');
      const [replica] = await cluster.replicasOf(master.port);
      await replica!.pause();
      try {
        const err = await rejection(cluster.killMaster(master.port, { timeoutMs: 1_000 }));
        expect(err.message).to.match(
          new RegExp(
            `^killMaster: timed out after 1000 ms waiting for a replica of ${master.port} ready to take over \\(.*master_link_status:up.*\\): replica ${replica!.port}: does not answer`,
          ),
        );
        expect(master.running, 'the master is not killed when no replica is ready').to.equal(true);
        const notOk = await rejection(cluster.waitForClusterOk({ timeoutMs: 1_000 }));
        expect(notOk.message).to.match(
          new RegExp(`^Redis Cluster: timed out after 1000 ms waiting for .*: node ${replica!.port} does not answer`),
        );
      } finally {
        await replica!.resume();
      }
      await cluster.waitForClusterOk();
    });

    it('refuses to kill a node that is not a master', async () => {
      const replica = cluster.nodes.find((n) => n.role === 'replica')!;
      const err = await rejection(cluster.killMaster(replica.port));
      expect(err.message).to.match(/not a live master/);
      expect(replica.running).to.equal(true);
    });
  });

  describe('startRedisMasters', () => {
    it('starts 3 independent masters, and stop() ends them all', async () => {
      const masters = await startRedisMasters(3);
      const clients = masters.clients();
      try {
        expect(masters.servers).to.have.length(3);
        expect(new Set(masters.servers.map((s) => s.port)).size).to.equal(3);
        expect(new Set(masters.servers.map((s) => s.pid)).size).to.equal(3);
        for (const client of clients) {
          const replication = await client.info('replication');
          expect(replication).to.match(/^role:master\r?$/m);
          expect(replication).to.match(/^connected_slaves:0\r?$/m);
          expect(await client.call('CLUSTER', 'INFO').catch((e: Error) => e.message)).to.match(/cluster support disabled/);
        }
        await clients[0]!.set('only-on-first', '1');
        expect(await clients[0]!.get('only-on-first')).to.equal('1');
        expect(await clients[1]!.get('only-on-first')).to.equal(null);
        expect(await clients[2]!.get('only-on-first')).to.equal(null);
        await masters.flush();
        expect(await clients[0]!.dbsize()).to.equal(0);
      } finally {
        await masters.stop();
      }
      for (const server of masters.servers) expect(isAlive(server.pid)).to.equal(false);
      for (const client of clients) expect(client.status).to.equal('end');
    });
  });

  describe('the fault proxy', () => {
    it('stallAtCommand holds a subscription back before the server sees it, and what came before goes on', async () => {
      const server = await startRedisServer();
      const proxy = await startFaultProxy({ target: { port: server.port } });
      const through = new Redis(proxy.port, proxy.host);
      const admin = server.client();
      try {
        await through.ping();
        const held = proxy.stallAtCommand({ command: 'ssubscribe', argument: 'held' });
        const before = through.set('before', '1');
        let confirmed = false;
        const subscribing = through.ssubscribe('{c}held').then(() => (confirmed = true));
        await held;
        expect(await before, 'the command before it answered').to.equal('OK');
        expect(await admin.call('PUBSUB', 'SHARDCHANNELS'), 'not on the server during the stall').to.deep.equal([]);
        expect(confirmed).to.equal(false);
        proxy.resume();
        await subscribing;
        expect(await admin.call('PUBSUB', 'SHARDCHANNELS')).to.deep.equal(['{c}held']);
      } finally {
        through.disconnect();
        await proxy.close();
        await server.stop();
      }
    });
  });
});

let carriedEnded = false;
forEachTopology('topology context', (ctx) => {
  it('gives a client of the right kind that works', async () => {
    const client = ctx.client();
    expect(client).to.be.instanceOf(ctx.kind === 'cluster' ? Cluster : Redis);
    await client.set('ctx:key', 'v');
    expect(await client.get('ctx:key')).to.equal('v');
    client.once('end', () => (carriedEnded = true));
  });

  it('flushed the data and closed the previous test client before this test', async () => {
    expect(carriedEnded).to.equal(true);
    const client = ctx.client();
    expect(await client.get('ctx:key')).to.equal(null);
    expect(await client.dbsize()).to.equal(0);
  });

  it('heals a killed node before the next test', async () => {
    if (ctx.kind === 'standalone') {
      await ctx.server.kill();
      expect(ctx.server.running).to.equal(false);
    } else {
      const replica = ctx.cluster.nodes.find((n) => n.role === 'replica')!;
      await ctx.cluster.killNode(replica.port);
      expect(replica.running).to.equal(false);
    }
  });

  it('runs on a healthy topology again', async () => {
    if (ctx.kind === 'standalone') expect(ctx.server.running).to.equal(true);
    else expect(ctx.cluster.nodes.every((n) => n.running)).to.equal(true);
    expect(await ctx.client().ping()).to.equal('PONG');
  });
});
