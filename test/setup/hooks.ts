/**
 * Mocha root hooks (loaded through the "require" of every `.mocharc.*.json`).
 *
 * - Stops the shared standalone server and cluster, and any other server a
 *   test started and left running, once the whole run is over, also when
 *   tests failed. (`src/testing` kills leftovers on process exit as a last resort.)
 * - Picks the server binaries by `TEST_SERVER` (`./server.ts`).
 * - With `TEST_LUA_DIR=<dir>`, builds the scripts from that directory
 *   instead of lua/ (`./lua-dir.ts`: the mutation tests).
 * - With `TEST_DECLARED_KEYS=1`, runs every script as the declared-keys guard
 *   builds it, and fails the run, naming each test in which a script touched
 *   an undeclared key (`./declared-keys.ts`).
 * - Turns unhandled promise rejections into failures: mocha only re-emits
 *   them, and without another listener they would vanish. Throwing here makes
 *   them uncaught exceptions, which mocha charges to the running test.
 */
// First: TEST_SERVER picks the server binaries before anything starts one.
import './server.js';
// With TEST_LUA_DIR, the scripts of that directory (a mutated copy of lua/), before any is hashed or guarded.
import './lua-dir.js';
// Then, with TEST_DECLARED_KEYS=1, the declared-keys guard's build of the scripts, before any is hashed.
import { checkDeclaredKeys, guarding, noteDeclaredKeys } from './declared-keys.js';
import { stopSharedTopologies } from './topologies.js';

/** Mocha's parallel mode runs the files in worker processes, which it numbers. */
const IN_PARALLEL_WORKER = process.env.MOCHA_WORKER_ID !== undefined;

process.on('unhandledRejection', (reason) => {
  throw reason;
});

export const mochaHooks = {
  afterEach(this: Mocha.Context): void {
    if (guarding) noteDeclaredKeys(this.currentTest?.fullTitle() ?? '(a hook)');
  },
  async afterAll(this: Mocha.Context): Promise<void> {
    this.timeout(Math.max(this.timeout(), 30_000));
    // A parallel run's worker runs this after each of its files, and takes the next file with the
    // same servers: they stop with the worker (src/testing's exit hook), not after every file.
    if (!IN_PARALLEL_WORKER) await stopSharedTopologies();
    if (guarding) checkDeclaredKeys();
  },
};
