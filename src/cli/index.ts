#!/usr/bin/env node
// The `redis-rwlock` command (package.json "bin"). Everything is in main.ts,
// so that tests and other tools can run the CLI in-process.
import { main } from './main.js';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`redis-rwlock: ${String((error as Error)?.stack ?? error)}\n`);
    process.exitCode = 1;
  },
);
