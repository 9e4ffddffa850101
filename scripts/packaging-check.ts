// `npm run test:packaging`: proves the published package works from a fresh
// project, as a user gets it.
//
// 1. `npm pack` into a temp dir (its `prepack` builds); the tarball must
//    hold the ESM and CJS builds with their types, the examples and bench
//    pages the docs link to, and no sources or tests; every relative link
//    in its Markdown must name a file inside it; and `attw`
//    (@arethetypeswrong/cli) must find no problem in it.
// 2. A new project in a temp dir: `npm install <tarball> ioredis
//    @opentelemetry/api @types/node` (with --prefer-offline: the npm cache
//    serves what it can). From it, in ESM (`import`) and in CJS
//    (`require`): import `redis-rwlock`, `redis-rwlock/opentelemetry` and
//    `redis-rwlock/testing`, start a Redis Cluster (3 masters, 3 replicas),
//    take locks, stop it; run `npx redis-rwlock demo` (the package's bin);
//    copy the shipped examples/*.ts out of node_modules/redis-rwlock,
//    type-check them and run each with `npx tsx` (they import the package
//    by its name); and type-check a consumer file of each kind with `tsc`
//    (module NodeNext), so the `types` of both conditions of the exports
//    map are right, and one under Node10 resolution. The ESM consumer also
//    requires the package and checks that the classes are the same.
// 3. One project per other client library, each installed ALONE (ioredis
//    beside node-redis once hid declarations that imported ioredis):
//    ioredis 5, iovalkey, node-redis 5 and 6, GLIDE, typed and run against
//    servers this script starts. Every project's consumer file is
//    type-checked with skipLibCheck off, with @types/node 20 (the oldest
//    supported) and the newest, on TypeScript 5 and 7, NodeNext and bundler
//    resolution, and a table of the results closes the run. In the
//    node-redis 5 project, `npx redis-rwlock` --help, inspect and list run
//    on node-redis against a server, and the testing helper and the demo
//    say in one line to install ioredis.
//
// Flags: --no-build (pack dist/ as it is, without prepack), --keep (keep the temp dir).
// Slow (a build, an install, two clusters): CI runs it apart from `npm test`.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { LockClient } from '../src/index.js';
import { type RedisClusterHandle, type RedisServerHandle, startRedisCluster, startRedisServer } from '../src/testing/index.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TSC = path.join(ROOT, 'node_modules/typescript/bin/tsc');
const build = !process.argv.includes('--no-build');
const keep = process.argv.includes('--keep');
const startedAt = performance.now();

function step(text: string): void {
  console.log(`[${((performance.now() - startedAt) / 1000).toFixed(1).padStart(5)} s] ${text}`);
}

function run(cmd: string, args: readonly string[], cwd: string, timeoutMs = 180_000, env = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`\`${cmd} ${args.join(' ')}\` in ${cwd} failed: ${error.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

/** What a consumer does with the package, in ESM. Prints one JSON line. */
const ESM_CONSUMER = `
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { LockClient, RWLockError, LockNotHeldError, InvalidArgumentError } from 'redis-rwlock';
import { LockMetrics } from 'redis-rwlock/opentelemetry';
import { startRedisCluster, runningServers } from 'redis-rwlock/testing';

const cluster = await startRedisCluster();            // 3 masters, 3 replicas
const redis = cluster.client();
const locks = new LockClient(redis);
const lockMetrics = new LockMetrics().observe(locks); // the global MeterProvider: a no-op one here
assert.throws(() => new LockMetrics({ resourceAttribute: 'yes' }), InvalidArgumentError);
const lease = await locks.lock('orders:{1}').acquireWrite();
assert.equal((await locks.inspect('orders:{1}')).mode, 'write');
await lease.release();
const mode = await locks.withRead('orders:{1}', (l) => l.mode);
assert.equal(mode, 'read');
assert.ok(new LockNotHeldError('x') instanceof RWLockError);

// One class identity: what require() gives is what import gave, so instanceof holds across the two.
const require = createRequire(import.meta.url);
const required = require('redis-rwlock');
assert.equal(required.LockClient, LockClient);
assert.ok(new required.LockNotHeldError('x') instanceof RWLockError);
assert.equal(new LockNotHeldError('x').code, 'RWLOCK_NOT_HELD');

// The CJS copy of the helper, loaded into the same process, shares the registry of servers.
assert.equal(require('redis-rwlock/testing').runningServers().length, 6);
const version = require('redis-rwlock/package.json').version;

lockMetrics.disable();
await locks.close();
await cluster.stop();
assert.equal(runningServers().length, 0);
console.log(JSON.stringify({ format: 'esm', version, nodes: cluster.nodes.length, fence: lease.fence, readMode: mode }));
`;

/** The same in CommonJS. */
const CJS_CONSUMER = `
const assert = require('node:assert/strict');
const { LockClient, AcquireTimeoutError } = require('redis-rwlock');
const { LOCK_METRICS } = require('redis-rwlock/opentelemetry');
const { startRedisCluster, runningServers } = require('redis-rwlock/testing');
assert.equal(LOCK_METRICS.acquisitions, 'rwlock.acquisitions');

(async () => {
  const cluster = await startRedisCluster();
  const redis = cluster.client();
  const locks = new LockClient(redis);
  const writer = await locks.lock('orders:{2}').acquireWrite();
  assert.equal(await locks.lock('orders:{2}').tryAcquireRead(), null);   // taken
  await assert.rejects(locks.lock('orders:{2}').acquireRead({ waitMs: 50 }), AcquireTimeoutError);
  await writer.release();
  const reader = await locks.lock('orders:{2}').acquireRead();
  await reader.release();
  await locks.close();
  await cluster.stop();
  assert.equal(runningServers().length, 0);
  console.log(JSON.stringify({ format: 'cjs', nodes: cluster.nodes.length, fences: [writer.fence, reader.fence] }));
})().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
`;

/** Type-checked only: the \`import\` condition's types. */
const ESM_TYPES = `
import type { Cluster } from 'ioredis';
import { metrics } from '@opentelemetry/api';
import { LockClient, type Lease, type LockInfo } from 'redis-rwlock';
import { LockMetrics } from 'redis-rwlock/opentelemetry';
import { startRedisCluster, type RedisClusterHandle } from 'redis-rwlock/testing';

export async function check(): Promise<number> {
  const cluster: RedisClusterHandle = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
  const redis: Cluster = cluster.client();
  const locks = new LockClient(redis, { leaseMs: 10_000 });
  new LockMetrics({ meter: metrics.getMeter('app'), resourceAttribute: false }).observe(locks).disable();
  const lease: Lease = await locks.lock('a').acquireRead({ waitMs: 100 });
  const info: LockInfo = await locks.inspect('a');
  // @ts-expect-error: fence is a number
  const wrong: string = lease.fence;
  void wrong;
  return info.readers.length + lease.fence;
}
`;

/** Type-checked only: the \`require\` condition's types. */
const CJS_TYPES = `
import rwlock = require('redis-rwlock');
import testing = require('redis-rwlock/testing');

export async function check(): Promise<boolean> {
  const server: testing.RedisServerHandle = await testing.startRedisServer();
  const locks = new rwlock.LockClient(server.client());
  const lease: rwlock.Lease | null = await locks.lock('a').tryAcquireWrite();
  // @ts-expect-error: no such option
  locks.lock('a').acquireRead({ waitMillis: 1 });
  return lease?.held ?? false;
}
`;

/**
 * An application on ioredis 5 (a peer dependency: the package uses the
 * application's ioredis, not a copy of its own): typed and run, on one server.
 */
const IOREDIS5_CONSUMER = `
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { LockClient, LockNotHeldError } from 'redis-rwlock';
import { startRedisServer } from 'redis-rwlock/testing';

const server = await startRedisServer();
const redis: Redis = new Redis({ host: '127.0.0.1', port: server.port });
const locks = new LockClient(redis);
const writer = await locks.lock('orders:{5}').acquireWrite();
assert.equal((await locks.inspect('orders:{5}')).mode, 'write');
assert.equal(await locks.lock('orders:{5}').tryAcquireRead({ owner: 'other' }), null);
await writer.release();
const error = await writer.release().then(() => undefined, (e: unknown) => e);
assert.equal(error, undefined); // a second release is a no-op
await locks.withRead('orders:{5}', (lease) => assert.ok(lease.held));
assert.equal(await redis.dbsize(), 0);
await locks.close();
redis.disconnect();
await server.stop();
const { version } = JSON.parse(readFileSync('node_modules/ioredis/package.json', 'utf8')) as { version: string };
console.log(JSON.stringify({ ioredis: version, ok: true, notHeldCode: new LockNotHeldError('x').code }));
`;

/** A consumer's tsconfig: strict, skipLibCheck off, Node's types, NodeNext unless `options` say otherwise. */
function writeTsconfig(dir: string, name: string, options: Record<string, unknown>, files: string[]): void {
  const compilerOptions = {
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    target: 'ES2022',
    lib: ['ES2023', 'ESNext.Disposable'],
    strict: true,
    skipLibCheck: false,
    types: ['node'],
    ...options,
  };
  writeFileSync(path.join(dir, name), JSON.stringify({ compilerOptions, files }));
}

/** An application on iovalkey (the Valkey project's fork of ioredis): typed and run, on one server. */
const IOVALKEY_CONSUMER = `
import assert from 'node:assert/strict';
import { Redis as Valkey } from 'iovalkey';
import { LockClient } from 'redis-rwlock';

const valkey = new Valkey({ host: '127.0.0.1', port: Number(process.env.RWLOCK_PORT) });
const locks = new LockClient(valkey);
const writer = await locks.lock('orders:{6}').acquireWrite();
assert.equal(await locks.lock('orders:{6}').tryAcquireRead({ owner: 'other' }), null);
await writer.release();
assert.equal((await locks.inspect('orders:{6}')).mode, 'free');
await locks.close();
valkey.disconnect();
console.log(JSON.stringify({ client: 'iovalkey', ok: true }));
`;

/**
 * An application on node-redis 5 or 6 (\`redis\`, an optional peer dependency):
 * typed and run on one server (createClient) and on a Cluster
 * (createCluster), with fenced writes and reads. The servers are this
 * script's (RWLOCK_PORT, RWLOCK_CLUSTER): the project has no ioredis for
 * redis-rwlock/testing.
 */
const NODE_REDIS_CONSUMER = `
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createClient, createCluster } from 'redis';
import { fencedGet, fencedSet, LockClient, type LockRedisClient } from 'redis-rwlock';

async function exercise(client: LockRedisClient, resource: string): Promise<void> {
  const locks = new LockClient(client);
  const writer = await locks.lock(resource).acquireWrite();
  assert.equal(await locks.lock(resource).tryAcquireRead({ owner: 'other' }), null);
  await fencedSet(client, \`\${resource}:total\`, '42', writer);
  await writer.release();
  assert.equal(await locks.withRead(resource, (lease) => fencedGet(client, \`\${resource}:total\`, lease)), '42');
  assert.equal((await locks.inspect(resource)).mode, 'free');
  await locks.close();
}

const app = process.env.RWLOCK_APP;
const client = await createClient({ socket: { host: '127.0.0.1', port: Number(process.env.RWLOCK_PORT) } }).connect();
await exercise(client, \`orders:{\${app}-7}\`);
client.destroy();

const rootNodes = process.env.RWLOCK_CLUSTER!.split(',').map((node) => ({ socket: { host: '127.0.0.1', port: Number(node.split(':')[1]) } }));
const nodes = await createCluster({ rootNodes }).connect();
await exercise(nodes, \`orders:{\${app}-8}\`);
nodes.destroy();

/** Never called: only its types are checked. */
export function notAClient(): LockClient {
  // @ts-expect-error: a URL is not a client
  return new LockClient('redis://127.0.0.1:6379');
}
const { version } = JSON.parse(readFileSync('node_modules/redis/package.json', 'utf8')) as { version: string };
console.log(JSON.stringify({ redis: version, ok: true }));
`;

/**
 * An application on GLIDE (\`@valkey/valkey-glide\`, an optional peer
 * dependency): a GlideClient and a GlideClusterClient, typed and run on
 * this script's servers.
 */
const GLIDE_CONSUMER = `
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { GlideClient, GlideClusterClient } from '@valkey/valkey-glide';
import { LockClient, type LockRedisClient } from 'redis-rwlock';

async function exercise(client: LockRedisClient, resource: string): Promise<void> {
  const locks = new LockClient(client);
  const writer = await locks.lock(resource).acquireWrite();
  assert.equal(await locks.lock(resource).tryAcquireRead({ owner: 'other' }), null);
  await writer.release();
  assert.equal(await locks.withRead(resource, (lease) => lease.mode), 'read');
  assert.equal((await locks.inspect(resource)).mode, 'free');
  await locks.close();
}

const app = process.env.RWLOCK_APP;
const client = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: Number(process.env.RWLOCK_PORT) }] });
await exercise(client, \`orders:{\${app}-7}\`);
client.close();

const port = Number(process.env.RWLOCK_CLUSTER!.split(',')[0]!.split(':')[1]);
const cluster = await GlideClusterClient.createClient({ addresses: [{ host: '127.0.0.1', port }] });
await exercise(cluster, \`orders:{\${app}-8}\`);
cluster.close();
const { version } = JSON.parse(readFileSync('node_modules/@valkey/valkey-glide/package.json', 'utf8')) as { version: string };
console.log(JSON.stringify({ glide: version, ok: true }));
`;

/** The client libraries the package takes; a project of the check installs exactly one. */
const CLIENT_PACKAGES = ['ioredis', 'iovalkey', 'redis', '@valkey/valkey-glide'];

/** Throws unless `only` is the one client library `dir` can resolve, from itself or from the package. */
function checkAlone(dir: string, only: string): void {
  const found = CLIENT_PACKAGES.filter(
    (name) =>
      existsSync(path.join(dir, 'node_modules', name)) || existsSync(path.join(dir, 'node_modules/redis-rwlock/node_modules', name)),
  );
  if (found.join() !== only) throw new Error(`the project for ${only} alone has ${JSON.stringify(found)} installed`);
}

/** TypeScript 7 (what \`npm i -D typescript\` installs now), installed once. */
let typescript7: Promise<string> | undefined;
function tsc7(): Promise<string> {
  typescript7 ??= (async () => {
    const dir = path.join(tmp, 'typescript7');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'ts7', version: '1.0.0', private: true }));
    await run('npm', ['install', 'typescript@7', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], dir);
    return path.join(dir, 'node_modules/typescript/bin/tsc');
  })();
  return typescript7;
}

/** One row of the closing table: a client alone, @types/node, a compiler, a module resolution, and whether the consumer compiled. */
const typeRows: { client: string; typesNode: string; typescript: string; resolution: string; result: string }[] = [];

/** The @types/node a project is checked with: the oldest the package supports, then the newest (what `npm i -D @types/node` installs). */
const TYPES_NODE = ['@types/node@^20', '@types/node@latest'];
/** The ioredis version package-lock.json installs, which every suite runs on. */
const LOCKED_IOREDIS = (
  JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> }
).packages['node_modules/ioredis']!.version!;

/**
 * Type-checks `files` in `dir` (skipLibCheck off) with each of TYPES_NODE
 * (the project has the first installed; the second replaces it), on
 * TypeScript 5 and 7, NodeNext and bundler resolution: one row each;
 * throws after all eight when any failed. `cjsFiles` (CommonJS consumers)
 * are checked under NodeNext only. TypeScript 5 with NodeNext and the
 * first @types/node also compiles them into out/.
 */
async function typeMatrix(dir: string, client: string, files: string[], cjsFiles: string[] = []): Promise<void> {
  writeTsconfig(dir, 'tsconfig.nodenext.json', { outDir: 'out' }, [...files, ...cjsFiles]);
  writeTsconfig(dir, 'tsconfig.bundler.json', { module: 'ESNext', moduleResolution: 'Bundler', noEmit: true }, files);
  const failures: string[] = [];
  for (const [k, typesNode] of TYPES_NODE.entries()) {
    if (k > 0) await run('npm', ['install', typesNode, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], dir);
    const nodeTypes = (JSON.parse(readFileSync(path.join(dir, 'node_modules/@types/node/package.json'), 'utf8')) as { version: string })
      .version;
    for (const compiler of [TSC, await tsc7()]) {
      const typescript = (JSON.parse(readFileSync(path.join(path.dirname(compiler), '../package.json'), 'utf8')) as { version: string })
        .version;
      for (const resolution of ['nodenext', 'bundler']) {
        const emit = compiler === TSC && resolution === 'nodenext' && k === 0;
        const error = await run(process.execPath, [compiler, '-p', `tsconfig.${resolution}.json`, ...(emit ? [] : ['--noEmit'])], dir).then(
          () => undefined,
          (e: Error) => e.message,
        );
        typeRows.push({ client, typesNode: nodeTypes, typescript, resolution, result: error === undefined ? 'compiles' : 'FAILS' });
        if (error !== undefined) failures.push(`@types/node ${nodeTypes}, TypeScript ${typescript}, ${resolution}: ${error}`);
      }
    }
  }
  if (failures.length > 0) throw new Error(`the consumer on ${client} alone does not type-check:\n${failures.join('\n')}`);
}

/**
 * A fresh ESM project with `tarball` and one client library, `client` (an
 * npm spec of `clientPackage`), and nothing else: `source` is type-checked
 * (typeMatrix), compiled, then run with `env`; returns the project's dir.
 */
async function typedApp(
  tarball: string,
  name: string,
  client: string,
  what: string,
  source: string,
  env: Record<string, string> = {},
): Promise<string> {
  const dir = path.join(tmp, `app-${name}`);
  mkdirSync(dir);
  writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({ name: `rwlock-${name}`, version: '1.0.0', private: true, type: 'module' }),
  );
  step(`npm install ${path.basename(tarball)} ${client} (a project on ${name} alone)`);
  await run('npm', ['install', tarball, client, TYPES_NODE[0]!, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], dir);
  checkAlone(dir, client.replace(/(?<=.)@.*$/, ''));
  writeFileSync(path.join(dir, 'app.mts'), source);
  step(`@types/node 20 and newest, tsc 5 and 7, NodeNext and bundler, then node: new LockClient(${what}) type-checks, locks and releases`);
  await typeMatrix(dir, name, ['app.mts']);
  console.log(`        ${(await run('node', ['out/app.mjs'], dir, 60_000, { ...process.env, ...env, RWLOCK_APP: name })).trim()}`);
  return dir;
}

/**
 * In `dir`, a project with node-redis only (ioredis is an optional peer, so
 * npm leaves it out): the CLI runs on node-redis (--help, inspect and list
 * against a server where a lock is held; `inspect` on ioredis too, from
 * `ioredisApp`), and the testing helper and the demo, which run on ioredis,
 * say in one line what to install.
 */
async function nodeRedisOnly(dir: string, ioredisApp: string): Promise<void> {
  const server = await startRedisServer();
  const redis = new Redis({ host: '127.0.0.1', port: server.port });
  const locks = new LockClient(redis);
  const npxIn = (cwd: string, ...args: string[]) => run('npx', ['--no-install', 'redis-rwlock', ...args], cwd, 60_000);
  const npx = (...args: string[]) => npxIn(dir, ...args);
  try {
    await locks.lock('orders:{9}').acquireWrite();
    step('npx redis-rwlock --help, inspect and list: the CLI on node-redis');
    if (!(await npx('--help')).includes('Commands:')) throw new Error('redis-rwlock --help printed no commands');
    const inspected = JSON.parse(await npx('inspect', 'orders:{9}', '--json', '--redis', server.url)) as { mode: string };
    const listed = JSON.parse(await npx('list', '--json', '--redis', server.url)) as { locks: { resource: string; mode: string }[] };
    if (inspected.mode !== 'write' || listed.locks.map((l) => `${l.resource} ${l.mode}`).join() !== 'orders:{9} write') {
      throw new Error(`the CLI on node-redis saw ${JSON.stringify({ inspected, listed })}`);
    }
    const onIoredis = JSON.parse(await npxIn(ioredisApp, 'inspect', 'orders:{9}', '--json', '--redis', server.url)) as { mode: string };
    if (onIoredis.mode !== 'write') throw new Error(`the CLI on ioredis saw ${JSON.stringify(onIoredis)}`);
    console.log(`        ok: inspect saw the write lock on orders:{9} (and on ioredis); list saw ${listed.locks.length} lock`);
    step('redis-rwlock/testing and the demo without ioredis: one line naming it');
    for (const [what, args, says] of [
      ['require', ['-e', "require('redis-rwlock/testing')"], 'redis-rwlock/testing needs ioredis'],
      [
        'demo',
        ['node_modules/.bin/redis-rwlock', 'demo', '--duration', '1s'],
        'the demo runs on ioredis, which is not installed: npm install ioredis',
      ],
    ] as const) {
      const failure = await run(process.execPath, args, dir).then(
        () => 'it succeeded',
        (error: Error) => error.message,
      );
      if (!failure.includes(says)) throw new Error(`${what} without ioredis should say "${says}"; ${failure}`);
    }
    console.log('        ok: both say npm install ioredis');
  } finally {
    await locks.close();
    redis.disconnect();
    await server.stop();
  }
}

/**
 * The examples the package ships, copied out of node_modules/redis-rwlock
 * into `app`/examples (an ESM folder, as the README asks of a project) and
 * run as their header says, `npx tsx examples/<name>.ts`, each on its own
 * throw-away server: they import the package by its name, so this is what a
 * user who copies one gets. They are type-checked first (skipLibCheck off).
 */
async function shippedExamples(app: string): Promise<void> {
  const examples = path.join(app, 'examples');
  mkdirSync(examples);
  writeFileSync(path.join(examples, 'package.json'), JSON.stringify({ type: 'module' }));
  const names = readdirSync(path.join(app, 'node_modules/redis-rwlock/examples')).filter((f) => f.endsWith('.ts'));
  for (const name of names) {
    writeFileSync(path.join(examples, name), readFileSync(path.join(app, 'node_modules/redis-rwlock/examples', name)));
  }
  // The OpenTelemetry SDK 2.x takes @opentelemetry/api below 1.10, so the project's api (^1.9: 1.10) steps back to 1.9.
  const extras = [
    'tsx',
    '@opentelemetry/api@~1.9.0',
    '@opentelemetry/context-async-hooks@^2',
    '@opentelemetry/sdk-metrics@^2',
    '@opentelemetry/sdk-trace-base@^2',
  ];
  step(`npm install ${extras.join(' ')}: what the shipped examples import besides the package and ioredis`);
  await run('npm', ['install', ...extras, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], app);
  writeTsconfig(
    app,
    'tsconfig.examples.json',
    { noEmit: true },
    names.map((n) => `examples/${n}`),
  );
  step(`tsc (NodeNext, skipLibCheck off): the ${names.length} shipped examples type-check against the installed package`);
  await run(process.execPath, [TSC, '-p', 'tsconfig.examples.json'], app);
  for (const name of names) {
    step(`npx tsx examples/${name}: the shipped example, from the installed package`);
    const output = await run('npx', ['--no-install', 'tsx', `examples/${name}`], app, 120_000);
    console.log(output.trimEnd().split('\n').slice(-2).join('\n').replace(/^/gm, '        '));
  }
}

/** The bench's files the package ships: the pages the docs link to, and what those link to. */
const BENCH_SHIPPED = ['bench/README.md', 'bench/config.ts', 'bench/results/latest.md'];

/**
 * Every relative link in the tarball's Markdown (outside code) must name a
 * file inside the tarball; scripts/docs-check.ts checks the anchors.
 */
async function checkLinks(tarball: string, paths: readonly string[]): Promise<void> {
  const unpacked = path.join(tmp, 'unpacked');
  mkdirSync(unpacked);
  await run('tar', ['-xzf', tarball, '-C', unpacked], tmp);
  const broken: string[] = [];
  let links = 0;
  for (const file of paths.filter((p) => p.endsWith('.md'))) {
    let fenced = false;
    for (const [k, line] of readFileSync(path.join(unpacked, 'package', file), 'utf8')
      .split('\n')
      .entries()) {
      if (/^```/.test(line)) fenced = !fenced;
      if (fenced) continue;
      for (const [, target] of line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z][a-z+.-]*:/i.test(target!) || target!.startsWith('#')) continue; // https:, mailto:, this page
        links++;
        const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURIComponent(target!.split('#')[0]!)));
        if (!paths.includes(resolved)) broken.push(`${file}:${k + 1}: ${target} (${resolved})`);
      }
    }
  }
  if (broken.length > 0) throw new Error(`links in the package's docs name files it does not hold:\n  ${broken.join('\n  ')}`);
  step(`links: all ${links} relative links of the package's Markdown name files inside it`);
}

const tmp = mkdtempSync(path.join(os.tmpdir(), 'rwlock-packaging-'));
let servers: [RedisServerHandle, RedisClusterHandle] | undefined;
let failed = false;
try {
  step(build ? 'npm pack (its prepack builds)' : 'npm pack --ignore-scripts (dist/ as it is)');
  const packOutput = await run(
    'npm',
    ['pack', '--json', '--pack-destination', tmp, '--loglevel=error', ...(build ? [] : ['--ignore-scripts'])],
    ROOT,
  );
  // The JSON comes last, after what prepack's build printed.
  const packed = JSON.parse(packOutput.slice(packOutput.search(/^\[/m))) as {
    filename: string;
    files: { path: string }[];
    size: number;
  }[];
  const { filename, files, size } = packed[0]!;
  const tarball = path.join(tmp, filename);
  const paths = files.map((f) => f.path);
  const required = [
    'package.json',
    'dist/esm/index.js',
    'dist/esm/index.d.ts',
    'dist/esm/testing/index.js',
    'dist/esm/testing/index.d.ts',
    'dist/cjs/index.js',
    'dist/cjs/index.d.ts',
    'dist/cjs/package.json',
    'dist/cjs/testing/index.js',
    'dist/cjs/testing/index.d.ts',
    'dist/esm/opentelemetry/index.js',
    'dist/esm/opentelemetry/index.d.ts',
    'dist/cjs/opentelemetry/index.js',
    'dist/cjs/opentelemetry/index.d.ts',
    'scripts/ensure-redis.sh',
    'scripts/debian-mirror.sh', // ensure-redis.sh sources it
    // What the docs link to.
    ...readdirSync(path.join(ROOT, 'examples'))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `examples/${f}`),
    'bench/README.md',
    'bench/results/latest.md',
    'LICENSE',
    'CHANGELOG.md',
    'README.md',
    // The docs ship, so the README's links work in node_modules/redis-rwlock too.
    ...readdirSync(path.join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  const missing = required.filter((p) => !paths.includes(p));
  // No source maps without their sources, and of the bench only what the docs link to.
  const stray = paths.filter(
    (p) => /^(src|test|docs\/api)\//.test(p) || (p.startsWith('bench/') && !BENCH_SHIPPED.includes(p)) || p.endsWith('.map'),
  );
  if (missing.length > 0 || stray.length > 0) {
    throw new Error(`the tarball is wrong: missing ${JSON.stringify(missing)}, should not hold ${JSON.stringify(stray.slice(0, 10))}`);
  }
  step(`${filename}: ${files.length} files, ${(size / 1024).toFixed(0)} kB packed`);
  console.log(`        docs and examples: ${paths.filter((p) => /^(docs|examples|bench)\/|^README/.test(p)).join(' ')}`);
  await checkLinks(tarball, paths);
  // @arethetypeswrong/cli: every entry resolves, typed, under node10, node16 (import and require) and bundlers.
  step('attw: are the types wrong? (exits non-zero on any problem)');
  console.log(
    (await run(path.join(ROOT, 'node_modules/.bin/attw'), [tarball, '--format', 'table-flipped', '--no-color'], ROOT))
      .trimEnd()
      .replace(/^/gm, '        '),
  );

  const app = path.join(tmp, 'app');
  mkdirSync(app);
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'rwlock-consumer', version: '1.0.0', private: true }, null, 2));
  step(`npm install ${filename} ioredis @opentelemetry/api @types/node (in a fresh project)`);
  await run(
    'npm',
    [
      'install',
      tarball,
      // The ioredis the suites run on (package-lock.json): 6.1.0's own declarations import the untyped
      // redis-errors, so with skipLibCheck off (the examples' check below) tsc fails in ioredis' files.
      `ioredis@${LOCKED_IOREDIS}`,
      '@opentelemetry/api@^1.9',
      TYPES_NODE[0]!,
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      '--loglevel=error',
    ],
    app,
  );

  writeFileSync(path.join(app, 'esm.mjs'), ESM_CONSUMER);
  writeFileSync(path.join(app, 'cjs.cjs'), CJS_CONSUMER);
  step('node esm.mjs: import redis-rwlock, redis-rwlock/opentelemetry and redis-rwlock/testing, start a Cluster, lock, stop');
  console.log(`        ${(await run('node', ['esm.mjs'], app, 120_000)).trim()}`);
  step('node cjs.cjs: require redis-rwlock, redis-rwlock/opentelemetry and redis-rwlock/testing, start a Cluster, lock, stop');
  console.log(`        ${(await run('node', ['cjs.cjs'], app, 120_000)).trim()}`);

  step('npx redis-rwlock demo --duration 2s --processes 2 --json: the CLI and its demo, on an embedded Cluster');
  const demo = JSON.parse(
    (await run('npx', ['--no-install', 'redis-rwlock', 'demo', '--duration', '2s', '--processes', '2', '--json'], app, 120_000)).trim(),
  ) as {
    ok: boolean;
    reads: number;
    rebuilds: number;
    halfBuilt: number;
  };
  if (!demo.ok || demo.reads === 0 || demo.rebuilds === 0 || demo.halfBuilt !== 0)
    throw new Error(`the demo did not pass: ${JSON.stringify(demo)}`);
  console.log(`        ok: ${demo.reads} reads, ${demo.rebuilds} rebuilds, ${demo.halfBuilt} half-built reads`);

  await shippedExamples(app);

  writeFileSync(path.join(app, 'check-esm.mts'), ESM_TYPES);
  writeFileSync(path.join(app, 'check-cjs.cts'), CJS_TYPES);
  writeTsconfig(app, 'tsconfig.json', { noEmit: true }, ['check-esm.mts', 'check-cjs.cts']);
  step('tsc (NodeNext): the types of both the import and the require condition');
  await run(process.execPath, [TSC, '-p', 'tsconfig.json'], app);
  // Older setups (many NestJS apps) resolve like Node 10, without "exports": typesVersions finds redis-rwlock/testing.
  writeFileSync(path.join(app, 'check-node10.ts'), CJS_TYPES);
  writeTsconfig(app, 'tsconfig.node10.json', { module: 'CommonJS', moduleResolution: 'Node10', noEmit: true, esModuleInterop: true }, [
    'check-node10.ts',
  ]);
  step('tsc (moduleResolution Node10): redis-rwlock and redis-rwlock/testing resolve, typed');
  await run(process.execPath, [TSC, '-p', 'tsconfig.node10.json'], app);

  // TypeScript 7 removed moduleResolution node10 (TS5108), so the Node10 check above stays on 5.x.
  checkAlone(app, 'ioredis');
  step('@types/node 20 and newest, tsc 5 and 7, NodeNext and bundler (skipLibCheck off): the ioredis 6 project, ESM and CJS');
  await typeMatrix(app, 'ioredis6', ['check-esm.mts'], ['check-cjs.cts']);

  // Each other client library alone: the servers are this script's, as redis-rwlock/testing needs ioredis.
  const app5 = await typedApp(tarball, 'ioredis5', 'ioredis@^5', 'an ioredis 5 Redis', IOREDIS5_CONSUMER);
  const copies = (await run('npm', ['ls', 'ioredis', '--all', '--parseable'], app5)).trim().split('\n');
  if (copies.length !== 1)
    throw new Error(`expected one copy of ioredis (the application's), found ${copies.length}: ${copies.join(', ')}`);
  servers = [await startRedisServer(), await startRedisCluster({ masters: 3, replicasPerMaster: 0 })];
  const env = {
    RWLOCK_PORT: String(servers[0].port),
    RWLOCK_CLUSTER: servers[1].startupNodes.map((n) => `${n.host}:${n.port}`).join(','),
  };
  await typedApp(tarball, 'iovalkey', 'iovalkey', 'an iovalkey Redis', IOVALKEY_CONSUMER, env);
  const nodeRedis = await typedApp(tarball, 'node-redis', 'redis@^5', 'a node-redis 5 client and Cluster', NODE_REDIS_CONSUMER, env);
  await typedApp(tarball, 'node-redis6', 'redis@^6', 'a node-redis 6 client and Cluster', NODE_REDIS_CONSUMER, env);
  await typedApp(tarball, 'glide', '@valkey/valkey-glide@^2', 'a GLIDE client and Cluster client', GLIDE_CONSUMER, env);
  await nodeRedisOnly(nodeRedis, app);
  console.log('        client alone   @types/node  TypeScript  resolution  result');
  for (const row of typeRows) {
    console.log(
      `        ${row.client.padEnd(14)} ${row.typesNode.padEnd(12)} ${row.typescript.padEnd(11)} ${row.resolution.padEnd(11)} ${row.result}`,
    );
  }
  step(
    'OK: the packed package works from a fresh project, in ESM and CJS, with its types (TypeScript 5 and 7), on ioredis 6 and 5, iovalkey, node-redis 5 and 6 and GLIDE, each alone, and its CLI on node-redis alone',
  );
} catch (error) {
  failed = true;
  console.error(error instanceof Error ? error.message : error);
  step('FAILED');
} finally {
  for (const server of servers ?? []) await server.stop();
  if (keep) console.log(`kept ${tmp}`);
  else rmSync(tmp, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;
