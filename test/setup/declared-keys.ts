/**
 * With `TEST_DECLARED_KEYS=1`: every library script runs as the declared-keys
 * guard builds it (test/support/declared-keys.ts), and a script call that
 * touched a key it did not declare fails the run at its end, naming the
 * test and the key, even when the caller swallowed the error (the test
 * itself may fail first). Imported by the root hooks before any test.
 */
import { guardLibraryScripts, recordViolations, violations } from '../support/declared-keys.js';

export const guarding = process.env.TEST_DECLARED_KEYS === '1';

if (guarding) {
  guardLibraryScripts();
  recordViolations();
}

/** What each test's script calls touched undeclared, by test: the run fails at its end with all of them. */
const found: string[] = [];

/** After each test: notes the undeclared keys its script calls touched. */
export function noteDeclaredKeys(test: string): void {
  if (violations.length === 0) return;
  found.push(`${test}:\n    ${[...new Set(violations.splice(0))].join('\n    ')}`);
}

/** After the run: throws (failing it) when any script touched a key it did not declare. */
export function checkDeclaredKeys(): void {
  if (found.length === 0) return;
  throw new Error(`scripts touched keys they did not declare (TEST_DECLARED_KEYS=1), in ${found.length} test(s):\n  ${found.join('\n  ')}`);
}
