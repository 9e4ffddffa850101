/**
 * Mocha root hooks (loaded through `.mocharc.json` "require").
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

process.on('unhandledRejection', (reason) => {
  throw reason;
});

export const mochaHooks = {
  afterEach(this: Mocha.Context): void {
    if (guarding) noteDeclaredKeys(this.currentTest?.fullTitle() ?? '(a hook)');
  },
  async afterAll(this: Mocha.Context): Promise<void> {
    this.timeout(Math.max(this.timeout(), 30_000));
    await stopSharedTopologies();
    if (guarding) checkDeclaredKeys();
  },
};
