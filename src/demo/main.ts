/**
 * Entry point of `npm run demo` (run through tsx) and of
 * `node dist/esm/demo/main.js`: the demo on its own, without the CLI.
 *
 * @module
 */
import { runDemo } from './index.js';

runDemo(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`redis-rwlock demo: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
